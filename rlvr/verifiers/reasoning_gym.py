"""reasoning-gym's procedural datasets scored by reasoning-gym's own scorer (optional extra `gym`).

reasoning-gym (github.com/open-thought/reasoning-gym) generates rows `{"question", "answer", "metadata"}` from a
dataset name, a config and a seed, and scores an answer with `dataset.score_answer(answer, entry)`, where many
scorers read `entry["metadata"]` (the puzzle itself) rather than the reference answer alone. So a row's reference
(`GymRow.as_reference`, JSON) stores how to make the entry again: dataset name, config, seed, size and index. The
verifier re-creates the dataset (cached per process), takes `dataset[index]` and checks that its question is the
stored one: a generator that is not deterministic across processes (one that draws from an unseeded RNG, or
iterates a set of strings, whose order depends on the hash salt) would otherwise score against another puzzle.
A mismatch is an ERROR with scorable=False: the row cannot be judged, so it is never rewarded.

Reading the answer: reasoning-gym's own convention, the last `<answer>...</answer>` block (its
`utils.extract_answer`), after reasoning in <think>...</think> is dropped. No block -> UNPARSEABLE. The score is
the scorer's float: 1.0 -> CORRECT; anything below is WRONG with that score (many scorers give partial credit,
e.g. the default one gives len(oracle)/len(answer) when the oracle is a substring of the answer). There is no
time budget of its own: the reward workers' per-sample deadline (reward.deadline_s) bounds a slow scorer.

reasoning_gym is imported inside functions only: this module is imported by the verifier registry in every
reward worker, and the extra may be absent.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rlvr.types import Outcome, Verdict
from rlvr.verifiers.base import error_verdict
from rlvr.verifiers.math.extract import strip_thinking

INSTALL_HINT = "reasoning-gym is not installed: pip install 'rlvr[gym]' (or pip install reasoning-gym)"


@dataclass(frozen=True)
class GymRow:
    """Where one row comes from: `create_dataset(dataset, seed=seed, size=size, **config)[index]`."""

    dataset: str
    config: dict[str, Any]
    seed: int
    size: int
    index: int
    question: str  # the generated question, checked again when the row is re-created

    def as_reference(self) -> str:
        return json.dumps({"dataset": self.dataset, "config": self.config, "seed": self.seed, "size": self.size,
                           "index": self.index, "question": self.question}, sort_keys=True)

    @classmethod
    def from_reference(cls, reference: str) -> GymRow:
        """Parse a reference; ValueError (with what is wrong) for anything that is not one."""
        try:
            data = json.loads(reference)
        except json.JSONDecodeError as err:
            raise ValueError(f"reference is not JSON ({err.msg})") from None
        types = {"dataset": str, "config": dict, "seed": int, "size": int, "index": int, "question": str}
        if not isinstance(data, dict) or set(data) != set(types):
            raise ValueError(f"reference must be an object with keys {sorted(types)}")
        for key, kind in types.items():
            if not isinstance(data[key], kind) or isinstance(data[key], bool):
                raise ValueError(f"reference {key!r} must be {kind.__name__}, got {type(data[key]).__name__}")
        if not 0 <= data["index"] < data["size"]:
            raise ValueError(f"reference index {data['index']} is outside the dataset's size {data['size']}")
        return cls(**data)


def import_reasoning_gym() -> Any:
    """The reasoning_gym module; ImportError with the install hint when the extra is missing."""
    try:
        import reasoning_gym
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} ({err})") from err
    return reasoning_gym


def make_dataset(dataset: str, config: dict[str, Any], seed: int, size: int) -> Any:
    """`reasoning_gym.create_dataset(dataset, seed=, size=, **config)`, cached per process (some generators load
    word lists or data files when made). The config travels as JSON so that it can be a cache key."""
    return _cached_dataset(dataset, json.dumps(config, sort_keys=True), seed, size)


@lru_cache(maxsize=16)
def _cached_dataset(dataset: str, config_json: str, seed: int, size: int) -> Any:
    gym = import_reasoning_gym()
    return gym.create_dataset(dataset, seed=seed, size=size, **json.loads(config_json))


def extract_answer(completion: str) -> str | None:
    """The last <answer>...</answer> block outside the reasoning (reasoning-gym's extract_answer), or None."""
    from reasoning_gym.utils import extract_answer as gym_extract

    return gym_extract(strip_thinking(completion))


class ReasoningGymVerifier:
    """`verify(completion, reference)` with reasoning-gym's scorer; see the module docstring."""

    name = "reasoning_gym"

    def verify(self, completion: str, reference: str) -> Verdict:
        try:
            row = GymRow.from_reference(reference)
        except ValueError as err:
            return error_verdict(f"reasoning_gym: {err}", scorable=False)
        try:
            dataset = make_dataset(row.dataset, row.config, row.seed, row.size)
            entry = dataset[row.index]
            question = entry["question"]
        except ImportError as err:
            return error_verdict(str(err), scorable=False)
        except Exception as err:  # the reference names a dataset or config this reasoning-gym cannot make
            return error_verdict(f"reasoning_gym: could not re-create {row.dataset}[{row.index}]", err,
                                 scorable=False)
        if question != row.question:
            return error_verdict(f"reasoning_gym: {row.dataset}[{row.index}] re-created with another question (the "
                                 f"generator is not deterministic across processes, or reasoning-gym's version "
                                 f"changed)", scorable=False)
        return self._score(dataset, entry, completion)

    def _score(self, dataset: Any, entry: dict[str, Any], completion: str) -> Verdict:
        try:
            answer = extract_answer(completion)
        except Exception as err:
            return error_verdict("reasoning_gym: reading the answer failed", err)
        if answer is None:
            return Verdict(Outcome.UNPARSEABLE, 0.0, "no <answer>...</answer> block")
        try:
            score = float(dataset.score_answer(answer, entry))
        except Exception as err:  # a scorer bug on an odd answer must not stop the step
            return error_verdict("reasoning_gym: the dataset's scorer raised", err)
        if not math.isfinite(score) or not 0.0 <= score <= 1.0:
            return error_verdict(f"reasoning_gym: the scorer returned {score!r}, outside [0, 1]")
        shown = answer if len(answer) <= 60 else answer[:57] + "..."
        if score >= 1.0:
            return Verdict(Outcome.CORRECT, 1.0, f"answer {shown!r}")
        return Verdict(Outcome.WRONG, score, f"answer {shown!r}, expected {str(entry.get('answer'))[:60]!r}")
