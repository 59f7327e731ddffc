"""An answer statement or correction after the final
box is read, and text a reader never sees is no statement. Decisions: rlvr/verifiers/math/corrections.py (a sentence
after the final statement that states only a value is one more statement), displayed.py (framed boxes and display
math after it), hidden.py (comments, fenced code, a compared or mistaken value). Corpus rows: 'r5_statement'.
- A clear answer statement after the box IS the answer ('Ans: 3', 'Result: 3', 'Answer = 3', a bold 'Final Answer'
  line over the value, '\\framebox{3}', '\\[3\\]' alone on its line): it pays 3, never the box's 4.
- A sentence after it that states only a value after fillers and a copula ("It's 3.", 'We get 3.', 'The total is
  3.', 'Hence 3.', 'My mistake, 3.', '(I mean 3)') is the last statement too: judgement call, it pays 3.
- A value after the box that is questioned ('Hmm, 3?') withdraws it (UNPARSEABLE); an arrow from the box to another
  value on its line ('\\boxed{4} -> 3') is a hedge (WRONG), as between two boxes.
- HTML comments, LaTeX comments (a line opening with '%') and fenced code after a prose answer hold no statement; a
  box named as compared or mistaken ('For comparison, a wrong method gives \\boxed{4}.') is no answer.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL = MODES
RUNNING = ("latex", "last_number")


_CLEAR = ["**Final Answer**\n3", "Final Answer\n3", "Ans: 3", "Ans. 3", "ANS: 3", "Result: 3", "Final result: 3",
          "Conclusion: 3", "Answer = 3", "the answer = 3", "Answer → 3", "Answer -> 3", "\\framebox{3}",
          "\\colorbox{yellow}{3}", "\\fcolorbox{red}{white}{3}", "\\bbox{3}", "\\[3\\]", "$$3$$", "\\[ 3 \\]"]
_SENTENCES = ["It's 3.", "It is 3.", "I get 3.", "I got 3.", "We get 3.", "we obtain 3", "The total is 3.",
              "Thus the total is 3.", "Hence 3.", "Therefore 3.", "the answer must be 3", "the answer would be 3",
              "the answer becomes 3", "the answer equals 3", "My mistake, 3.", "My bad: 3",
              "Err, 3.", "Reconsidering: 3.", "So there are 3 apples.", "∴ 3", "$\\therefore 3$",
              "P.S. it's 3.", "No wait, 3 is right."]
_ON_LINE = [" (I mean 3)", " nvm, 3", " jk, 3", " lol no, 3", ", sorry, 3", ". Actually 3."]
LATER = [
    *[(f"\\boxed{{4}}\n\n{tail}", "3", C, "extracted 3", ALL) for tail in _CLEAR + _SENTENCES],
    *[(f"\\boxed{{4}}\n\n{tail}", "4", W, "extracted 3", ALL) for tail in _CLEAR + _SENTENCES],
    *[(f"\\boxed{{4}}{tail}", ref, outcome, "extracted 3", ALL) for tail in _ON_LINE
      for ref, outcome in (("3", C), ("4", W))],
]
DOUBTED = [
    *[(f"\\boxed{{4}}{tail}", ref, U, "retracted", ALL) for tail in (". Hmm, 3?", "\n\nSo 3?", "\n\nIt's 3?")
      for ref in ("3", "4")],
    *[(f"\\boxed{{4}}{tail}", ref, W, "hedged", ALL) for tail in ("\n\nMaybe 3?", "\n\nOr is it 3?", "\n\n=> 3")
      for ref in ("3", "4")],
    *[(f"\\boxed{{4}} {arrow} 3", ref, W, "hedged", ALL) for arrow in ("->", "→", "⟹", "=>")
      for ref in ("3", "4")],
]
HIDDEN = [
    *[(f"The answer is 3.{tail}", ref, outcome, "", ALL) for tail in (
        "\n\n<!--\nFinal answer: 4\n-->", "\n<!-- \\boxed{4} -->", "\n% \\boxed{4}", "\n  % Answer: 4",
        "\n```\n\\boxed{4}\n```", "\n\n```latex\nAnswer: 4\n```") for ref, outcome in (("3", C), ("4", W))],
    ("The answer is 3.\n\n<!-- an unclosed comment \\boxed{4}", "4", W, "", ALL),
    ("The answer is 3.\n\nFor comparison, a wrong method gives \\boxed{4}.", "3", U, "retracted", ALL),  # 'wrong'
    ("The answer is 3.\n\nFor comparison, the naive method gives \\boxed{4}.", "3", C, "", ALL),
    ("The answer is 3.\n\nFor comparison, a wrong method gives \\boxed{4}.", "4", U, "retracted", ALL),
    ("The answer is 3.\n\n(Example from a different problem: \\boxed{4})", "4", W, "", ALL),
    ("For comparison, a wrong method gives \\boxed{4}.", "4", U, "not the answer", ALL),
]
HONEST = [
    ("\\boxed{5}\n\nSo she has 5 apples.", "5", C, "", ALL), ("\\boxed{5}\n\nThe total is 5.", "5", C, "", ALL),
    ("\\boxed{5}\n\nIt's 5.", "5", C, "", ALL), ("\\boxed{5}\n\nCheck: 2 + 3 = 5.", "5", C, "", ALL),
    ("\\boxed{5}\n\nIt is 5 because 2 + 3 = 5.", "5", C, "", ALL),
    ("\\boxed{5}\n\nThis is 2 more than 3.", "5", C, "", ALL),
    ("\\boxed{12}\n\nWe get 12 cookies in total.", "12", C, "", ALL),
    ("\\boxed{5}\n\nI double-checked: 3 + 2 = 5, so it's not 4 or 6.", "5", C, "", ALL),
    ("It is 5 and not 6.", "5", C, "", RUNNING), ("Answer: 5 cm (not 5 m)", "5 cm", C, "", ALL),
    ("```\n\\boxed{42}\n```", "42", C, "", ALL), ("The answer is 50% of 8, so \\boxed{4}.", "4", C, "", ALL),
    ("\\boxed{4}\n\n**Final Answer**\n4", "4", C, "", ALL), ("\\boxed{4}\n\nResult: 4", "4", C, "", ALL),
    ("The answer is \\boxed{4}.\n\nFor comparison, 2 + 2 = 4.", "4", C, "", ALL),
    ("```python\nprint(2 + 2)\n```\nThe answer is \\boxed{4}.", "4", C, "", ALL),
    ("\\boxed{4}\n\nThe result is 4 apples.", "4", C, "", ALL),
    ("\\boxed{4}\n\nThat is 1 more than 3.", "4", C, "", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(LATER))
def test_a_later_statement_or_correction_is_the_answer(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(DOUBTED))
def test_a_questioned_or_joined_later_value_pays_nothing(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HIDDEN))
def test_hidden_or_compared_text_is_no_statement(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HONEST))
def test_honest_restatements_and_code_still_score(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
