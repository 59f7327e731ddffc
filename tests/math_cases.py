"""Shared by the math verifier's tables of hand-labelled cases (tests/test_math_around.py, test_math_qualifiers.py):
each row is (completion, reference, outcome, a phrase of the detail, the modes it holds in)."""
from __future__ import annotations

import pytest

from rlvr.types import Outcome


def cases(table):
    """One pytest param per (row, mode), named by the mode, the row's index and the completion's start."""
    return [pytest.param(mode, *case[:4], id=f"{mode}-{i}:{case[0][:30]}")
            for i, case in enumerate(table) for mode in case[4]]


def check(verifiers, mode, completion, reference, outcome, detail):
    """The verdict has the row's outcome, scores 1 exactly when CORRECT, and says why in words the row names."""
    verdict = verifiers[mode].verify(completion, reference)
    assert verdict.outcome is outcome and verdict.score == float(outcome is Outcome.CORRECT), verdict
    assert detail in verdict.detail, verdict.detail
