"""Two values joined by markup or symbols are a hedge, never the last one.

- Symbols (rlvr/verifiers/math/hedges.py): on an 'Answer:' line, '∨' always, and '∪', '∩', '∧' and bars with
  nothing between them ('3 || 4', '| 3 | 4 |') between plain values offer two values.
- Gaps (rlvr/verifiers/math/latex.py markup_only; hedges.py; forms.py): between two boxes, a gap without a word
  of prose (markup of any name with its arguments, a '%' comment, symbols, emoji, punctuation, lone letters as in
  'a.k.a.', restating words) joins them as a hedge; inside one box, glue of any name ('\\kern1em', '\\mathstrut'),
  '\\mid\\mid', '\\ \\&\\ ' and '\\xrightarrow{}' do. Words that correct ('Wait, I made an error') still make the later
  box the answer, and a solution may box each step and then its result.
- Labels and cases (rlvr/verifiers/math/gaps.py): a label naming another reading ('Other interpretation:', 'Another
  possibility:') and a case condition ('for even n') join too.
Corpus rows: form 'r5_join'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W = Outcome.CORRECT, Outcome.WRONG
ALL = MODES


_BETWEEN_BOXES = ("\\color{red}", "\\label{x}", "\\tag{1}", "\\text{~}", "% comment\n", "\u200b", "…", " — ", " 🤔 ",
                  " a.k.a. ", ", i.e. ", "\\mathrel{|}", "\\sqcup", "\\uplus", "\\amalg", "\\smallsetminus",
                  " (equivalently ", "\\textcolor{blue}{}", " \\qquad\\rule{1cm}{0pt} ", ", that is, ")
_INSIDE_BOX = ("3 \\mathstrut 4", "3 \\kern1em 4", "3 \\mid\\mid 4", "3\\ \\&\\ 4", "3 \\xrightarrow{} 4",
               "3 \\text{ (alt. } 4)")
LINES = [
    *[(f"Answer: {hedge}", ref, W, "hedged", ALL)
      for hedge in ("3 ∨ 4", "3 ∪ 4", "3 ∩ 4", "3 ∧ 4", "3 || 4", "| 3 | 4 |") for ref in ("3", "4")],
    ("Answer: |-5|", "5", C, "", ALL),
    ("\\boxed{|-5|}", "5", C, "", ALL),
    ("\\boxed{\\{1, 2\\} \\cup \\{3\\}}", "\\{1, 2, 3\\}", C, "", ALL),
    ("\\boxed{(0, 1) \\cup (2, 3)}", "(0, 1) \\cup (2, 3)", C, "", ALL),
]
BOXES = [
    *[(f"The answer is \\boxed{{3}}{gap}\\boxed{{4}}", ref, W, "hedged", ALL)
      for gap in _BETWEEN_BOXES for ref in ("3", "4")],
    *[(f"The answer is \\boxed{{{inside}}}.", ref, W, "", ALL) for inside in _INSIDE_BOX for ref in ("3", "4")],
    ("\\boxed{3}\n\nOther interpretation: \\boxed{4}", "4", W, "hedged", ALL),
    ("\\boxed{3}\n\nAnother reading: \\boxed{4}", "4", W, "hedged", ALL),
    ("\\boxed{3} for even n; \\boxed{4} for odd n.", "4", W, "hedged", ALL),
    ("\\boxed{3} when n is odd, \\boxed{4} when n is even.", "4", W, "", ALL),
    ("The answer is 3. Another possibility: the answer is 4.", "4", W, "hedged", ALL),
    ("\\boxed{3} for part (a) and \\boxed{4} for part (b).", "\\{3, 4\\}", C, "", ALL),
]
HONEST = [
    ("The answer is \\boxed{3}. Wait, I made an error: the total is one more, so \\boxed{4}.", "4", C, "", ALL),
    ("\\boxed{3}. Actually, recounting the endpoints gives \\boxed{4}.", "4", C, "", ALL),
    ("Step 1: \\boxed{3}\n\nStep 2: adding one gives \\boxed{4}", "4", C, "", ALL),
    ("First we get $a = \\boxed{3}$. Then $b = a + 1 = \\boxed{4}$.", "4", C, "", ALL),
    ("\\boxed{3} ❌\n\n\\boxed{4}", "4", C, "", ALL),
    ("The answer is \\boxed{4} \\quad \\boxed{4}", "4", C, "", ALL),
    ("\\boxed{3 \\text{ cm}}", "3", C, "", ALL),
    ("\\boxed{1}, \\boxed{2}", "\\{1, 2\\}", C, "", ALL),
    ("\\boxed{12\\,000}", "12000", C, "", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(LINES))
def test_symbols_on_an_answer_line_offer_two_values(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(BOXES))
def test_markup_between_or_inside_boxes_joins_them(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HONEST))
def test_corrections_and_steps_still_score(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
