"""Control runs: `reward.control=random | format_only` trains on a reward that carries no
information about the answer, so that a real run's gain can be told apart from what any reward would have done.

Shao et al. 2025 ("Spurious Rewards: Rethinking Training Signals in RLVR") found that RLVR on Qwen2.5-Math gains
much of the real reward's improvement from random rewards (clipping bias amplifies the model's own habits) and from
a format reward (an answer in \\boxed{}, right or wrong). Here:

random: each step's rewards are shuffled over the batch's scorable completions, every component with the same
    permutation. A permutation rather than Shao et al.'s Bernoulli(gamma) draw: it keeps the step's reward mean (and
    its whole distribution, non-binary rewards included) exactly, not only in expectation, so the control differs
    from the real run in one thing only, which completion earned the reward. The torch generator draws it, so a
    resumed run draws what the uninterrupted one would (the checkpoint saves that state).
format_only: the format verifiers (FORMAT_VERIFIERS: they never check the answer) score as they do; each answer
    verifier pays 1 for an answer it could read, right or wrong (outcome CORRECT or WRONG), 0 otherwise: Shao et al.'s
    format reward, and a signal even for a run whose only verifier is math. Reward functions and the reward model
    weigh 0 (logged, not paid): rlvr cannot tell whether a function reads the answer column.

Multi-turn tasks (agents) take both: the environment's verdict on an episode's final state is one more answer check
(format_only pays a state it could judge, right or wrong), and a shuffle moves whole episodes' rewards. Per-turn
process credit (episode.credit=process) is refused with a control: it pays the turns that did the work, which neither
control hides (rlvr/config/rules.py).

In both, the verdicts in samples.jsonl and the outcome counts in metrics.jsonl stay the real ones (the control's
own accuracy is visible as it trains), the length shaping (reward.overlong_*) and the KL stay as in the real run,
and evaluation scores with the real verifiers: only the reward the update sees is changed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import torch

from rlvr.rewards.rewarder import is_verifier, weigh
from rlvr.types import Outcome, Prompt, RolloutBatch, ScoredBatch, Verdict

# Every name of rlvr.verifiers.VERIFIERS is in exactly one of the two (tests/test_control.py checks): a new verifier
# must be classified before format_only can run with it.
FORMAT_VERIFIERS = ("format", "answer_format", "think_format", "tag_count", "language")  # never check the answer
ANSWER_VERIFIERS = ("math", "code", "tool_call", "reasoning_gym", "steps")  # check the answer (or its steps)
STATE = "environment"  # an episode's final-state verdict (rlvr.agents.scoring.STATE): an answer check too
READ = (Outcome.CORRECT, Outcome.WRONG)  # an answer verifier found an answer to check


def training_weights(components: Mapping[str, tuple[Any, float]], control: str) -> dict[str, float]:
    """The weight of each component in the reward the update sees: as configured, except under format_only, where
    whatever is not a verifier (reward functions, the reward model) weighs 0."""
    if control != "format_only":
        return {name: weight for name, (_, weight) in components.items()}
    return {name: weight if is_verifier(component) else 0.0 for name, (component, weight) in components.items()}


def format_only(scored: ScoredBatch, weights: Mapping[str, float]) -> ScoredBatch:
    """Answer verifiers' verdicts re-scored 1 where an answer was read, 0 elsewhere; the total re-weighed."""
    verdicts = {name: [_answer_read(v) for v in found] if name in ANSWER_VERIFIERS + (STATE,) else list(found)
                for name, found in scored.verdicts.items()}
    return weigh(verdicts, weights)


def _answer_read(verdict: Verdict) -> Verdict:
    paid = 1.0 if verdict.outcome in READ else 0.0
    return replace(verdict, score=paid, detail=f"format_only control pays {paid:g} | {verdict.detail}")


def shuffled(scored: ScoredBatch) -> ScoredBatch:
    """The rewards and every component's scores permuted, together, over the scorable rows (an unscorable row keeps
    its place and its 0); the verdicts stay where they were computed."""
    rows = torch.nonzero(scored.scorable, as_tuple=True)[0]
    order = rows[torch.randperm(len(rows), device=rows.device)]

    def permute(values: torch.Tensor) -> torch.Tensor:
        out = values.clone()
        out[rows] = values[order]
        return out

    return ScoredBatch(permute(scored.rewards), scored.scorable, scored.verdicts,
                       {name: permute(scores) for name, scores in scored.scores.items()})


@dataclass
class _Controlled:
    pending: Any  # the service's ScoreFuture
    control: str
    weights: Mapping[str, float]

    def result(self, timeout: float | None = None) -> ScoredBatch:
        scored = self.pending.result(timeout)
        return shuffled(scored) if self.control == "random" else format_only(scored, self.weights)


class ControlledService:
    """A reward service (VerifierPool or RayRewardService) whose results are the control's: what the GRPO stages
    call of a service (submit_rollout, stats, close), and submit/score as the pool has them."""

    def __init__(self, service: Any, control: str, weights: Mapping[str, float]):
        if control not in ("random", "format_only"):
            raise ValueError(f"unknown reward.control {control!r}; allowed: random, format_only")
        self.service, self.control, self.weights = service, control, dict(weights)

    def submit(self, prompts: Sequence[Prompt], completions: Sequence[str], *args: Any, **kwargs: Any) -> _Controlled:
        return _Controlled(self.service.submit(prompts, completions, *args, **kwargs), self.control, self.weights)

    def submit_rollout(self, batch: RolloutBatch) -> _Controlled:
        return _Controlled(self.service.submit_rollout(batch), self.control, self.weights)

    def score_rollout(self, batch: RolloutBatch) -> ScoredBatch:
        return self.submit_rollout(batch).result()

    def stats(self) -> dict[str, int]:
        return self.service.stats()

    def close(self) -> None:
        self.service.close()
