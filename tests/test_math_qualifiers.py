"""Adversarial forms: negated or qualified answer statements,
what is glued to a box, hedges read as one answer, and honest forms that scored 0.

Each class has the adversarial completion (paid 1.0 before, or 0 for an honest form) and a variant that shows the
other side of the rule. Decisions: rlvr/verifiers/math/around.py (qualified, box_problem, trailer_problem,
fallback_problem), hedges.py and latex.py (connectives), lines.py (lines that state no value), numbers.py,
words.py, forms.py and units.py (forms). Corpus rows with the same forms: bench/data/math_corpus.jsonl, forms
'qualified', 'glued_box', 'hedge_joins', 'signed_words', 'dozens', 'unit_case', 'notes_after'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL, S, N, L = MODES, ("strict",), ("last_number",), ("latex",)
LN = ("latex", "last_number")
RETRACTED, QUALIFIED = "retracted", "bound, estimate or qualify"
HEDGED, PART = "hedged", "part of"


# ---------------------------------------------------------------- 2c: negated, retracted, qualified statements
QUALIFIED_LINES = [
    ("Answer: 25 would be wrong", "25", U, RETRACTED, ALL), ("Answer: 25 is impossible", "25", U, RETRACTED, ALL),
    ("Answer: 25 cannot happen", "25", U, RETRACTED, ALL), ("Answer: 5 is wrong", "5", U, RETRACTED, ALL),
    ("Answer: The total cannot be 120.", "120", U, RETRACTED, ALL),
    ("Answer: The total can't be 120.", "120", U, RETRACTED, ALL),
    ("Answer: the wrong answer is 25", "25", U, RETRACTED, ALL),
    ("Answer: a common mistake is 25", "25", U, RETRACTED, ALL),
    ("The answer is 25 would be wrong", "25", U, RETRACTED, ALL),
    ("Answer: my first guess was 25", "25", W, QUALIFIED, ALL),
    ("Answer: the lower bound is 25", "25", W, QUALIFIED, ALL),
    ("Answer: the estimate is 25", "25", W, QUALIFIED, ALL), ("Answer: 5 at best", "5", W, QUALIFIED, ALL),
    ("Answer: The total is unlikely to be 120.", "120", W, QUALIFIED, ALL),
    ("Answer: The total is 120 times larger.", "120", W, QUALIFIED, ALL),
    # the honest forms: a rejected other value after a comma, a plain subject, an explanation
    ("Answer: 25", "25", C, "", ALL), ("Answer: the total is 25", "25", C, "", ALL),
    ("The answer is 25, not 26.", "25", C, "", ALL),
    ("Answer: 25 because 5 times 5 is 25.", "25", C, "", ALL),
    ("I was wrong before. Answer: 25", "25", C, "", ALL),  # the retraction is an earlier sentence's
]

# ---------------------------------------------------------------- 2b, 2b': running text without a statement
QUALIFIED_TEXT = [
    ("The total is not equal to 120.", "120", U, RETRACTED, LN), ("The total can't be 120.", "120", U, RETRACTED, LN),
    ("The total cannot be 120.", "120", U, RETRACTED, LN), ("The total is never 120.", "120", U, RETRACTED, LN),
    ("The total is at least 120.", "120", W, QUALIFIED, LN), ("The total is less than 120.", "120", W, QUALIFIED, LN),
    ("The total is about 120.", "120", W, QUALIFIED, LN), ("Maybe 5.", "5", W, QUALIFIED, LN),
    ("Probably 5.", "5", W, QUALIFIED, LN), ("Anything but 5.", "5", W, QUALIFIED, LN),
    ("The total is 120.", "120", C, "", LN), ("Adding 5 more gives 120.", "120", C, "", LN),
    ("It is 3 and not 4, so 5.", "5", C, "", LN),  # the negation is 4's, in another clause
    ("This cannot be negative, so the total is 120.", "120", C, "", LN),  # another clause
]

# ---------------------------------------------------------------- 2a: what is next to a box or an <answer> block
GLUED = [
    ("The answer is - \\boxed{3}", "3", W, PART, ALL), ("x = -\\,\\boxed{3}", "3", W, PART, ALL),
    ("10 - \\boxed{3}", "3", W, PART, ALL), ("x \\not= \\boxed{3}", "3", W, PART, ALL),
    ("\\boxed{3},000", "3", W, PART, ALL), ("\\boxed{3}{,}000", "3", W, PART, ALL), ("\\boxed{3}.5", "3", W, PART, ALL),
    ("\\boxed{3}e5", "3", W, PART, ALL), ("(\\boxed{3})^2", "3", W, PART, ALL), ("{\\boxed{3}}^2", "3", W, PART, ALL),
    ("\\left(\\boxed{3}\\right)^{2}", "3", W, PART, ALL), ("\\boxed{3}²", "3", W, PART, ALL),
    ("\\boxed{3}!", "3", W, PART, ALL), ("\\boxed{3} ½", "3", W, PART, ALL), ("\\boxed{3}½", "3", W, PART, ALL),
    ("\\boxed{3}M", "3", W, PART, ALL), ("\\boxed{3}x", "3", W, PART, ALL), ("\\boxed{3}'", "3", W, PART, ALL),
    ("anything but \\boxed{3}", "3", W, "anything but", ALL),
    ("<answer>4</answer>.5", "4", W, PART, ALL), ("<answer>4</answer>,000", "4", W, PART, ALL),
    # honest: a sentence's punctuation, a bullet, a dash after a word, a unit, a clause after a comma
    ("The answer is \\boxed{3}.", "3", C, "", ALL), ("\\boxed{3}, so we are done.", "3", C, "", ALL),
    ("So \\boxed{3}. It checks out.", "3", C, "", ALL), ("- \\boxed{3}", "3", C, "", ALL),
    ("Final answer - \\boxed{3}", "3", C, "", ALL), ("(\\boxed{3}), as claimed", "3", C, "", ALL),
    ("\\boxed{5}cm", "5 cm", C, "", ALL), ("<answer>4</answer>.", "4", C, "", ALL),
    ("The answer is -\\boxed{3}", "-3", W, PART, ALL),  # a sign next to a box is never read into it
]

# ---------------------------------------------------------------- 2d: hedges read as one answer
HEDGES = [
    ("\\boxed{4}|\\boxed{5}", "5", W, HEDGED, ALL), ("\\boxed{4}\\newline\\boxed{5}", "5", W, HEDGED, ALL),
    ("\\boxed{4}\\hline\\boxed{5}", "5", W, HEDGED, ALL), ("\\boxed{4} \\boxed{} \\boxed{5}", "5", W, HEDGED, ALL),
    ("\\boxed{3 & 4}", "4", W, HEDGED, ALL), ("The answer is 3 & 4.", "4", W, HEDGED, ALL),
    ("\\boxed{4}. If not, then 3.", "4", W, HEDGED, ALL), ("\\boxed{4}. Unless it's 3.", "4", W, HEDGED, ALL),
    ("\\boxed{4}. Or three.", "4", W, HEDGED, ALL),
    ("\\boxed{4}\n\nWrong: \\boxed{5}", "5", C, "", ALL),  # a correction
    ("\\boxed{\\begin{pmatrix} 3 & 4 \\end{pmatrix}}", "\\begin{pmatrix} 3 & 4 \\end{pmatrix}", C, "", ALL),
    ("\\boxed{4}. If we check, 2 + 2 = 4.", "4", C, "", ALL), ("\\boxed{4}. Or four, in words.", "4", C, "", ALL),
]

# ---------------------------------------------------------------- 3: honest forms that scored 0
HONEST = [
    ("Answer: minus five", "-5", C, "", ALL), ("Answer: negative 5", "-5", C, "", ALL),
    ("Answer: negative three", "-3", C, "", ALL), ("Answer: negative 5", "5", W, "", ALL),
    ("Answer: a dozen", "12", C, "", ALL), ("Answer: two dozen", "24", C, "", ALL),
    ("Answer: half a dozen", "6", C, "", ALL), ("Answer: a dozen eggs", "12", C, "", ALL),
    ("Answer: 3 dozen eggs", "36", C, "", ALL), ("Answer: two dozen", "2", W, "", ALL),
    ("Answer: 5 ml", "5 mL", C, "", ALL), ("Answer: 5 mL", "5 ml", C, "", ALL), ("Answer: 5 KM", "5 km", C, "", ALL),
    ("Answer: 5 ml", "5 L", W, "", ALL), ("Answer: 5 miles", "5", C, "", ALL),
    ("Answer: 2 1/4 hours", "9/4", C, "", ALL), ("Answer: 5 1/2 miles", "11/2", C, "", ALL),
    ("Answer: 2 1/4 hours", "2", W, "", ALL),
    ("Thus x = 4.\n\n**Answer:** $x = 4$ (see step 2)", "4", C, "", ALL),
    ("**Final Answer:** 4 apples (from step 3)", "4", C, "", ALL),
    ("**Final Answer:** 4 apples (from step 3)", "3", W, "", ALL),
    ("The final answer is \\boxed{4}.\n\nNote that the answer is independent of the 2 chosen points.", "4", C, "",
     ALL),
    ("So the answer is 4.\n\nThe answer is in units of 10 meters.", "4", C, "", ALL),
    ("\\boxed{3}\n\nThe answer is therefore 4.", "4", C, "", ALL),  # a line that states a value still overrules
]

# ---------------------------------------------------------------- deliberate refusals (docs/verifiers.md)
REFUSED = [
    ("The answer is \\boxed{3}!", "3", W, PART, ALL),  # '!' glued to a box is a factorial
    ("Answer: USD 5", "5", W, "", S), ("Answer: two point five", "2.5", W, "", ALL),
    ("Answer: 3:45 PM", "3:45", W, "", ALL), ("<answer>4 (four)</answer>", "4", W, "", ALL),
    ("Answer: 4 (or equivalently 4.0)", "4", W, HEDGED, ALL),
    ("Answer: the estimate is 25", "25", W, QUALIFIED, ALL),  # even where the question asks for an estimate
]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail",
                         cases(QUALIFIED_LINES + QUALIFIED_TEXT + GLUED + HEDGES + HONEST + REFUSED))
def test_the_second_red_teams_findings(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
