"""The last false positives (rlvr/verifiers/math/trailers.py, corrections.py):
- Two answer statements in one sentence ('The answer is 3, the answer is 4.', 'Final answer: 3 / Final answer: 4')
  offer two values: a hedge, unless a word between them corrects the first ('The answer is 3, no wait, the answer is
  4.'), or the first is arithmetic that gives the second ('The answer is 2 + 2, so the answer is 4.').
- After the final statement, a sentence that offers another value with it is a hedge: a value that opens its sentence
  with a case or an endorsement ('(3 if n is odd)', 'P.S. 3 if ...', '3 is equally valid.'), or a phrase that offers
  one ('Some would say 3.', '(Other interpretation: 3.)', 'Both 3 and 4 satisfy ...'). Arithmetic that ends at the
  answer ('This is because 3 + 1 = 4.') and numbers of other things ('Both triangles have 3 sides.') offer none.
- Later answer labels state the answer: 'A: 3' (a capital A opening its line), 'Solution: 3', '*Correction*: 3'
  (single-star emphasis), "the answer's 3". Corpus rows: form 'r5_trailer'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W = Outcome.CORRECT, Outcome.WRONG
ALL = MODES


ONE_SENTENCE = [
    "The answer is 3, the answer is 4.",
    "The answer is 3; the answer is 4.",
    "Final answer: 3 / Final answer: 4",
    "The answer is 3 (if we count the endpoints) and the answer is 4.",
    "The answer is 3, and the answer is 4.",
    "The final answer is 3, the final answer is 4",
]
TRAILERS = [
    "\\boxed{4}\n\n(3 if n is odd)",
    "\\boxed{4}\n\n(3 when the endpoints count)",
    "\\boxed{4}. Some would say 3.",
    "\\boxed{4}. Others might argue 3.",
    "\\boxed{4}. (Other interpretation: 3.)",
    "\\boxed{4}\n\nAnother reading: 3.",
    "\\boxed{4}\n\nP.S. 3 if the question meant inclusive.",
    "\\boxed{4}\n\nPS: 3 if the question meant inclusive.",
    "\\boxed{4}\n\n3 is equally valid.",
    "\\boxed{4}\n\n3 is also valid.",
    "\\boxed{4}\n\n3 also works.",
    "\\boxed{4}\n\n3 would also work.",
    "\\boxed{4}\n\n3 works too.",
    "\\boxed{4}\n\nBoth 3 and 4 satisfy the constraints.",
    "\\boxed{4}\n\nBoth 4 and 3 work.",
    "Answer: 4\n\n(3 if n is odd)",
]
LATER = [
    "\\boxed{4}\n\nA: 3",
    "\\boxed{4}\n\nSolution: 3",
    "\\boxed{4}\n\n*Correction*: 3",
    "\\boxed{4}\n\nthe answer's 3",
]
WRONG = [
    *[(c, ref, W, "hedged", ALL) for c in ONE_SENTENCE + TRAILERS for ref in ("4", "3")],
    *[(c, "4", W, "", ALL) for c in LATER],
]
HONEST = [
    *[(c, "3", C, "", ALL) for c in LATER],
    ("\\boxed{3}. Wait, I made an error: 2 + 2 = 4, so \\boxed{4}", "4", C, "", ALL),
    ("Step 1: \\boxed{2}. Step 2: \\boxed{3}. Result: \\boxed{4}", "4", C, "", ALL),
    ("\\boxed{4}. (I checked: 2 + 2 = 4.)", "4", C, "", ALL),
    ("\\boxed{4}\n\nThis is because 3 + 1 = 4.", "4", C, "", ALL),
    ("\\boxed{4}\n\n3 + 1 = 4, as required.", "4", C, "", ALL),
    ("\\boxed{4}\n\nNote: 3 + 1 = 4 as well.", "4", C, "", ALL),
    ("\\boxed{5} (not 4)", "5", C, "", ALL),
    ("The answer is 3, no wait, the answer is 4.", "4", C, "", ALL),
    ("The answer is 2 + 2, so the answer is 4.", "4", C, "", ALL),
    ("\\boxed{4}\n\nBoth triangles have 3 sides.", "4", C, "", ALL),
    ("\\boxed{4}\n\n3 does not work: it leaves one over.", "4", C, "", ALL),
    ("\\boxed{4}\n\nAnother approach: count the 3 pairs and add 1.", "4", C, "", ALL),
    ("\\boxed{4}\n\n(4 if we count the endpoints)", "4", C, "", ALL),
    ("\\boxed{4}\n\nBoth methods give 4.", "4", C, "", ALL),
    ("\\boxed{4}\n\nA: 4", "4", C, "", ALL),
    ("\\boxed{4}\n\nSolution: 3 + 1 = 4", "4", C, "", ALL),
    ("Part A: 3 apples, part B: 1 apple.\n\n\\boxed{4}", "4", C, "", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(WRONG))
def test_another_value_offered_in_one_sentence_or_after_the_answer_is_no_answer(verifiers, mode, completion,
                                                                                  reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HONEST))
def test_corrections_explanations_and_later_labels_still_score(verifiers, mode, completion, reference, outcome,
                                                               detail):
    check(verifiers, mode, completion, reference, outcome, detail)
