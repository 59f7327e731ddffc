"""Constructs math-verify drops, and marks that change a number.

Operators (rlvr/verifiers/math/operators.py): an operator or symbol math-verify cannot read between two parts of an
answer ('\\boxed{3 \\slash 4}', '3 \\colon 4', '\\star', '\\oplus', '\\#', '?', '@'), or a condition in a text group
('\\boxed{3 \\text{ if } n \\text{ even}}'), never reduces the answer to one of its sides. Marks
(rlvr/verifiers/math/forms.py, units.py, numbers.py): a base subscript read through braces and parentheses, an
explicit base 10 against another base, a prime after spacing, a detached factorial after a box or on an 'Answer:'
line, and a factorial inside '$...$' in running text. Corpus rows: forms 'r4_operator', 'r4_mark'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL = MODES


OPERATORS = [
    *[(f"\\boxed{{3 {op} 4}}", ref, W, "math-verify cannot read", ALL)
      for op in ("\\slash", "\\colon", "\\circ", "\\star", "\\oplus", "\\#", "?", "@", "\\bullet", "\\S", "\\ratio",
                 "\\ast", "★") for ref in ("3", "4")],
    ("\\boxed{3 \\text{ if } n \\text{ even}}", "3", W, "condition", ALL),
    ("\\boxed{3 \\text{ when } n > 2}", "3", W, "condition", ALL),
]
OPERATORS_HONEST = [
    ("\\boxed{3 \\slash 4}", "3 \\slash 4", C, "", ALL),  # the same construct on both sides: compared as written
    ("\\boxed{30^\\circ}", "30", C, "", ALL),  # degrees, not an operator
    ("\\boxed{\\dfrac{3}{4}}", "0.75", C, "", ALL),
    ("\\boxed{2\\sqrt{3}}", "2\\sqrt3", C, "", ALL),
    ("\\boxed{3 \\cdot 4}", "12", C, "", ALL),
    ("\\boxed{x \\in [0, 1]}", "[0,1]", C, "", ALL),
    ("\\boxed{3 \\text{ even numbers}}", "3", C, "", ALL),
]
MARKS = [
    *[(f"\\boxed{{{a}}}", ref, W, "base", ALL) for a, ref in (
        ("6_{(5)}", "6"), ("6_{\\,5}", "6"), ("6_{{5}}", "6"), ("12_{(8)}", "12"), ("12_{10}", "12_8"))],
    ("\\boxed{5\\,'}", "5", W, "prime", ALL),
    ("\\boxed{42} !", "42", W, "factorial", ALL),
    ("\\boxed{42}\\,!", "42", W, "factorial", ALL),
    ("Answer: 42 !", "42", W, "factorial", ALL),
    ("So the total is $42!$", "42", U, "", ("last_number",)),
]
MARKS_HONEST = [
    ("\\boxed{12_{10}}", "12", C, "", ALL),
    ("\\boxed{12_{(8)}}", "12_8", C, "", ALL),
    ("\\boxed{6_{5}}", "6_5", C, "", ALL),
    ("\\boxed{5\\,'}", "5'", C, "", ALL),
    ("\\boxed{x_{1}}", "x_1", C, "", ALL),
    ("The number of orderings is 4!.\n\nAnswer: 4!", "24", C, "", ALL),
    ("So the total is 42!", "42", C, "", ("last_number",)),  # '!' in running text ends the sentence
    ("So the total is $42$!", "42", C, "", ("last_number",)),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(OPERATORS + MARKS))
def test_unreadable_operators_and_marks_are_not_one_side(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(OPERATORS_HONEST + MARKS_HONEST))
def test_readable_forms_still_score(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
