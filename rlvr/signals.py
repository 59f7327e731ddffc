"""Per-step signals that answer "is it working?" (issue #13, item 1), beside what metrics.jsonl already held.

- reflection_rate: the share of a step's completions with a self-correction phrase ("wait", "let me check", ...).
  DeepSeek-R1's "aha moment" is the policy starting to write such phrases during RL; tracking their rate shows
  whether (and when) that happens. Phrases match whole words, case-insensitively ("await" is not "wait").
- tokens_per_s: completion tokens of the step over the step's wall time (every phase).
- peak_memory_gb: the accelerator's peak allocation on CUDA, else the process's peak resident set (Linux, macOS).
And Diagnostics: a one-line explanation in the log when a known failure pattern begins.
"""
from __future__ import annotations

import functools
import math
import re
import resource
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence


@functools.lru_cache(maxsize=8)
def _phrase_pattern(phrases: tuple[str, ...]) -> re.Pattern[str]:
    words = sorted((p.strip() for p in phrases if p.strip()), key=len, reverse=True)
    # \s+ between the words of a phrase: "let me\ncheck" is the same phrase across a line break
    alternatives = "|".join(r"\s+".join(re.escape(w) for w in phrase.split()) for phrase in words)
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


def reflection_rate(completions: Sequence[str], phrases: Sequence[str]) -> float:
    """Share of completions containing at least one of `phrases` (0.0 for no completions or no phrases)."""
    if not completions or not any(p.strip() for p in phrases):
        return 0.0
    pattern = _phrase_pattern(tuple(phrases))
    return sum(1 for text in completions if pattern.search(text)) / len(completions)


def tokens_per_second(completion_tokens: int, seconds: float) -> float:
    return completion_tokens / seconds if seconds > 0 else 0.0


def peak_memory_gb(device_type: str) -> float:
    """CUDA: torch's peak allocation on the current device; otherwise this process's peak RSS."""
    if device_type == "cuda":
        import torch

        return torch.cuda.max_memory_allocated() / 1e9
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e9 if sys.platform == "darwin" else peak * 1024 / 1e9  # bytes on macOS, KiB on Linux


# Thresholds of the failure patterns below (per-token means, as metrics.jsonl logs them).
KL_ALARM = 1.0  # k3 KL to the reference per token; the default run stays under ~0.2 once past its first steps
# |loss| below this prints as +0.0000 in the step line: what users ask about is the displayed 0, which at mu = 1 is
# a float round-off away from 0 (a step's advantages sum to ~1e-8, not exactly 0)
ZERO_LOSS = 5e-5
ENTROPY_FLOOR = 0.05  # nats per token: sampling at T = 1 is then close to greedy and groups start to tie
HACKING_DROP = 0.05  # a fall of held-out pass@1 this large while the training reward rises


@dataclass
class Diagnostics:
    """Known failure patterns of RL runs -> one explanatory line each, printed on the step a pattern begins (not on
    every step it lasts). The patterns are the questions users of GRPO trainers ask most ("loss is 0", "reward is
    0", "reward fluctuates", KL or entropy running away); the lines say what it means and what to try."""

    updates_per_batch: int
    active: set[str] = field(default_factory=set)
    said: set[str] = field(default_factory=set)
    rewards_since_eval: list[float] = field(default_factory=list)
    last_eval: tuple[float, float] | None = None  # (eval/pass@1, mean training reward of the steps before it)

    def check(self, record: dict[str, Any]) -> list[str]:
        step, found = record.get("step"), self._patterns(record)
        # on onset only; the zero loss (normal at mu = 1) once per run
        lines = [text for name, text in found.items() if name not in self.active and name not in self.said]
        self.active = set(found)
        self.said |= {"zero_loss"} & set(found)
        hacking = self._held_out(record)
        return [f"note (step {step}): {line}" for line in lines + hacking]

    def _patterns(self, r: dict[str, Any]) -> dict[str, str]:
        out = {}
        if r.get("zero_std_fraction") == 1.0:
            out["tied"] = ("no learning signal: every group's rewards tied (the task is too easy or too hard for "
                           "this model) - try rollout.dynamic_sampling.enabled=true or curriculum.enabled=true")
        loss = r.get("loss")
        if self.updates_per_batch == 1 and _finite(loss) and abs(loss) < ZERO_LOSS:
            out["zero_loss"] = ("the loss shows as 0: expected at mu = 1 - the ratio is 1 and each group's "
                                "advantages sum to 0, so the loss's value vanishes (with beta x KL, 0 while the policy "
                                "equals the reference) while its gradient does not; watch reward and grad_norm")
        kl = r.get("kl")
        if _finite(kl) and kl > KL_ALARM:
            out["kl"] = (f"KL to the reference is {kl:.3g} per token (> {KL_ALARM}): the policy is moving far from "
                         "it - lower optimizer.lr or raise algorithm.beta" + _largest_token(r.get("kl_max")))
        entropy = r.get("entropy")
        if _finite(entropy) and entropy < ENTROPY_FLOOR:
            out["entropy"] = (f"entropy is collapsing ({entropy:.3g} nats per token): sampling is nearly "
                              "deterministic and groups will tie - lower optimizer.lr or raise rollout.temperature")
        return out

    def _held_out(self, r: dict[str, Any]) -> list[str]:
        """Reward rising while held-out accuracy falls: compared between consecutive evaluations."""
        if _finite(r.get("reward_mean")):
            self.rewards_since_eval.append(r["reward_mean"])
        accuracy = r.get("eval/pass@1")
        if not _finite(accuracy) or not self.rewards_since_eval:
            return []
        reward = sum(self.rewards_since_eval) / len(self.rewards_since_eval)
        previous, self.last_eval, self.rewards_since_eval = self.last_eval, (accuracy, reward), []
        if previous is None or not (reward > previous[1] and accuracy <= previous[0] - HACKING_DROP):
            return []
        return [f"possible reward hacking: the training reward rose ({previous[1]:.3f} -> {reward:.3f}) while "
                f"held-out eval/pass@1 fell ({previous[0]:.3f} -> {accuracy:.3f}) - read samples.jsonl for "
                "completions that satisfy the verifier without solving the task"]


def _largest_token(kl_max: Any) -> str:
    """One token's share of a KL alarm: a spike carried by one sampled token the policy made rare while the reference
    still likes it (k3 ~ pi_ref / pi there) passes on its own; a drift of every token does not."""
    return (f" (largest single token: {kl_max:.3g}; far above the mean, it is a few sampled tokens the policy made "
            "rare, and a one-step spike of that kind passes)") if _finite(kl_max) and kl_max > 0 else ""


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
