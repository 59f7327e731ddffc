"""Verdicts -> one reward per completion, plus per-verifier, per-outcome counts for logging.

The total reward of completion i is the weighted sum of its component scores,

    reward[i] = sum over components k of  weight_k * score_k[i]

with no normalization by the sum of weights: TRL's GRPOTrainer sums `reward_weights * rewards` the same
way, so weights carry over unchanged (weights summing to 1 keep rewards in [0, 1]). A component is either
a Verifier (rlvr.verifiers) or a TRL-style reward function

    f(prompts: list[str], completions: list[str], **columns: list) -> list[float | None]

where None means "not applicable": it contributes 0, as TRL's nansum does, and is counted as UNPARSEABLE.
Every score is validated into [0, 1] (types.Verdict: only CORRECT earns a full score), so a buggy or
raising component yields ERROR verdicts with score 0 and never stops a training step.
"""
from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import torch

from rlvr.types import Outcome, Prompt, RolloutBatch, ScoredBatch, Verdict
from rlvr.verifiers import Verifier, build_verifiers, verify_many
from rlvr.verifiers.base import error_verdict

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig

RewardFunction = Callable[..., Sequence[Any]]  # f(prompts, completions, **columns) -> list[float | None]
Component = Verifier | RewardFunction


def is_verifier(component: Any) -> bool:
    return callable(getattr(component, "verify", None))


def prompt_text(prompt: Prompt) -> str:
    """The text a TRL reward function sees as its prompt: the last user turn (the question)."""
    for message in reversed(prompt.messages):
        if message.get("role") == "user":
            return message.get("content", "")
    return prompt.messages[-1].get("content", "") if prompt.messages else ""


def batch_columns(prompts: Sequence[Prompt]) -> dict[str, list[Any]]:
    """Prompt.columns as TRL passes dataset columns (a list per key), plus the reference as 'answer'."""
    keys = dict.fromkeys(key for prompt in prompts for key in prompt.columns)
    columns = {key: [prompt.columns.get(key) for prompt in prompts] for key in keys}
    columns.setdefault("answer", [prompt.reference for prompt in prompts])
    return columns


def verdict_from_value(value: Any) -> Verdict:
    """A reward function's return value as a Verdict: None -> UNPARSEABLE, non-finite/non-number ->
    ERROR, otherwise the value clamped to [0, 1]; exactly 1 is CORRECT, anything lower is WRONG."""
    if value is None:
        return Verdict(Outcome.UNPARSEABLE, 0.0, "reward function returned None")
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if not isinstance(value, numbers.Real):  # bool and numpy scalars are Real too
        return error_verdict(f"reward function returned {type(value).__name__} {str(value)[:40]!r}, not a number")
    number = float(value)
    if not math.isfinite(number):
        return error_verdict(f"reward function returned {number}")
    score = min(max(number, 0.0), 1.0)
    detail = f"reward {number:g}" + ("" if score == number else " clamped to [0, 1]")
    return Verdict(Outcome.CORRECT if score == 1.0 else Outcome.WRONG, score, detail)


def call_reward_function(function: RewardFunction, prompts: Sequence[Prompt],
                         completions: Sequence[str]) -> list[Verdict]:
    """Run a TRL-style reward function on the batch; any failure becomes ERROR verdicts for the batch."""
    name = getattr(function, "__name__", type(function).__name__)
    try:
        values = function(prompts=[prompt_text(p) for p in prompts], completions=list(completions),
                          **batch_columns(prompts))
        values = list(values)
    except Exception as err:
        return [error_verdict(f"reward function {name!r} raised", err)] * len(completions)
    if len(values) != len(completions):
        failure = error_verdict(f"reward function {name!r} returned {len(values)} values "
                                f"for {len(completions)} completions")
        return [failure] * len(completions)
    return [verdict_from_value(value) for value in values]


class Rewarder:
    """Named, weighted components -> ScoredBatch. Build once at set-up; `score` once per rollout batch."""

    def __init__(self, components: Mapping[str, tuple[Component, float]]):
        if not components:
            raise ValueError("Rewarder needs at least one (verifier or reward function, weight)")
        for name, (component, weight) in components.items():
            if not (is_verifier(component) or callable(component)):
                raise TypeError(f"reward component {name!r} is neither a Verifier nor a callable")
            if not math.isfinite(weight):
                raise ValueError(f"reward component {name!r} has non-finite weight {weight}")
        self.components = {name: (component, float(weight)) for name, (component, weight) in components.items()}

    @classmethod
    def from_task(cls, task: Any) -> "Rewarder":
        """The verifiers named in `task.verifiers` (a TaskConfig), each with its configured weight."""
        verifiers = build_verifiers(task)
        return cls({name: (verifier, task.verifiers[name]) for name, verifier in verifiers.items()})

    def score(self, prompts: Sequence[Prompt], completions: Sequence[str]) -> ScoredBatch:
        """Score completion i against prompts[i].reference with every component."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions; pass one prompt "
                             "per completion (see score_rollout for grouped batches)")
        references = [prompt.reference for prompt in prompts]
        verdicts: dict[str, list[Verdict]] = {}
        for name, (component, _) in self.components.items():
            if is_verifier(component):
                verdicts[name] = verify_many(component, completions, references)
            else:
                verdicts[name] = call_reward_function(component, prompts, completions)
        return weigh(verdicts, {name: weight for name, (_, weight) in self.components.items()})

    def score_rollout(self, batch: RolloutBatch) -> ScoredBatch:
        """Score a grouped RolloutBatch: row i is checked against batch.prompt_of(i)."""
        return self.score([batch.prompt_of(row) for row in range(batch.size)], batch.completions)

    __call__ = score


def build_rewarder(config: RunConfig) -> Rewarder:
    """The task's verifiers plus, when reward.model_path is set, the reward model as the component
    "reward_model" with weight reward.model_weight (rlvr.rewards.reward_model; R1's last RL pass, issue #10).
    A builder, not a component: every entry point (train, eval, generate, sample) composes the rewarder here from
    three sections of its run config (task, reward, model); the Rewarder itself sees no config (issue 25)."""
    from rlvr.rewards.reward_model import reward_model_components  # imports transformers only when a path is set

    verifiers = Rewarder.from_task(config.task).components
    return Rewarder({**verifiers, **reward_model_components(config.reward, config.model)})


def reward_functions(rewarder: Rewarder) -> dict[str, tuple[RewardFunction, float]]:
    """The components that are not verifiers (TRL-style functions, the reward model), for RewardService's
    `reward_functions`: it runs them in the trainer process, so a model is never sent to a worker."""
    return {name: (component, weight) for name, (component, weight) in rewarder.components.items()
            if not is_verifier(component)}


def weigh(verdicts: Mapping[str, Sequence[Verdict]], weights: Mapping[str, float]) -> ScoredBatch:
    """Per-component verdicts -> ScoredBatch: reward = sum_k weight_k * score_k, 0 where unscorable.

    The one place the weighting happens, whether verdicts were computed here or in the reward service.
    """
    n = len(next(iter(verdicts.values()))) if verdicts else 0
    # host: the verifiers' scores; stages.finish_scoring moves them to the rollouts' device (issue #23)
    scores = {name: torch.tensor([v.score for v in vs], dtype=torch.float32) for name, vs in verdicts.items()}
    rewards = torch.zeros(n, dtype=torch.float32)  # host: as the scores
    for name, weight in weights.items():
        rewards += weight * scores[name]
    # host: as the scores
    scorable = torch.tensor([all(v.scorable for v in row) for row in zip(*verdicts.values())], dtype=torch.bool)
    rewards = rewards.masked_fill(~scorable, 0.0)  # never rewarded, whatever another component said
    return ScoredBatch(rewards=rewards, scorable=scorable, verdicts=dict(verdicts), scores=scores)


def outcome_counts(scored: ScoredBatch) -> dict[str, int]:
    """{'math/correct': 5, 'math/wrong': 2, ...}: every outcome of every component, zeros included, so
    metric columns stay the same from step to step."""
    return {f"{name}/{outcome.value}": sum(v.outcome is outcome for v in verdicts)
            for name, verdicts in scored.verdicts.items() for outcome in Outcome}


def mean_scores(scored: ScoredBatch) -> dict[str, float]:
    """Mean score per component over the batch (0.0 for an empty batch)."""
    return {name: float(s.mean()) if s.numel() else 0.0 for name, s in scored.scores.items()}
