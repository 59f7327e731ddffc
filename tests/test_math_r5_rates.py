"""A rate is a unit (rlvr/verifiers/math/units.py, rate_of and without_rate). What a rate is
per is compared as units are, never converted: '5 per hour' for '5 per minute' was paid in every mode, because the
per-words were no unit either side knew and both sides were read as '5 per'. Two spellings of one rate ('per hour',
'an hour', '/hour', 'each hour') are the same rate; a rate on one side only is read as the number, as a unit is.
Corpus rows: form 'r5_rate'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.units import rate_of, without_rate
from rlvr.verifiers.math.verifier import MODES

C, W = Outcome.CORRECT, Outcome.WRONG
ALL = MODES


WRONG = [
    ("Answer: 5 per hour", "5 per minute", W, "rate per h where the reference's is per min", ALL),
    ("Answer: 5 per day", "5 per hour", W, "rate per day", ALL),
    ("Answer: 5 an hour", "5 per minute", W, "rate per h", ALL),
    ("Answer: 5 each hour", "5 per minute", W, "rate per h", ALL),
    ("Answer: 5 / h", "5 per minute", W, "rate per h", ALL),
    ("Answer: 5 per person", "5 per hour", W, "rate per person", ALL),
    ("Answer: 5 apples per hour", "5 apples per minute", W, "rate per h", ALL),
    ("Answer: $5 per hour", "$5 per minute", W, "rate per h", ALL),
    ("Answer: 6 per hour", "5 an hour", W, "", ALL),  # the same rate, another number
    ("Answer: \\$6 per hour", "\\$5/hour", W, "", ALL),
    ("Answer: 5 and a half", "5", W, "", ALL),  # 'a half' is no rate ('a' marks one only before a time unit)
]
HONEST = [
    ("Answer: 5 per hour", "5 per hour", C, "", ALL),
    ("Answer: 5 per hour", "5 an hour", C, "", ALL),
    ("Answer: 5 per hour", "5 each hour", C, "", ALL),
    ("Answer: 5 a day", "5 per day", C, "", ALL),
    ("Answer: 5/day", "5 per day", C, "", ALL),
    ("Answer: \\$5 per hour", "\\$5/hour", C, "", ALL),
    ("Answer: 5 km/h", "5 kilometers per hour", C, "", ALL),
    ("Answer: 5 per hour", "5", C, "", ALL),  # a rate on one side only is read as the number
    ("Answer: 5", "5 per hour", C, "", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(WRONG))
def test_a_rate_per_something_else_is_wrong(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HONEST))
def test_spellings_of_one_rate_score(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("written,rate", [
    ("5 per hour", "h"), ("5 an hour", "h"), ("\\$5/hour", "h"), ("5 km/h", "h"), ("5 every day", "day"),
    ("5 apples per Person", "person"), ("5 per people", "people"),
    ("5 and a half", None), ("5 a person", None),  # 'a' marks a rate only before a unit of time
    ("5 per 2 hours", None), ("5 hours", None), ("5", None), ("no number per hour", None),
    ("5 apples", None), ("5 big red shiny old apples per hour", None),  # read within five words of the number
])
def test_what_a_rate_is_per(written, rate):
    assert rate_of(written) == rate


def test_without_rate_cuts_only_an_agreeing_rate():
    # The answer line has already dropped the unit it knows ('5 per hour' reads '5 per'); both tails go.
    assert without_rate("5 per", "5 an hour", "5 per hour") == ("5", "5")
    assert without_rate("\\$5 per", "\\$5/hour", "\\$5 per hour") == ("\\$5", "\\$5")
    # Different rates, or a rate on one side only, leave both as they are (unit_problem decides).
    assert without_rate("5 per", "5 per minute", "5 per hour") == ("5 per", "5 per minute")
    assert without_rate("5", "5 per hour", "5") == ("5", "5 per hour")
