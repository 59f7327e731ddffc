"""Verifiers: `verify(completion, reference) -> Verdict`, never raising (design.md principle 7).

`VERIFIERS` is the one place a verifier is chosen by name (design.md principle 5): name -> factory taking
the TaskConfig. Factories import their module lazily because config validation imports this package to
check `task.verifiers` names, and must not pay for torch or sympy to do so.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from rlvr.verifiers.base import Verifier, safe_verify, verify_many

if TYPE_CHECKING:
    from rlvr.config import TaskConfig


def _math(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.math import MathVerifier

    return MathVerifier(mode=task.answer_mode, timeout_s=task.verifier_timeout_s)


def _format(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.format import FormatVerifier

    return FormatVerifier()


def _answer_format(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.format import AnswerLineVerifier

    return AnswerLineVerifier()


VERIFIERS: dict[str, Callable[[TaskConfig], Verifier]] = {
    "math": _math,  # final answer vs reference: exact numbers, else math-verify with a time budget
    "format": _format,  # R1 layout: <think>...</think><answer>...</answer>
    "answer_format": _answer_format,  # last line is 'Answer: <number>'
}


def build_verifiers(task: TaskConfig) -> dict[str, Verifier]:
    """One verifier per name in `task.verifiers` (weights are applied by rlvr.rewards.Rewarder)."""
    unknown = sorted(set(task.verifiers) - set(VERIFIERS))
    if unknown:
        raise ValueError(f"unknown verifier(s) {unknown}; allowed: {sorted(VERIFIERS)}")
    return {name: VERIFIERS[name](task) for name in task.verifiers}


__all__ = ["VERIFIERS", "Verifier", "build_verifiers", "safe_verify", "verify_many"]
