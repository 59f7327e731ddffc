"""Adversarial forms: what stands next to a box or an
<answer> block (a braced sign, a term, a factor in parentheses, a scale in words, 'percent of'), running text whose
final number is changed by the word before it ('twice 120', '3 through 5') or is the value of a multiple of the
unknown ('The value of $2n$ is 34'), and answers given for one case among several ('for n even the answer is 4',
'5 otherwise'). Each form has an honest variant that keeps scoring 1. Decisions: rlvr/verifiers/math/around.py
(box_problem, _around_box, qualified, _running_problem); corpus rows of form 'neighbours'.
"""
from __future__ import annotations

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL, LN = MODES, ("latex", "last_number")
PART, QUALIFIED = "part of", "bound, estimate or qualify"

FOUND = [
    ("{-}\\boxed{3}", "3", W, PART, ALL), ("\\tfrac12\\boxed{3}", "3", W, PART, ALL),
    ("\\boxed{3}(2)", "3", W, PART, ALL), ("\\boxed{3} + C", "3", W, PART, ALL),
    ("\\boxed{3} - 2", "3", W, PART, ALL), ("\\boxed{3} (in thousands)", "3", W, PART, ALL),
    ("\\boxed{3} percent of 50", "3", W, PART, ALL), ("-<answer>3</answer>", "3", W, PART, ALL),
    ("x = - <answer>3</answer>", "3", W, PART, ALL), ("\\boxed{5} otherwise", "5", W, PART, ALL),
    ("Twice 120 is the total.", "120", W, QUALIFIED, LN), ("The total is twice 120.", "120", W, QUALIFIED, LN),
    ("The value of $2n$ is 34.", "34", W, QUALIFIED, LN), ("The value of 3x is 34.", "34", W, QUALIFIED, LN),
    ("It's 3 through 5.", "5", W, QUALIFIED, LN), ("It's 3 through 5.", "3", W, "", LN),
    ("up to 5", "5", W, QUALIFIED, LN),
    ("For n odd the answer is 3; for n even the answer is 4.", "4", W, QUALIFIED, ALL),
    ("If $n > 3$, the answer is 4.", "4", W, QUALIFIED, ALL),
    ("The total is 4 when $n$ is even and 5 otherwise.", "5", W, QUALIFIED, LN),
    ("The total is 4 when $n$ is even and 5 otherwise.", "4", W, "", LN),
    ("\\boxed{4}. However, if we include the endpoints, we get 5.", "5", W, "", ALL),
    ("\\boxed{4}. However, if we include the endpoints, we get 5.", "4", W, "hedged", ALL),
]
HONEST = [
    ("\\boxed{3}.", "3", C, "", ALL), ("\\boxed{-3}", "-3", C, "", ALL), ("\\boxed{3} (3 apples)", "3", C, "", ALL),
    ("\\boxed{34} (12 + 22)", "34", C, "", ALL), ("\\boxed{12} (see step 2)", "12", C, "", ALL),
    ("The answer is $\\boxed{3}$ (in cm).", "3", C, "", ALL), ("\\boxed{5} cm", "5", C, "", ALL),
    ("The answer is \\boxed{3} - easy.", "3", C, "", ALL),
    ("\\boxed{12\\%}", "12\\%", C, "", ALL), ("- <answer>3</answer>", "3", C, "", ALL),
    ("Answer: <answer>3</answer>", "3", C, "", ALL), ("<answer>-3</answer>", "-3", C, "", ALL),
    ("For this problem the answer is 4.", "4", C, "", ALL), ("If we add them, the answer is 7.", "7", C, "", ALL),
    ("For $n = 5$ the answer is 4.", "4", C, "", ALL), ("The total is 120.", "120", C, "", LN),
    ("The value of $n$ is 34.", "34", C, "", LN), ("Prices rose by 12 percent.", "12\\%", C, "", ("latex",)),
    ("So $x = 3$, the value of $2x$ is 6 and the answer is 3.", "3", C, "", LN),
    ("Hence the inequality holds exactly when $x \\geq 2$.", "x >= 2", C, "", ("latex",)),
]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail",
                         [pytest.param(mode, *case[:4], id=f"{mode}-{i}:{case[0][:30]}")
                          for i, case in enumerate(FOUND + HONEST) for mode in case[4]])
def test_neighbours_and_cases(verifiers, mode, completion, reference, outcome, detail):
    verdict = verifiers[mode].verify(completion, reference)
    assert verdict.outcome is outcome and verdict.score == float(outcome is C), verdict
    assert detail in verdict.detail, verdict.detail
