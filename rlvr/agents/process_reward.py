"""Step-level scores of model turns: the process-reward hook of `episode.process_reward`.

DeepSeekMath's process supervision (Shao et al. 2024, sec. 4.1.3) needs a reward per step; in an episode a step is
one model turn. Besides the environment's own step rewards (Observation.reward), a user can name a scorer:

  * "module:function": imported once at build time and called per model turn as f(turn_text, prompt) -> float or
    None (`prompt` is the row's rlvr Prompt). None, a raise, a non-number or a non-finite value scores 0 and is
    counted, as rlvr/rewards/rewarder.py treats TRL reward functions, so a buggy scorer never stops a step. Scores
    are not clamped: process advantages are normalized within each group (rlvr/algorithms/turns.py), so only the
    order and spacing of a group's step scores matter, and a scorer may use negative penalties.
  * a directory of a HF sequence-classification model (a process reward model): it scores each (question, turn
    text) pair exactly as rlvr/rewards/reward_model.py scores (question, completion), with that module's loader
    and scorer, placed and batched like the reward model (reward.model_device or model.device,
    reward.model_batch_size). The question is the prompt's last user turn, as reward functions see it.

A string that is neither (no such directory, not "module:function", a module that does not import, a missing or
non-callable function, one that cannot take (turn_text, prompt)) is one ConfigError at build time.

The model turns of a row are the assistant messages of its EpisodeRecord, in order; the tool turns between them
are the environment's and are not scored. `ProcessReward.score` returns them as a [B, T] tensor aligned with
types.Turns.turn_mask; the driver weighs them (episode.process_weight) into the step rewards.
"""
from __future__ import annotations

import importlib
import inspect
import math
import numbers
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch

from rlvr.config.base import ConfigError
from rlvr.rewards.reward_model import RewardModel, RewardModelSettings
from rlvr.rewards.rewarder import prompt_text
from rlvr.types import Prompt, Turns

if TYPE_CHECKING:
    from rlvr.config.run import ModelConfig, RewardConfig
    from rlvr.config.sections import EpisodeConfig

SETTING = "episode.process_reward"
_FUNCTION = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")  # dotted.module:function


@dataclass(frozen=True)
class StepScores:
    """One score per model turn, and how many turns the scorer failed on (scored 0)."""

    scores: torch.Tensor  # [B, T] float on turn_mask's device; 0 where turn_mask is False or the scorer failed
    failed: int  # turns whose score was None, not a finite number, or raised
    first_error: str = ""  # the first failure's reason, for the run log ("" = none)


# (turn texts, the prompt of each) -> (one score per text, one reason per failed text)
TurnScorer = Callable[[list[str], list[Prompt]], tuple[list[float], list[str]]]


def model_turn_texts(record: Any) -> list[str]:
    """The text of each model turn of an EpisodeRecord: its assistant messages in order."""
    return [message.get("content", "") for message in record.messages if message.get("role") == "assistant"]


class ProcessReward:
    """The hook: `score(turns, prompts)` -> StepScores, one score per model turn of each rollout row."""

    def __init__(self, scorer: TurnScorer, source: str):
        self.scorer, self.source = scorer, source

    def score(self, turns: Turns, prompts: Sequence[Prompt]) -> StepScores:
        """`prompts[b]` is row b's prompt (RolloutBatch.prompt_of(b)). The steps are scored: every model turn but a
        final answer (EpisodeRecord.step_count). A record whose steps do not match the row's turn_mask is the
        driver's bug, not the model's: ValueError."""
        rows, steps = turns.turn_mask.shape
        if len(prompts) != rows or len(turns.records) != rows:
            raise ValueError(f"{len(prompts)} prompts and {len(turns.records)} records for {rows} rows")
        mask = turns.turn_mask.bool().cpu()  # host: read to pick the texts
        where, texts, row_prompts = [], [], []
        for row, (record, prompt) in enumerate(zip(turns.records, prompts)):
            said = model_turn_texts(record)[:record.step_count()]
            if len(said) > steps or mask[row].tolist() != [t < len(said) for t in range(steps)]:
                raise ValueError(f"row {row}: {len(said)} steps in its record, but its turn_mask is "
                                 f"{mask[row].int().tolist()}")
            for turn, text in enumerate(said):
                where.append((row, turn))
                texts.append(text)
                row_prompts.append(prompt)
        values, errors = self.scorer(texts, row_prompts) if texts else ([], [])
        scores = torch.zeros(rows, steps, dtype=torch.float32)  # host: filled from Python floats, moved below
        for (row, turn), value in zip(where, values):
            scores[row, turn] = value
        return StepScores(scores.to(turns.turn_mask.device), len(errors), errors[0] if errors else "")

    __call__ = score


def step_value(function: Callable[..., Any], name: str, text: str, prompt: Prompt) -> tuple[float, str]:
    """One call of a function scorer -> (score, "" or why it scored 0). Never raises: a scorer may choke on what
    a model wrote, and that must cost one turn's score, not the training step."""
    try:
        value = function(text, prompt)
    except Exception as err:  # user code on model text: any failure is a counted 0
        return 0.0, f"{name} raised {_reason(err)}"
    if value is None:
        return 0.0, f"{name} returned None"
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if not isinstance(value, numbers.Real):  # bool and numpy scalars are Real too
        return 0.0, f"{name} returned {type(value).__name__} {str(value)[:40]!r}, not a number"
    number = float(value)
    return (number, "") if math.isfinite(number) else (0.0, f"{name} returned {number}")


def _reason(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:120]}" if text else type(err).__name__


def _function_scorer(function: Callable[..., Any], name: str) -> TurnScorer:
    def scorer(texts: list[str], prompts: list[Prompt]) -> tuple[list[float], list[str]]:
        results = [step_value(function, name, text, prompt) for text, prompt in zip(texts, prompts)]
        return [value for value, _ in results], [error for _, error in results if error]

    return scorer


def _model_scorer(model: RewardModel) -> TurnScorer:
    def scorer(texts: list[str], prompts: list[Prompt]) -> tuple[list[float], list[str]]:
        return model.score([prompt_text(prompt) for prompt in prompts], texts), []

    return scorer


def _import_function(source: str) -> Callable[..., Any]:
    """'module:function' -> the function; every way it can be wrong is one ConfigError naming the setting."""
    where = f"{SETTING}={source!r}"
    module_name, _, attribute = source.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # the user's module: a missing module, a syntax error or a raise at import
        raise ConfigError(f"{where}: could not import module {module_name!r}: {_reason(err)}") from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ConfigError(f"{where}: module {module_name!r} has no function {attribute!r}")
    try:
        inspect.signature(function).bind("turn text", None)
    except TypeError:
        raise ConfigError(f"{where}: {attribute} must take (turn_text, prompt)") from None
    except ValueError:  # no signature to read (some builtins): let the calls tell
        pass
    return function


def build_process_reward(episode: EpisodeConfig, reward: RewardConfig,
                         model: ModelConfig) -> ProcessReward | None:
    """The hook named by episode.process_reward (module docstring), or None when it is not set."""
    source = episode.process_reward
    if source is None:
        return None
    if Path(source).expanduser().is_dir():
        settings = RewardModelSettings(source, reward.model_batch_size, reward.model_device or model.device,
                                       model.dtype, model.trust_remote_code, setting=SETTING)
        return ProcessReward(_model_scorer(RewardModel.load(settings)), source)
    if _FUNCTION.fullmatch(source):
        return ProcessReward(_function_scorer(_import_function(source), source.partition(":")[2]), source)
    raise ConfigError(f"{SETTING}={source!r} is neither 'module:function' (a step scorer f(turn_text, prompt) -> "
                      "float) nor an existing directory of a HF sequence-classification model")


__all__ = ["SETTING", "ProcessReward", "StepScores", "build_process_reward", "model_turn_texts", "step_value"]
