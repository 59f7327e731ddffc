"""Units and currencies (rlvr/verifiers/math/units.py, forms.py, words.py,
latex.py). Equal only with the same unit or no unit; different units of one quantity and a currency mismatch are
WRONG; words that change the value (magnitudes, parts per million, basis points, fraction words) are never dropped.
A reference written with a bare '$' ('$5') keeps its currency. Corpus rows: form 'r4_unit'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W = Outcome.CORRECT, Outcome.WRONG
ALL = MODES


WRONG = [
    *[(f"Answer: {a}", "$5", W, "", ALL) for a in ("£5", "€5", "¥5", "5 yen", "5 EUR", "5 GBP", "5 euros")],
    ("\\boxed{\\pounds 5}", "\\$5", W, "unit", ALL),
    ("\\boxed{\\pounds 5}", "€5", W, "unit", ALL),
    ("Answer: $5", "5 euros", W, "", ALL),
    ("Answer: 5 ppm", "5", W, "", ALL),
    ("Answer: 5 bps", "5%", W, "", ALL),
    *[(f"Answer: 5 {word}", "5", W, "", ALL) for word in ("quadrillion", "googol", "sixteenths", "twentieths")],
    ("\\boxed{5\\,\\mathrm{mm}}", "5\\,\\mathrm{\\mu m}", W, "unit", ALL),
    ("Answer: 5 N m", "5 N", W, "unit", ALL),
]
HONEST = [
    ("Answer: $5", "$5", C, "", ALL),
    ("Answer: \\$5", "$5", C, "", ALL),
    ("Answer: 5 dollars", "$5", C, "", ALL),
    ("Answer: 5", "$5", C, "", ALL),
    ("The total cost is \\boxed{\\$5.50}.", "$5.50", C, "", ALL),
    ("\\boxed{\\pounds 5}", "£5", C, "", ALL),
    ("Answer: 5 mm", "5 mm", C, "", ALL),
    ("\\boxed{5\\,\\mathrm{\\mu m}}", "5\\,\\mathrm{\\mu m}", C, "", ALL),
    ("Answer: 5 N", "5 N", C, "", ALL),
    ("Answer: 5 N m", "5 N m", C, "", ALL),
    ("Answer: 5 trillion", "5000000000000", C, "", ("strict", "latex")),
    ("Answer: 3 sixteenths", "3/16", C, "", ("strict", "latex")),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(WRONG))
def test_a_different_unit_currency_or_value_word_is_wrong(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HONEST))
def test_the_same_unit_or_none_still_scores(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
