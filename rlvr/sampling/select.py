"""Which of a prompt's N sampled completions are kept (pure; R1 paper sec. 2.3.3).

A completion is *correct* when every verifier with a positive weight says CORRECT, its reference could be
read and it ended its turn (a completion cut by rollout.max_new_tokens, trained on with the chat
template's end-of-turn token after it, would teach the model to stop in mid-text and to write on past its answer).
The learned reward model is not a verifier: its score only ever reaches CORRECT at exactly 1.0, so it
is left out of correctness (it still counts in the total reward that `select="reward"` ranks by).
Correct completions that are the same text up to whitespace are one completion (the R1 stage-3 data was
filtered for duplicates); of the distinct ones the best k are kept:
  shortest: fewest tokens; ties -> higher reward, then earlier sample
  reward:   highest total reward; ties -> fewer tokens, then earlier sample
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

from rlvr.types import Outcome

REWARD_MODEL = "reward_model"  # the component name of the learned reward (RewardConfig.model_path)
SelectRule = Literal["shortest", "reward"]
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Candidate:
    """One scored completion of a prompt."""

    index: int  # position among the prompt's N samples (sample order)
    text: str  # decoded completion
    length: int  # completion tokens (EOS included)
    reward: float  # total weighted reward (rlvr.rewards.rewarder.weigh)
    verdicts: Mapping[str, Outcome] = field(default_factory=dict)  # component name -> outcome
    scorable: bool = True  # False when a verifier could not read the reference: never correct
    ended: bool = True  # False when rollout.max_new_tokens cut it before the end-of-turn token: never correct


@dataclass(frozen=True)
class Selection:
    """What happened to one prompt's samples."""

    kept: tuple[Candidate, ...]  # best first
    correct: int  # correct samples, duplicates included
    distinct: int  # correct samples after de-duplication


def gating_components(weights: Mapping[str, float]) -> list[str]:
    """The components whose verdicts decide correctness: positive weight, not the reward model."""
    return [name for name, weight in weights.items() if weight > 0 and name != REWARD_MODEL]


def is_correct(candidate: Candidate, weights: Mapping[str, float]) -> bool:
    gates = gating_components(weights)
    return candidate.scorable and candidate.ended and bool(gates) and all(
        candidate.verdicts.get(name) is Outcome.CORRECT for name in gates)


def normalise_text(text: str) -> str:
    """The de-duplication key: runs of whitespace collapsed to one space, ends stripped."""
    return _SPACE.sub(" ", text).strip()


def rank_key(candidate: Candidate, rule: SelectRule) -> tuple[float, float, int]:
    """Sort key, smallest = best."""
    if rule == "shortest":
        return (candidate.length, -candidate.reward, candidate.index)
    if rule == "reward":
        return (-candidate.reward, candidate.length, candidate.index)
    raise ValueError(f"unknown selection rule {rule!r}; expected 'shortest' or 'reward'")


def select_best(candidates: Sequence[Candidate], keep: int, rule: SelectRule,
                weights: Mapping[str, float]) -> Selection:
    """The best `keep` distinct correct candidates. Among duplicates the best-ranked copy stands for the text."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    correct = sorted((c for c in candidates if is_correct(c, weights)), key=lambda c: rank_key(c, rule))
    seen: set[str] = set()
    distinct: list[Candidate] = []
    for candidate in correct:
        key = normalise_text(candidate.text)
        if key not in seen:
            seen.add(key)
            distinct.append(candidate)
    return Selection(kept=tuple(distinct[:keep]), correct=len(correct), distinct=len(distinct))
