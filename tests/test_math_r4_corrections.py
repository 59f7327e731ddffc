"""Corrections after the final answer.

Missed: a real correction the rules skipped paid the withdrawn value; it now states the answer (or withdraws the old
one). Misread: text that is no correction (a counterfactual, an intermediate quantity, a code comment) was read as
one and paid a value the completion did not give; the earlier answer now stands. Honest answers refused before ('The
answer is actually 6.', 'Oops, I mean the answer is still 5.') read. Decision: rlvr/verifiers/math/corrections.py
(openers, the subject a corrected value may follow, a value restated against the old one), prose.py (fillers).
Corpus rows: form 'correction_words'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL = MODES
B = "The answer is \\boxed{5}.\n\n"

_READ_AS_SIX = [  # missed: each paid 5 before; each states 6
    "It's 6, not 5.", "Wait, no, 6.", "No, 6.", "Nope, 6.", "Not 5 but 6.", "I meant 6.", "Sorry, I meant 6.",
    "Make that 6.", "Make it 6.", "Rather, 6.", "Correction - 6", "Corrected: 6", "Fix: 6", "Errata: 6", "Revised: 6",
    "Typo: 6.", "Recount: 6.", "Final count: 6.", "Final total: 6.", "Final: 6", "On second thoughts, 6.",
    "On further reflection, it's 6.", "Upon reflection, the total is 6.", "My bad, the total is 6.",
    "Sorry, the total is 6.", "Apologies, the total is 6.", "I made a typo; it's 6.", "That was a typo, it's 6.",
    "Strike that, 6.", "Ignore that, it's 6.", "Let me recheck... it's 6.", "Rechecking, it's 6.",
    "Double-checking, it's 6.", "Hmm, 6.", "Er, 6.", "So it's 6.",
    "Oops, 2 + 4 = 6.", "Oops: 5 + 1 = 6.", "Oops, the total is 2 + 4 = 6.",
]
_NOT_A_CORRECTION = [  # misread: each paid 6 before; the answer is still 5
    "Had we included the endpoint, it should be 6.", "Note: had we counted the endpoints, the total should be 6.",
    "Actually, the total of the first row is 6.", "Actually, we used the fact that the first term is 6.",
    "```python\n# Correction: 6\nprint(5)\n```", "```\nOn second thought, 6\n```",
]

CORRECTIONS = [
    *[(B + tail, "6", C, "", ALL) for tail in _READ_AS_SIX],
    *[(B + tail, "5", W, "", ALL) for tail in _READ_AS_SIX],
    *[(B + tail, "5", C, "", ALL) for tail in _NOT_A_CORRECTION],
    *[(B + tail, "6", W, "", ALL) for tail in _NOT_A_CORRECTION],
    # withdrawn only: another value offered after a correction word, but not stated cleanly
    (B + "Wait, I forgot to add 1: 5 + 1 = 6.", "5", U, "retracted", ALL),
    # honest: a correction that states the same value, or restates the answer against another value
    (B + "It's 5, not 6.", "5", C, "", ALL), (B + "Oops, I mean the answer is still 5.", "5", C, "", ALL),
    (B + "Sorry, the total is 5.", "5", C, "", ALL), (B + "No, 5 is right.", "5", C, "", ALL),
    (B + "Hmm, 5 checks out.", "5", C, "", ALL), (B + "So the first term is 6.", "5", C, "", ALL),
    (B + "Rather than 6, we get 5.", "5", C, "", ALL),
    (B + "If we forgot the last one, the total would be 6.", "5", C, "", ALL),
    (B + "Update: step 6 confirms this.", "5", C, "", ALL), (B + "Correction: 6", "6", C, "", ALL),
    ("The answer is actually 6.", "6", C, "", ALL), ("Answer: actually 6", "6", C, "", ALL),
    ("The answer is really 6.", "6", C, "", ALL), (B + "The answer is actually 6.", "6", C, "", ALL),
    ("The answer is actually 6.", "5", W, "", ALL),
]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail", cases(CORRECTIONS))
def test_corrections_after_the_answer(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
