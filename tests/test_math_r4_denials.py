"""Negations before a box and denials after a value
that the first rules missed. None may be paid; a negation or denial of something else leaves the answer read.
Decision: rlvr/verifiers/math/denials.py (called from extract._checked). Corpus rows: form 'denial_words'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL = MODES
NEG, DENY = "negation", "retracted"

DENIALS = [
    # a negation touching the box (adversarial completions, each paid 1 before)
    ("The answer is not: \\boxed{5}.", "5", W, NEG, ALL), ("The answer is not (\\boxed{5}).", "5", W, NEG, ALL),
    ("The answer is not\n\n\\boxed{5}", "5", W, NEG, ALL), ("The answer is not quite \\boxed{5}.", "5", W, NEG, ALL),
    ("The answer is not exactly equal to \\boxed{5}.", "5", W, NEG, ALL),
    ("$\\textbf{not } \\boxed{5}$", "5", W, NEG, ALL), ("$\\text{not}\\,\\boxed{5}$", "5", W, NEG, ALL),
    ("The answer is hardly \\boxed{5}.", "5", W, NEG, ALL), ("The answer is by no means \\boxed{5}.", "5", W, NEG, ALL),
    ("The answer isn't going to be \\boxed{5}.", "5", W, NEG, ALL),
    ("The answer is unlikely to be \\boxed{5}.", "5", W, NEG, ALL),
    ("The answer is **not** \\boxed{5}.", "5", W, "", ALL),
    ("I don't think the answer is \\boxed{5}.", "5", W, NEG, ALL),
    ("It's false that the answer is \\boxed{5}.", "5", W, NEG, ALL),
    ("It is impossible for the answer to be \\boxed{5}.", "5", W, NEG, ALL),
    ("Do not answer \\boxed{5}.", "5", W, NEG, ALL), ("I doubt the answer is \\boxed{5}.", "5", W, NEG, ALL),
    # a denial right after the value
    ("Is it \\boxed{5}? No.", "5", U, DENY, ALL), ("Could it be \\boxed{5}? No.", "5", U, DENY, ALL),
    ("\\boxed{5} does not satisfy the equation.", "5", U, DENY, ALL),
    ("\\boxed{5} doesn't satisfy the condition.", "5", U, DENY, ALL),
    ("\\boxed{5} is not a solution.", "5", U, DENY, ALL), ("\\boxed{5} is extraneous.", "5", U, DENY, ALL),
    ("\\boxed{5} is ruled out.", "5", U, DENY, ALL), ("\\boxed{5} is a contradiction.", "5", U, DENY, ALL),
    ("\\boxed{5}: false.", "5", U, DENY, ALL), ("\\boxed{5} – false.", "5", U, DENY, ALL),
    ("\\boxed{5} isn't right.", "5", U, DENY, ALL), ("\\boxed{5} won't work.", "5", U, DENY, ALL),
    ("\\boxed{5} cannot work.", "5", U, DENY, ALL), ("\\boxed{5 \\textbf{ is false}}", "5", U, DENY, ALL),
    ("\\boxed{5 \\text{ is extraneous}}", "5", U, DENY, ALL), ("\\boxed{5} (extraneous)", "5", U, DENY, ALL),
    ("\\boxed{5} (rejected)", "5", U, DENY, ALL), ("\\boxed{5} ❌", "5", U, DENY, ALL),
    ("Answer: 5 is extraneous", "5", U, DENY, ALL), ("Answer: 5 is ruled out", "5", U, DENY, ALL),
    ("Answer: 5. Nope.", "5", U, DENY, ALL), ("Answer: 5. Just kidding.", "5", U, DENY, ALL),
    # running text (modes latex and last_number read its final number; strict finds no statement)
    ("The total is 5, which is false.", "5", U, DENY, ("latex", "last_number")),
    ("We get 5, which is impossible.", "5", U, DENY, ("latex", "last_number")),
    ("We get 5, a contradiction.", "5", U, DENY, ("latex", "last_number")),
    ("The total is hardly 5.", "5", W, NEG, ("latex", "last_number")),
    ("We get 5, which contradicts the assumption.", "5", U, DENY, ("latex", "last_number")),
    ("\\boxed{5} leads to a contradiction.", "5", U, DENY, ALL),
    ("\\boxed{5} contradicts the given.", "5", U, DENY, ALL),
    ("Answer: 5, but that fails", "5", U, DENY, ALL), ("The answer is neither \\boxed{5} nor 6.", "5", W, "", ALL),
    # honest: the negation or denial is about something else, or answers yes
    ("It is not hard to see that the answer is \\boxed{5}.", "5", C, "", ALL),
    ("The answer is \\boxed{5}. This is not a coincidence.", "5", C, "", ALL),
    ("Is it \\boxed{5}? Yes.", "5", C, "", ALL), ("So it is \\boxed{5}? No doubt.", "5", C, "", ALL),
    ("x = \\boxed{5}. The other root, -2, is extraneous.", "5", C, "", ALL),
    ("The answer is \\boxed{5} (the value 3 is extraneous).", "5", C, "", ALL),
    ("\\boxed{5} satisfies the equation.", "5", C, "", ALL),
    ("Since 6 does not satisfy the equation, the answer is \\boxed{5}.", "5", C, "", ALL),
    ("Not 6, so the answer is \\boxed{5}.", "5", C, "", ALL),
    ("The total is 5, which is what we wanted.", "5", C, "", ("latex", "last_number")),
    ("Answer: 5. Not bad!", "5", C, "", ALL),
    ("I don't think it is hard: the answer is \\boxed{5}.", "5", C, "", ALL),
    ("It's false that 6 works, so the answer is \\boxed{5}.", "5", C, "", ALL),
    ("The total is 5, but that took a while.", "5", C, "", ("latex", "last_number")),
]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail", cases(DENIALS))
def test_a_negated_or_denied_answer_is_not_paid(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
