"""Reasoning measured on each sampled completion, and averaged: is the R1 recipe's reasoning visible?

Pass@1 says whether answers are right; it does not say whether the model reasons to them. Per sample:
  * think words: whitespace-split words of the think section (0 without one): does the model think at length?
  * reflection: a self-correction phrase (RunConfig.reflection_phrases, as metrics.jsonl's reflection_rate) appears
    anywhere in the completion: R1's "aha moment";
  * steps: the arithmetic equations stated in the reasoning (the think section, else the whole completion) and how
    many are false (rlvr.verifiers.steps.check_steps, also the "steps" verifier's check).
Over samples: the mean think words, the reflection share, the share stating a step, the share stating steps that are
all right (over all samples), and that share among the samples that state one.

Pure functions of text; the step checker lives with its verifier (verifiers sit below evaluation: rlvr/verifiers may
not import this package) and is re-exported here.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

from rlvr.config.run import RunConfig
from rlvr.metrics.diagnostics import reflects
from rlvr.verifiers.steps import StepCheck, check_steps, reasoning_text, think_text

__all__ = ["ReasoningSummary", "SampleReasoning", "StepCheck", "check_steps", "default_phrases", "sample_reasoning",
           "summarize_reasoning", "think_text", "think_words"]


def default_phrases() -> list[str]:
    """RunConfig's default reflection_phrases (one list, kept in the config)."""
    return RunConfig.model_fields["reflection_phrases"].default_factory()


def think_words(completion: str) -> int:
    """Words (whitespace-split) of the think section; 0 without one."""
    think = think_text(completion)
    return 0 if think is None else len(think.split())


class SampleReasoning(NamedTuple):
    think_words: int
    reflection: bool
    steps: StepCheck


def sample_reasoning(completion: str, phrases: Sequence[str]) -> SampleReasoning:
    return SampleReasoning(think_words(completion), reflects(completion, phrases),
                           check_steps(reasoning_text(completion)))


class ReasoningSummary(NamedTuple):
    """Shares and means over samples; every field None when no sample was measured. As JSON keys: its field names."""

    think_words: float | None  # mean think words per sample
    reflection_rate: float | None  # share of samples with a reflection phrase
    steps_stated: float | None  # share of samples stating >= 1 arithmetic step
    steps_right: float | None  # share of samples stating >= 1 step, none wrong (over all samples)
    steps_right_given_stated: float | None  # the same over the samples stating >= 1 step; None when none does


NOT_MEASURED = ReasoningSummary(None, None, None, None, None)


def summarize_reasoning(words: Sequence[int], reflection: Sequence[bool],
                        steps: Sequence[StepCheck]) -> ReasoningSummary:
    """The summary of n samples' measures (three sequences of the same length, one entry per sample)."""
    if not words:
        return NOT_MEASURED
    n = len(words)
    stated = [s for s in steps if s.stated]
    right = sum(1 for s in stated if not s.wrong)
    return ReasoningSummary(think_words=sum(words) / n, reflection_rate=sum(reflection) / n,
                            steps_stated=len(stated) / n, steps_right=right / n,
                            steps_right_given_stated=right / len(stated) if stated else None)
