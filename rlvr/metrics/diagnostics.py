"""Per-step signals that answer "is it working?", beside what metrics.jsonl already held.

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


def reflects(text: str, phrases: Sequence[str]) -> bool:
    """Whether `text` holds one of `phrases` (whole words, any case); False when there are no phrases."""
    return any(p.strip() for p in phrases) and _phrase_pattern(tuple(phrases)).search(text) is not None


def reflection_rate(completions: Sequence[str], phrases: Sequence[str]) -> float:
    """Share of completions containing at least one of `phrases` (0.0 for no completions or no phrases)."""
    if not completions:
        return 0.0
    return sum(reflects(text, phrases) for text in completions) / len(completions)


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
# nats per token. On its own a low mean says little: in the default run (arithmetic, ~16 tokens, most of them
# "Answer:" boilerplate) it fell to 0.047 at step 10 while all 4 training groups still had reward spread and the
# reward kept rising. So the note also needs the consequence it warns of: groups tying.
ENTROPY_FLOOR = 0.05
TIED_SHARE = 0.5  # the training batch's tied-group share from which low entropy is costing the run its signal
SOLVED = 0.95  # share of correct verdicts from which ties mean "solved", not "stuck"
# Share of correct verdicts from which ties and low entropy mean "converged": the default run of 2026-11-26 spent its
# steps 20-30 here (entropy 0.005-0.051, 0-4 informative groups among 16 drawn, 75-100 % correct except steps 24 and
# 30, each alone: 50 % and 72 %), the kind of run that ends near held-out pass@1 0.90. Below it, for two steps in a
# row, a collapsed policy is stuck rather than done, and the advice applies.
CONVERGED = 0.75
HACKING_DROP = 0.05  # a fall of held-out pass@1 this large while the training reward rises
# Steps in a row a pattern must hold before its note: one step is noise, not a pattern. On the default run of
# 2026-11-26 (30 steps) a step whose 16 drawn problems all tied (step 20: entropy 0.009, 3 groups always right, 1
# always wrong) was followed by one with 4 informative groups, and a KL above 1 came as one-step spikes in an earlier
# default run (the step-18 example of docs/runs.md): advice would change settings for what the next step undoes.
PERSIST = {"kl": 2, "tied": 2, "entropy": 2}
# The default 32 new tokens cut 84-91 % of word-problem answers and nothing said so. Above this share of a
# step's completions cut at the length cap, the reward mostly measures where the cut fell: said once per run.
TRUNCATED_SHARE = 0.25
ONCE = {"zero_loss", "truncated"}  # patterns said once per run, not at each onset
WARNINGS = {"truncated"}  # lines that say the run is set up to measure the wrong thing, not how it is going


@dataclass(frozen=True)
class RunFacts:
    """What the run already does, so that a note never advises turning on what is on."""

    updates_per_batch: int = 1
    dynamic_sampling: bool = False
    max_extra_prompts: int = 0
    curriculum: bool = False
    clip_higher: bool = False  # DAPO clip-higher: the upper clip range above the lower one
    entropy_bonus: bool = False
    length_budget: str = ""  # the setting that cuts a completion, with its value: "rollout.max_new_tokens=32"

    @classmethod
    def of(cls, config: Any) -> "RunFacts":
        """From a RunConfig whose dynamic_sampling.enabled is decided (config/rules.with_dynamic_sampling_decided)."""
        from rlvr.config.rules import EPISODE_TASKS, REGISTERED_TASKS

        a, sampling, e = config.algorithm, config.rollout.dynamic_sampling, config.episode
        episodes = config.task.name in EPISODE_TASKS or REGISTERED_TASKS.get(config.task.name, False)
        budget = (f"episode.tokens_per_turn={e.tokens_per_turn} / episode.tokens_per_episode={e.tokens_per_episode}"
                  if episodes else f"rollout.max_new_tokens={config.rollout.max_new_tokens}")
        return cls(a.updates_per_batch, sampling.enabled is True, sampling.max_extra_prompts,
                   config.curriculum.enabled, a.clip_high > a.clip_epsilon, a.entropy_coef > 0, budget)


@dataclass
class Diagnostics:
    """Known failure patterns of RL runs -> one explanatory line each, printed on the step a pattern begins (not on
    every step it lasts). The patterns are the questions users of GRPO trainers ask most ("loss is 0", "reward is
    0", "reward fluctuates", KL or entropy running away); the lines say what it means and, where the run does
    not do it already, what to try."""

    facts: RunFacts = field(default_factory=RunFacts)
    active: set[str] = field(default_factory=set)
    said: set[str] = field(default_factory=set)
    streak: dict[str, int] = field(default_factory=dict)  # pattern -> consecutive steps it has held
    rewards_since_eval: list[float] = field(default_factory=list)
    last_eval: tuple[float, float] | None = None  # (eval/pass@1, mean training reward of the steps before it)

    def check(self, record: dict[str, Any]) -> list[str]:
        step, seen = record.get("step"), self._patterns(record)
        self.streak = {name: self.streak.get(name, 0) + 1 for name in seen}
        found = {name: text for name, text in seen.items() if self.streak[name] >= PERSIST.get(name, 1)}
        # on onset only; the patterns in ONCE (a zero loss is normal at mu = 1) once per run
        lines = [(name, text) for name, text in found.items() if name not in self.active and name not in self.said]
        self.active = set(found)
        self.said |= ONCE & set(found)
        lines += [("hacking", text) for text in self._held_out(record)]
        return [f"{'warning' if name in WARNINGS else 'note'} (step {step}): {text}" for name, text in lines]

    def _patterns(self, r: dict[str, Any]) -> dict[str, str]:
        out = {}
        solved = _solved_share(r)
        if r.get("zero_std_fraction") == 1.0:
            out["tied"] = _tied_note(self.facts, r, solved)
        loss = r.get("loss")
        if self.facts.updates_per_batch == 1 and _finite(loss) and abs(loss) < ZERO_LOSS:
            out["zero_loss"] = ("the loss shows as 0: expected at mu = 1 - the ratio is 1 and each group's "
                                "advantages sum to 0, so the loss's value vanishes (with beta x KL, 0 while the policy "
                                "equals the reference) while its gradient does not; watch reward and grad_norm")
        kl = r.get("kl")
        if _finite(kl) and kl > KL_ALARM:
            out["kl"] = (f"KL to the reference is {kl:.3g} per token (> {KL_ALARM}) two steps running: the policy "
                         "is moving far from it - lower optimizer.lr or raise algorithm.beta"
                         + _largest_token(r.get("kl_max")))
        entropy = r.get("entropy")
        if _finite(entropy) and entropy < ENTROPY_FLOOR and _losing_signal(r) and not solved >= CONVERGED:
            out["entropy"] = (f"entropy is collapsing ({entropy:.3g} nats per token) and groups tie while the "
                              "task is not solved: sampling has stopped exploring" + _exploration_advice(self.facts))
        note = truncation_note(r.get("truncated_fraction"), self.facts.length_budget)
        if note:
            out["truncated"] = note
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


def truncation_note(fraction: Any, budget: str) -> str | None:
    """The warning for a step where more than TRUNCATED_SHARE of the completions were cut at the length cap `budget`
    (a setting and its value); None below it."""
    if not _finite(fraction) or fraction <= TRUNCATED_SHARE:
        return None
    settings = " or ".join(part.split("=")[0] for part in budget.split(" / ")) if budget else "the cap"
    return (f"{fraction:.0%} of this step's completions were cut at {budget or 'the length cap'} before they ended - "
            "a cut one earns reward only for an explicit final answer it already wrote, so the reward mostly measures "
            f"where the cut fell; raise {settings} (worked answers to word problems take a few hundred tokens) and "
            "watch truncated_fraction in metrics.jsonl fall")


def _solved_share(r: dict[str, Any]) -> float:
    """Share of the step's verdicts that were correct (NaN when the record has no outcome counts)."""
    counts = {k: v for k, v in r.items() if k.startswith("outcomes/") and _finite(v)}
    total = sum(counts.values())
    return sum(v for k, v in counts.items() if k.endswith("/correct")) / total if total else math.nan


def _losing_signal(r: dict[str, Any]) -> bool:
    """Ties cost this step its signal: half the training groups tied, or dynamic sampling hit its cap and had to
    fill the batch with tied groups."""
    tied = r.get("zero_std_fraction")
    return (_finite(tied) and tied >= TIED_SHARE) or (r.get("dynamic_sampling/topped_up") or 0) > 0


def _tied_note(facts: RunFacts, r: dict[str, Any], solved: float) -> str:
    extra = r.get("dynamic_sampling/extra_prompts")
    drawn = (f", also among the {extra} extra problems dynamic sampling drew" if facts.dynamic_sampling
             and _finite(extra) else "")
    head = f"no learning signal: every group's rewards tied{drawn}"
    if solved >= SOLVED:  # facts, not faults: nothing here asks to change the run
        return (f"{head} - the model solves these problems every time, so this step teaches nothing; the held-out "
                "evaluation says whether it carries over")
    if solved >= CONVERGED:
        return (f"{head} - the model answers each problem the same way every time, {solved:.0%} of them right: "
                "training has converged at this difficulty; the held-out evaluation says how far it carries")
    tries = []
    if not facts.dynamic_sampling:
        tries.append("rollout.dynamic_sampling.enabled=true")
    elif _finite(extra) and extra >= facts.max_extra_prompts:
        tries.append(f"a higher rollout.dynamic_sampling.max_extra_prompts (now {facts.max_extra_prompts})")
    if not facts.curriculum:
        tries.append("curriculum.enabled=true")
    cause = "the task is too hard for this model" if solved == 0 else "the task is too easy or too hard for this model"
    return f"{head} ({cause}) - " + (f"try {' or '.join(tries)}" if tries else "an easier task, or SFT first")


def _exploration_advice(facts: RunFacts) -> str:
    tries = ["lower optimizer.lr"]
    if not facts.clip_higher:
        tries.append("algorithm.clip_epsilon_high=0.28 (DAPO clip-higher)")
    if not facts.entropy_bonus:
        tries.append("a small algorithm.entropy_coef")
    return " - try " + ", ".join(tries[:-1]) + " or " + tries[-1]


def _largest_token(kl_max: Any) -> str:
    """One token's share of a KL alarm: a few sampled tokens the policy made rare while the reference still likes
    them (k3 ~ pi_ref / pi there) can carry the mean, which a drift of every token would not."""
    return (f" (largest single token: {kl_max:.3g}; when far above the mean, a few sampled tokens the policy made "
            "rare carry most of it)") if _finite(kl_max) and kl_max > 0 else ""


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
