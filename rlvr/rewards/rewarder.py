"""Verdicts -> one reward per completion, plus per-verifier, per-outcome counts for logging.

The total reward of completion i is the weighted sum of its component scores,

    reward[i] = sum over components k of  weight_k * score_k[i]

with no normalization by the sum of weights: TRL's GRPOTrainer sums `reward_weights * rewards` the same
way, so weights carry over unchanged (weights summing to 1 keep rewards in [0, 1]). A component is either
a Verifier (rlvr.verifiers) or a TRL-style reward function (rlvr/rewards/functions.py)

    f(prompts=[...], completions=[...], completion_ids=[...], **columns) -> list[float | None]

where None (or NaN, as TRL stores None) means "not applicable": it contributes 0, as TRL's nansum does, and is
counted as UNPARSEABLE. A function's number is its score as it is, of any sign and size up to 1e15 (a -len/1000
penalty was clamped to 0 before, silently); a score >= 1 reads as CORRECT in the outcome counts. A verifier never
raises (design.md principle 7); a function that raises, returns another number of values than completions, or a
value that is no number, stops with one RewardFunctionError naming it: its score would otherwise be a silent 0.
"""
from __future__ import annotations

import math
import numbers
import traceback
from collections.abc import Set
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy
import torch

from rlvr.rewards.functions import PassedFunctions, RewardFunctionError, user_components
from rlvr.types import Outcome, Prompt, RolloutBatch, ScoredBatch, Verdict
from rlvr.verifiers import Verifier, build_verifiers, verify_many

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig

RewardFunction = Callable[..., Sequence[Any]]  # f(prompts=, completions=, **columns) -> list[float | None]
Component = Verifier | RewardFunction


def is_verifier(component: Any) -> bool:
    return callable(getattr(component, "verify", None))


def prompt_text(prompt: Prompt) -> str:
    """The text a TRL reward function sees as its prompt: the last user turn (the question)."""
    for message in reversed(prompt.messages):
        if message.get("role") == "user":
            return message.get("content", "")
    return prompt.messages[-1].get("content", "") if prompt.messages else ""


# float32 holds 3.4e38: a group's mean and its squared deviations (advantages.py) stay finite for rewards up to ~1e19,
# and a weighted sum of several still has room; 1e15 leaves both with margin, far above any reward in use
MAX_REWARD = 1e15
RESERVED_COLUMNS = ("prompts", "completions", "completion_ids")  # the arguments TRL itself passes a reward function


def batch_columns(prompts: Sequence[Prompt]) -> dict[str, list[Any]]:
    """Prompt.columns as TRL passes dataset columns (a list per key), plus the reference as 'answer'. A column named
    as one of TRL's own arguments is refused (TRL refuses it too): the function would silently get one of the two."""
    keys = dict.fromkeys(key for prompt in prompts for key in prompt.columns)
    for key in keys:
        if key in RESERVED_COLUMNS:
            raise RewardFunctionError(f"the dataset has a column named {key!r}, the name of an argument every reward "
                                      f"function receives ({', '.join(RESERVED_COLUMNS)}): rename that column")
    columns = {key: [prompt.columns.get(key) for prompt in prompts] for key in keys}
    columns.setdefault("answer", [prompt.reference for prompt in prompts])
    return columns


def verdict_from_value(value: Any) -> Verdict:
    """A reward function's value as a Verdict: None or NaN -> UNPARSEABLE (score 0), a finite number -> that score,
    unclamped (CORRECT from 1 up, else WRONG). Anything else raises ValueError, saying what came back."""
    if (isinstance(value, torch.Tensor) and value.numel() == 1) or isinstance(value, numpy.generic):
        value = value.item()  # numpy.bool_ is no numbers.Real: as a Python bool, as TRL takes it
    if value is None:
        return Verdict(Outcome.UNPARSEABLE, 0.0, "reward function returned None")
    if not isinstance(value, numbers.Real):  # bool and numpy scalars are Real too
        raise ValueError(f"{type(value).__name__} {str(value)[:40]!r}, not a number or None")
    try:
        number = float(value)
    except OverflowError:  # an int past float's range (10**400)
        raise ValueError(f"{str(value)[:40]}..., a number too large for a float") from None
    if math.isnan(number):
        return Verdict(Outcome.UNPARSEABLE, 0.0, "reward function returned NaN")
    if not math.isfinite(number):
        raise ValueError(f"{number}, not a finite number")
    if abs(number) > MAX_REWARD:
        raise ValueError(f"{number:g}, beyond +-{MAX_REWARD:g}: rewards go through float32 group statistics, where "
                         "larger ones overflow (scale the function's values down)")
    return Verdict(Outcome.CORRECT if number >= 1.0 else Outcome.WRONG, number, f"reward {number:g}")


def completion_id_lists(batch: RolloutBatch) -> list[list[int]]:
    """TRL's `completion_ids`: each completion's sampled token ids, padding dropped (EOS kept)."""
    return [ids[mask.bool()].tolist() for ids, mask in zip(batch.completion_ids, batch.completion_mask)]


def trl_arguments(prompts: Sequence[Prompt], completions: Sequence[str], completion_ids: Sequence[Any] | None,
                  conversational: bool) -> dict[str, Any]:
    """The keyword arguments TRL's GRPOTrainer passes a reward function: prompts, completions (text, or TRL's
    conversational message lists), completion_ids when known, and the dataset's columns."""
    if conversational:
        arguments = {"prompts": [list(p.messages) for p in prompts],
                     "completions": [[{"role": "assistant", "content": c}] for c in completions]}
    else:
        arguments = {"prompts": [prompt_text(p) for p in prompts], "completions": list(completions)}
    if completion_ids is not None:
        arguments["completion_ids"] = list(completion_ids)
    return {**batch_columns(prompts), **arguments}


def call_reward_function(function: RewardFunction, prompts: Sequence[Prompt], completions: Sequence[str],
                         completion_ids: Sequence[Any] | None = None) -> list[Verdict]:
    """Run a TRL-style reward function on the batch; any failure is one RewardFunctionError naming the function."""
    name = getattr(function, "__name__", type(function).__name__)
    arguments = trl_arguments(prompts, completions, completion_ids, getattr(function, "conversational", False))
    try:
        values = function(**arguments)
    except Exception as err:
        raise RewardFunctionError(f"reward function {name} raised {type(err).__name__}: {err}{_where(err)}") from err
    n = len(completions)
    try:  # a dict or a set has a length too, but no order: a dict's keys would become the scores
        if isinstance(values, (str, bytes, Mapping, Set)) or not hasattr(values, "__len__"):
            raise TypeError
        values = list(values)  # a 0-d tensor or array has __len__ but raises TypeError here
    except TypeError:
        raise RewardFunctionError(f"reward function {name} returned {type(values).__name__} {str(values)[:40]!r}, "
                                  f"not a list of {n} values (one float or None per completion)") from None
    if len(values) != n:
        raise RewardFunctionError(f"reward function {name} returned {len(values)} values for {n} completions")
    verdicts = []
    for row, value in enumerate(values):
        try:
            verdicts.append(verdict_from_value(value))
        except ValueError as err:
            raise RewardFunctionError(f"reward function {name} returned {err} for completion {row} "
                                      f"({completions[row][:40]!r})") from None
    return verdicts


def _where(err: BaseException) -> str:
    """" (at file.py:12 in f)": the innermost frame, so one line still points at the user's bug."""
    frames = traceback.extract_tb(err.__traceback__)
    return f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""


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

    def score(self, prompts: Sequence[Prompt], completions: Sequence[str],
              completion_ids: Sequence[Any] | None = None, truncated: Sequence[bool] | None = None) -> ScoredBatch:
        """Score completion i against prompts[i].reference with every component (reward functions also get
        completion_ids when given)."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions; pass one prompt "
                             "per completion (see score_rollout for grouped batches)")
        references = [prompt.reference for prompt in prompts]
        verdicts: dict[str, list[Verdict]] = {}
        for name, (component, _) in self.components.items():
            if is_verifier(component):
                verdicts[name] = verify_many(component, completions, references, truncated)  # cut
            else:
                verdicts[name] = call_reward_function(component, prompts, completions, completion_ids)
        return weigh(verdicts, {name: weight for name, (_, weight) in self.components.items()})

    def score_rollout(self, batch: RolloutBatch) -> ScoredBatch:
        """Score a grouped RolloutBatch: row i is checked against batch.prompt_of(i)."""
        functions = any(not is_verifier(component) for component, _ in self.components.values())
        return self.score([batch.prompt_of(row) for row in range(batch.size)], batch.completions,
                          completion_id_lists(batch) if functions else None, batch.truncated.tolist())

    __call__ = score


def build_rewarder(config: RunConfig, passed: PassedFunctions | None = None) -> Rewarder:
    """The task's verifiers; when reward.model_path is set, the reward model as the component "reward_model" with
    weight reward.model_weight (rlvr.rewards.reward_model; R1's last RL pass); reward.functions, imported
    (rlvr/rewards/functions.py), and `passed`: train()'s callables that config.yaml could not record.
    A builder, not a component: every entry point (train, eval, generate, sample) composes the rewarder here from
    three sections of its run config (task, reward, model); the Rewarder itself sees no config.
    Verifiers and functions are built before the reward model loads: a bad name fails in a moment."""
    from rlvr.rewards.reward_model import reward_model_components  # imports transformers only when a path is set

    verifiers = Rewarder.from_task(config.task).components
    r = config.reward
    functions = user_components(r.functions, passed.unrecorded if passed else {}, r.function_format == "conversational")
    return Rewarder({**verifiers, **reward_model_components(r, config.model), **functions})


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
    # host: the verifiers' scores; stages.finish_scoring moves them to the rollouts' device
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
