"""Two candidates in one statement pay neither (rlvr/verifiers/math/gaps.py).

Spacing and glue of any name between two boxes join them as a space does; a relation, an operator or a case label
between two statements offers both; a line below the final statement holding only another value (after blank
lines, a bullet, or as a number word) is a second candidate. Each adversarial completion is paired with honest
variants that must keep scoring. Corpus rows: form 'r4_hedge'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W = Outcome.CORRECT, Outcome.WRONG
ALL = MODES


HEDGES = [
    # spacing and glue the old list missed: the box before it is a second candidate, not a correction
    *[(f"\\boxed{{5}}{glue}\\boxed{{6}}", "6", W, "hedged", ALL) for glue in (
        "\\hskip 1em", "\\kern1em", "\\mkern9mu", "\\hfilll", "\\space", "\\strut", "\\nobreak", "\\relax",
        "\\rule{1cm}{0pt}", "\\\\[2pt]", "\\break", "\\pagebreak", "\\negthinspace", "\\hskip 1em plus 2pt",
        "<br>", "&nbsp;")],
    # a relation or operator between boxes, case and option labels, another answer's label
    *[(f"\\boxed{{5}} {between} \\boxed{{6}}", "6", W, "hedged", ALL) for between in (
        "=", "\\equiv", "\\iff", "\\slash", "‖", "∨", "resp.", "respectively")],
    ("Case 1: \\boxed{5}\nCase 2: \\boxed{6}", "6", W, "hedged", ALL),
    ("Option A: \\boxed{5}\nOption B: \\boxed{6}", "6", W, "hedged", ALL),
    ("Answer: 5\nAlternate answer: 6", "6", W, "hedged", ALL),
    ("Answer: 5\nAnother answer: 6", "6", W, "hedged", ALL),
    ("Answer: 5\nAlt answer: 6", "6", W, "hedged", ALL),
    # a value on a line below the final statement, past a blank line, a bullet, or in words
    ("Answer: 5\n\n6", "5", W, "next line", ALL),
    ("Answer:\n5\n\n6", "5", W, "next line", ALL),
    ("Answer:\n5\n- 6", "5", W, "next line", ALL),
    ("Answer:\n5\nsix", "5", W, "next line", ALL),
    ("\\boxed{5}\n6", "5", W, "next line", ALL),
    ("\\boxed{5}\n\n6", "5", W, "next line", ALL),
    ("\\boxed{5}.\n\nOR\n\n6", "5", W, "next line", ALL),
    ("### Final Answer\n\n42\n\n43", "42", W, "next line", ALL),
]

HONEST = [
    # glue after a lone box is still refused as something glued to it (around.py's rule, not this file's)
    ("Therefore:\\hskip 1em\\boxed{5}", "5", C, "", ALL),
    ("The answer is $\\kern1em\\boxed{6}$.", "6", C, "", ALL),
    ("\\boxed{6}\\hskip 1em\\boxed{6}", "6", C, "", ALL),
    ("\\boxed{5}\\quad\\boxed{5}", "5", C, "", ALL),
    ("\\boxed{5} = \\boxed{5}", "5", C, "", ALL),
    ("Case 1 gives 4 and case 2 gives 6, so the total is \\boxed{10}.", "10", C, "", ALL),
    ("The answer is \\boxed{5}.\n\nWait, I miscounted: the answer is \\boxed{6}.", "6", C, "", ALL),
    ("Answer: 5\n\nThis follows from step 2.", "5", C, "", ALL),
    ("Answer: 5\n\nAnswer: 5", "5", C, "", ALL),
    ("\\boxed{5}\n\nWe are done.", "5", C, "", ALL),
    ("\\boxed{5}\n\n6 = 2 \\cdot 3 was used above.", "5", C, "", ALL),
    ("\\boxed{5}\n\n5", "5", C, "", ALL),
    ("So 2 + 3 = 5", "5", C, "", ("last_number", "latex")),  # '=' between numbers is arithmetic, no hedge
    ("The sum is $2 + 3 = 5$.", "5", C, "", ("last_number", "latex")),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HEDGES))
def test_two_candidates_in_one_statement_pay_neither(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HONEST))
def test_one_candidate_still_scores(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
