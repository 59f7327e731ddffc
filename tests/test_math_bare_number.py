"""A completion that is only a number is that answer in mode strict (rlvr/verifiers/math/bare.py).

The plain questions ('What is 7 times 8? Give only the number.') make `56` an honest reply; strict mode read nothing
in it before. Everything else strict refused stays refused. Each row: (completion, reference, outcome, a phrase of
the detail, the modes it holds in); the values are hand-derived: 7 * 8 = 56.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.bare import MAX_BARE, bare_number
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL = MODES
NO_ANSWER = "no final answer found (expected"  # strict's message when nothing is read


READ = [
    ("56", "56", C, "extracted 56", ALL),
    ("56.", "56", C, "extracted 56", ALL),  # a final full stop
    (" 56 \n", "56", C, "extracted 56", ALL),  # whitespace around it
    ("$56$", "56", C, "extracted 56", ALL),  # inline math around it
    ("$ 56 $.", "56", C, "extracted 56", ALL),
    ("**56**", "56", C, "extracted 56", ALL),  # bold is read as its inside (emphasis.py)
    ("<think>7 times 8 is 56.</think> 56", "56", C, "extracted 56", ALL),  # reasoning does not count
    ("<think>\n7 * 8\n</think>\n\n56\n", "56", C, "extracted 56", ALL),
    ("57", "56", W, "extracted 57, expected 56", ALL),  # read, and wrong: 7 * 8 = 56, not 57
    ("56.0", "56", C, "extracted 56.0", ALL),  # 56.0 = 56 exactly
    ("-3", "-3", C, "extracted -3", ALL),  # a sign is part of the number (level 2's a - b never needs it)
]

REFUSED = [  # strict as before bare numbers: nothing read
    ("56 or 57", "56", U, NO_ANSWER, ("strict",)),  # two candidates
    ("7 * 8 = 56", "56", U, NO_ANSWER, ("strict",)),  # an equation is not only a number (as before)
    ("I think 56", "56", U, NO_ANSWER, ("strict",)),  # words beside it
    ("56?", "56", U, NO_ANSWER, ("strict",)),  # asked, not answered
    ("56..", "56", U, NO_ANSWER, ("strict",)),  # one full stop at most
    ("$56", "56", U, NO_ANSWER, ("strict",)),  # an unpaired '$' may be a currency
    ("1,234", "1234", U, NO_ANSWER, ("strict",)),  # a thousands comma reads as a list too
    ("3/4", "3/4", U, NO_ANSWER, ("strict",)),  # a fraction is no plain number
    ("", "56", U, "no final answer found", ALL),  # empty
    ("<think>56</think>", "56", U, "only inside <think>", ALL),  # the number only in the reasoning
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(READ + REFUSED))
def test_a_bare_number_is_the_answer_and_nothing_else_is(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


def test_the_other_modes_still_read_what_strict_refuses(verifiers):
    # unchanged by bare numbers: their fallback reads the last number ('7 * 8 = 56' -> 56) or sees the hedge
    assert verifiers["last_number"].verify("7 * 8 = 56", "56").outcome is C
    assert verifiers["latex"].verify("56 or 57", "56").outcome is W


def test_bare_number_reads_only_a_short_text_that_is_one_number():
    assert bare_number(" $−5$. ") == "-5"  # a Unicode minus is read as '-'
    assert bare_number("0056") == "0056"  # as written; the comparison is numeric (0056 = 56)
    assert bare_number("5" * MAX_BARE) == "5" * MAX_BARE
    assert bare_number("5" * (MAX_BARE + 1)) is None  # longer than MAX_BARE: never one, whatever it holds
    assert bare_number("5 5") is None and bare_number("$5$ $6$") is None and bare_number(".5") is None
