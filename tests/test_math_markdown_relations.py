"""Markdown emphasis, a relation with nothing on its left and marks that cut a number, hand-labelled:
- markdown emphasis around an answer or its label reads as the same text without it ('**Final Answer:** \\boxed{42}',
  'The final answer is **\\boxed{42}**.', 'Answer: *42*', 'Answer: `42`', '__Answer:__ 42', '### Final Answer\\n\\n42'),
  and opens no way around a refusal ('**5** or **6**' is a hedge, '\\boxed{5}**2' a power);
- a relation with nothing on its left ('\\boxed{\\neq 5}', 'Answer: ≥ 5', '\\boxed{\\in 5}') states no value: WRONG,
  as math-verify would read the number after it. '= 5' asserts the value and stays correct (decision);
- '\\boxed{5\\ldots}' (cut off or a sequence), '\\boxed{5'}' (feet, minutes) and '\\boxed{6_{5}}' (a base-5 numeral)
  are not 5 and 6; 'Answer: 42!' is the factorial 42! in every mode, as '\\boxed{3}!' is.
Decisions: rlvr/verifiers/math/around.py (_BEFORE_BOX, _AFTER_BOX), latex.py (clean, trim_prose), lines.py
(ANSWER_MARK, _heading), forms.py (_marks_problem), words.py (approximation_problem); corpus rows of forms
'markdown_emphasis', 'leading_relation', 'cut_marks'.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES, MathVerifier, extract_answer

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL = MODES
FACT42 = str(math.factorial(42))

MARKDOWN = [  # (completion, reference, outcome, modes)
    ("**Final Answer:** $\\boxed{42}$", "42", C, ALL), ("**Final Answer:** \\boxed{42}", "42", C, ALL),
    ("**Answer:** \\boxed{42}", "42", C, ALL), ("- **Final Answer:** \\boxed{42}", "42", C, ALL),
    ("The final answer is **\\boxed{42}**.", "42", C, ALL), ("Final answer: **\\boxed{42}**", "42", C, ALL),
    ("**\\boxed{42}**", "42", C, ALL), ("$**\\boxed{42}**$", "42", C, ALL),
    ("**Final Answer:** $**\\boxed{42}**$", "42", C, ALL), ("Answer: *42*", "42", C, ALL),
    ("Answer: `42`", "42", C, ALL), ("__Answer:__ 42", "42", C, ALL), ("Answer: _42_", "42", C, ALL),
    ("Answer: ***42***", "42", C, ALL), ("The answer is *42*.", "42", C, ALL), ("*Answer*: 42", "42", C, ALL),
    ("### Final Answer\n\n42", "42", C, ALL), ("### **Final Answer**\n\n42", "42", C, ALL),
    ("Reasoning.\n\n## Answer\n\nThe total is 42.", "42", C, ALL),
    # the same forms with another value are wrong
    ("**Final Answer:** \\boxed{41}", "42", W, ALL), ("The final answer is **\\boxed{41}**.", "42", W, ALL),
    ("Answer: *41*", "42", W, ALL), ("Answer: `41`", "42", W, ALL), ("__Answer:__ 41", "42", W, ALL),
    ("### Final Answer\n\n41", "42", W, ALL),
    # emphasis is no way around a hedge or an operator
    ("Answer: **5** or **6**", "5", W, ALL), ("Answer: **5** or **6**", "6", W, ALL),
    ("Answer: *5* or *6*", "5", W, ALL), ("Answer: `5` or `6`", "6", W, ALL),
    ("**\\boxed{5}** or **\\boxed{6}**", "5", W, ALL), ("**\\boxed{5}** or **\\boxed{6}**", "6", W, ALL),
    ("\\boxed{5}**2", "5", W, ALL), ("\\boxed{5}**2", "25", W, ALL), ("**\\boxed{5}**2", "5", W, ALL),
    ("2**\\boxed{5}", "5", W, ALL), ("x**\\boxed{5}", "5", W, ALL), ("(x+1)**\\boxed{2}", "2", W, ALL),
    ("\\boxed{5} * 6", "5", W, ALL),
    # a heading over work is no statement: the last number still answers in latex and last_number
    ("## Answer\n\nFirst, 3 + 4 = 7.\n\nSo the result is 42", "42", C, ("latex", "last_number")),
]

RELATIONS = [
    *[(f"\\boxed{{{rel} 5}}", "5", W, ALL) for rel in (
        "\\neq", "\\ne", "\\not=", "\\not", "\\geq", "\\ge", ">", "<", "\\leq", "\\le", "\\gg", "\\ll", "\\propto",
        "\\in", "\\notin", "\\lessapprox", "\\mid", "\\subset", "≠", "≥")],
    ("Answer: $\\neq 5$", "5", W, ALL), ("Answer: ≠ 5", "5", W, ALL), ("Answer: ≥ 5", "5", W, ALL),
    ("Answer: >5", "5", W, ALL), ("The answer is $\\ge 5$.", "5", W, ALL), ("<answer>≠ 5</answer>", "5", W, ALL),
    ("\\boxed{\\neq \\frac{1}{2}}", "\\frac12", W, ALL), ("\\boxed{\\neq5}", "5", W, ALL),
    # decision: '=' and '\\equiv' assert the value; a relation inside an answer is read as before
    ("\\boxed{= 5}", "5", C, ALL), ("Answer: = 5", "5", C, ALL), ("\\boxed{x = 5}", "5", C, ALL),
    ("\\boxed{5}", "5", C, ALL), ("\\boxed{\\infty}", "\\infty", C, ALL),
    ("\\boxed{\\left(1, 2\\right)}", "(1, 2)", C, ALL), ("\\boxed{\\ln 2}", "\\ln 2", C, ALL),
    ("\\boxed{x \\geq 5}", "x \\geq 5", C, ALL), ("\\boxed{\\geq 5}", "\\geq 5", C, ALL),
]

MARKS = [
    ("\\boxed{5\\ldots}", "5", W, ALL), ("\\boxed{5\\dots}", "5", W, ALL), ("\\boxed{5 \\cdots}", "5", W, ALL),
    ("Answer: 5\\ldots", "5", W, ALL), ("\\boxed{0.333\\ldots}", "\\frac13", C, ALL),
    ("\\boxed{1, 2, 3, \\ldots}", "1, 2, 3", W, ALL),
    ("\\boxed{5'}", "5", W, ALL), ("\\boxed{5''}", "5", W, ALL), ("Answer: 5'", "5", W, ALL),
    ("\\boxed{5'}", "5'", C, ALL),
    ("\\boxed{6_{5}}", "6", W, ALL), ("\\boxed{6_5}", "6", W, ALL), ("Answer: $6_{5}$", "6", W, ALL),
    ("\\boxed{12_8}", "12", W, ALL), ("\\boxed{12_8}", "12_7", W, ALL), ("\\boxed{12_8}", "12_8", C, ALL),
    ("\\boxed{12_{8}}", "12_8", C, ALL), ("\\boxed{6_{10}}", "6", C, ALL), ("\\boxed{x_1}", "x_1", C, ALL),
    ("Answer: 42!", "42", W, ALL), ("The answer is 42!", "42", W, ALL), ("<answer>42!</answer>", "42", W, ALL),
    ("#### 42!", "42", W, ALL), ("\\boxed{42}!", "42", W, ALL),
    ("Answer: 42!", FACT42, C, ALL), ("The answer is 42!", FACT42, C, ALL), ("#### 42!", FACT42, C, ALL),
    ("Answer: 42", "42", C, ALL), ("The answer is 42. Great!", "42", C, ALL),
]


def _cases(table):
    return [pytest.param(mode, *case[:3], id=f"{mode}-{i}:{case[0][:30]}:{case[1][:8]}")
            for i, case in enumerate(table) for mode in case[3]]


@pytest.mark.parametrize("mode, completion, reference, outcome", _cases(MARKDOWN))
def test_markdown_emphasis_reads_as_without_it(verifiers, mode, completion, reference, outcome):
    verdict = verifiers[mode].verify(completion, reference)
    assert verdict.outcome == outcome, verdict.detail


@pytest.mark.parametrize("mode, completion, reference, outcome", _cases(RELATIONS))
def test_a_relation_before_the_answer_states_no_value(verifiers, mode, completion, reference, outcome):
    verdict = verifiers[mode].verify(completion, reference)
    assert verdict.outcome == outcome, verdict.detail
    if outcome != C:
        assert verdict.score == 0.0


@pytest.mark.parametrize("mode, completion, reference, outcome", _cases(MARKS))
def test_dots_primes_bases_and_factorials(verifiers, mode, completion, reference, outcome):
    verdict = verifiers[mode].verify(completion, reference)
    assert verdict.outcome == outcome, verdict.detail


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("completion", ["__Answer:__ 42", "Answer: *42*", "Answer: `42`", "**Answer:** __42__",
                                        "### Final Answer\n\n42", "The answer is ***42***."])
def test_the_extracted_answer_has_no_emphasis(mode, completion):
    """The emphasis is gone from the extracted text itself, not left for math-verify to ignore."""
    assert extract_answer(completion, mode) == "42"


COSTLY = {  # (completion, share of the budget): headings over work count towards RECENT (without that cap 4000 of them
    # cost 0.14-0.17 s; now 10-30 ms); 64 lines of '`' cost 0.09 s before and after the emphasis reads
    "4000 headings over work": (("## Answer\n" + "First, 3 + 4 = 7 and " * 10 + "\n") * 4000, 0.5),
    "500 headings over 2 KB lines": (("## Answer\n" + "First x " * 240 + "\n") * 500, 0.5),
    # 1 MB of '!': 0.105-0.108 s on a slower machine of the CI kind (2026-11-29), 0.11-0.155 s on a slower one still
    # (2026-11-30, inside a full suite run): held to the claim of docs/verifiers.md itself, at most the budget's 0.2 s
    "1 MB of '!' after a value": ("Answer: 5" + "!" * 1_000_000, 1.0),
    "64 answer lines of '`'": (("Answer: " + "`" * 1990 + "\n") * 64, 1.0),
}


@pytest.mark.parametrize("name", COSTLY)
def test_the_new_reads_take_little_cpu(name):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import math_adversarial

    completion, share = COSTLY[name]
    case = math_adversarial.AdversarialCase(name, completion, "5")
    for mode in MODES:
        verifier = MathVerifier(mode, worker=math_adversarial.NoWorker())
        assert math_adversarial.parent_cpu(verifier, case, tries=2) <= share * math_adversarial.BUDGET_S, (name, mode)
