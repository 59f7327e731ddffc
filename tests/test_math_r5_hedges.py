"""Forms an earlier change left undecided (rlvr/verifiers/math/hedges.py, operators.py).
- 'alt.', 'alternatively', 'vs' offer a second value, as 'or' does: 'Answer: 5 (alt. 6)' paid 6 in every mode.
- '\\lvert', '\\rvert', '\\Vert', '\\lVert', '\\rVert' between two plain values part them, as '|' and '\\vert' do:
  '\\boxed{5 \\lvert 6}' paid 6. Around one value they are an absolute value ('\\lvert -5 \\rvert' is 5).
- An en dash between two values is a range or an operator math-verify cannot read: 'Answer: 5 – 6' paid 6. A
  leading en dash is a minus ('–3' is -3).
Left as they were (decided, tested here): '\\boxed{5} [6]' and 'Answer:\\n5\\n(6)' are 5 (a bracketed number after the
answer is a citation or an equation number, not a second value). Corpus rows: form 'r5_hedge'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W = Outcome.CORRECT, Outcome.WRONG
ALL = MODES


WRONG = [
    *[(f"Answer: 5 ({word} 6)", ref, W, "hedged", ALL)
      for word in ("alt.", "alternatively", "alternative:", "vs", "versus") for ref in ("5", "6")],
    ("Answer: 5 vs. 6", "6", W, "hedged", ALL),
    *[(f"\\boxed{{5 \\{bar} 6}}", ref, W, "hedged", ALL)
      for bar in ("lvert", "rvert", "Vert", "lVert", "rVert") for ref in ("5", "6")],
    *[("Answer: 5 – 6", ref, W, "'–' between two values", ALL) for ref in ("5", "6", "-1")],
    ("\\boxed{5 – 6}", "6", W, "'–' between two values", ALL),
    ("\\boxed{5} [6]", "6", W, "", ALL),
    ("Answer:\n5\n(6)", "6", W, "", ALL),
    # The spacing after a box is skipped once, by itself (around._SPACE): each kind of it still reaches what follows.
    *[(f"\\boxed{{5}}{space}+ 2", "5", W, "a term after it", ALL)
      for space in (" $ \\, ** ", "\\) \\; ", "\\]~\\!", "\t\\:\\ ")],
    ("\\boxed{5}\\] \\, (2)", "5", W, "'(2)' after it", ALL),
]
HONEST = [
    ("\\boxed{\\lvert -5 \\rvert}", "5", C, "", ALL),
    ("Answer: –3", "-3", C, "", ALL),
    ("\\boxed{5} [6]", "5", C, "", ALL),
    ("Answer:\n5\n(6)", "5", C, "", ALL),
    ("Answer: 5 – 6", "5 – 6", C, "", ALL),  # the reference's own construct is compared as written
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(WRONG))
def test_a_second_value_offered_or_joined_is_no_answer(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HONEST))
def test_one_value_with_bars_or_a_sign_still_scores(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
