"""Forms that change a value or its kind.

- Binomials (rlvr/verifiers/math/operators.py): `a \\choose b` is the binomial coefficient, compared as
  `\\binom{a}{b}` ('\\boxed{10 \\choose 4}' is 210, never 4); a `\\choose` that cannot be read so is no value.
- Sets (rlvr/verifiers/math/forms.py): a set is not a tuple or an interval: '\\{3, 4\\}' against '(3, 4)' (and
  the other way round) is WRONG; a bare list '3, 4' answers either, as before.
- Marks on a number (forms.py, relations.py, words.py): words that scale or bound a value in a box ('doubled', 'halved',
  'hundreds', 'max'), an operator with nothing on its left ('\\div 4'), an accent on a number ('\\hat 4') and a
  leading 'ca.' are not the bare number.
- Currency (rlvr/verifiers/math/units.py): 'Rs.' before a number is rupees, as 'Rs' is.
Corpus rows: form 'r5_form'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W = Outcome.CORRECT, Outcome.WRONG
ALL = MODES


CHOOSE = [
    *[(f"\\boxed{{{left} \\choose 4}}", "4", W, "", ALL) for left in ("10", "3", "n", "{10}")],
    ("\\boxed{{10 \\choose 4}}", "4", W, "", ALL),
    ("Answer: $10 \\choose 4$", "4", W, "", ALL),
    ("\\boxed{10 \\choose 4 \\choose 2}", "2", W, "\\choose", ALL),  # ambiguous in TeX itself: never one side
    ("\\boxed{10 \\choose 4}", "210", C, "", ALL),
    ("\\boxed{{10 \\choose 4}}", "210", C, "", ALL),
    ("\\boxed{{10 \\choose 4} + 1}", "211", C, "", ALL),
    ("Answer: $10 \\choose 4$", "210", C, "", ALL),
    ("\\boxed{210}", "{10 \\choose 4}", C, "", ALL),
    ("\\boxed{\\binom{10}{4}}", "210", C, "", ALL),
    ("\\boxed{\\binom{10}{4}}", "4", W, "", ALL),
]
SETS = [
    ("\\boxed{\\{3, 4\\}}", "(3, 4)", W, "a set", ALL),
    ("\\boxed{(3, 4)}", "\\{3, 4\\}", W, "a set", ALL),
    ("\\boxed{\\{1,2\\}}", "(1,2)", W, "a set", ALL),
    ("\\boxed{\\left\\{3, 4\\right\\}}", "(3, 4)", W, "a set", ALL),
    ("\\boxed{[3, 4]}", "\\{3, 4\\}", W, "", ALL),
    ("\\boxed{\\{3, 4\\}}", "[3, 4]", W, "", ALL),
    ("\\boxed{\\{3, 4\\}}", "\\{3, 4\\}", C, "", ALL),
    ("\\boxed{\\{4, 3\\}}", "\\{3, 4\\}", C, "", ALL),
    ("\\boxed{(3, 4)}", "(3, 4)", C, "", ALL),
    ("\\boxed{3, 4}", "(3, 4)", C, "", ALL),  # a bare list answers either
    ("\\boxed{3, 4}", "\\{3, 4\\}", C, "", ALL),
    ("\\boxed{\\{(1, 2)\\}}", "(1, 2)", W, "", ALL),  # a set of one pair: not the pair (math-verify, as before)
    ("\\boxed{\\{(1, 2), (3, 4)\\}}", "(1, 2), (3, 4)", C, "", ALL),
]
WORDS = [
    *[(f"\\boxed{{4 \\text{{ {word}}}}}", "4", W, "changes its value", ALL)
      for word in ("doubled", "halved", "tripled", "max", "min", "maximum", "minimum")],
    *[(f"\\boxed{{4 \\text{{ {word}}}}}", "4", W, "", ALL) for word in ("hundreds", "thousands", "dozens")],
    ("\\boxed{4\\text{ hundreds}}", "4", W, "", ALL),
    ("\\boxed{4 \\text{ cm}}", "4", C, "", ALL),
    ("\\boxed{4 \\text{ minutes}}", "4", C, "", ALL),
    ("\\boxed{5 \\text{ km per hour}}", "5", C, "", ALL),
    ("\\boxed{\\div 4}", "4", W, "operator", ALL),
    ("\\boxed{\\times 4}", "4", W, "operator", ALL),
    ("\\boxed{\\cdot 4}", "4", W, "operator", ALL),
    ("\\boxed{÷ 4}", "4", W, "", ALL),
    ("\\boxed{\\div 4}", "\\div 4", C, "", ALL),
    ("\\boxed{-4}", "-4", C, "", ALL),
    ("\\boxed{+4}", "4", C, "", ALL),
    *[(f"\\boxed{{\\{accent} 4}}", "4", W, "accent", ALL) for accent in ("hat", "tilde", "vec", "check", "breve")],
    ("\\boxed{\\hat{4}}", "4", W, "accent", ALL),
    ("\\boxed{0.\\overline{3}}", "1/3", C, "", ALL),
    ("Answer: ca. 4", "4", W, "estimate", ALL),
    ("Answer: circa 4", "4", W, "", ALL),
    ("\\boxed{ca. 4}", "4", W, "", ALL),
    ("Answer: 4", "4", C, "", ALL),
]
CURRENCY = [
    ("Answer: Rs. 5", "\\$5", W, "", ALL),
    ("Answer: Rs 5", "\\$5", W, "", ALL),
    ("Answer: Rs. 5", "5", C, "", ALL),
    ("Answer: Rs. 5", "Rs. 5", C, "", ALL),
    ("Answer: INR 5", "\\$5", W, "", ALL),
    ("Answer: \\$5", "\\$5", C, "", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(CHOOSE))
def test_choose_is_the_binomial_coefficient(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(SETS))
def test_a_set_is_no_tuple(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(WORDS))
def test_words_and_marks_that_change_a_value(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(CURRENCY))
def test_rupees_with_a_full_stop(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
