"""One rule for "the answer", and the answer forms a careful grader reads.

Every case holds in every answer mode (strict, last_number, latex) and has a correct and a wrong variant: the
correct one fails if the form is not read, the wrong one if it is read too loosely (the value before the form, or
its last side). Decisions: rlvr/verifiers/math/extract.py (the last statement), hedges.py (hedge, spam,
connectives, bare tuples), words.py (mixed numbers, words, dots, estimates), units.py (units), numbers.py
(thousands, decimal commas, clock times). Corpus rows with the same forms: bench/data/math_corpus.jsonl.
"""
from __future__ import annotations

from fractions import Fraction

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.math.extract import extract_reference, final_answer, outside_thinking, strip_thinking
from rlvr.verifiers.math.hedges import top_level_items, tuple_length
from rlvr.verifiers.math.units import unit_around, unit_of, unit_problem
from rlvr.verifiers.math.verifier import MODES, MathVerifier
from rlvr.verifiers.math.words import cardinal, repeating_dots, words_value

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
HEDGED = "hedged: several answers"


@pytest.fixture(scope="module", params=MODES)
def verifier(request):
    return MathVerifier(request.param, timeout_s=10)


def check(verifier, completion: str, reference: str, outcome: Outcome, detail: str = "") -> None:
    verdict = verifier.verify(completion, reference)
    assert verdict.outcome is outcome and verdict.score == float(outcome is C), verdict
    assert detail in verdict.detail, verdict.detail


# ---------------------------------------------------------------- one rule: the last answer statement
CORRECTION = "The final answer is \\boxed{3}. Wait, I made an error: the total is 5. Final Answer: 5"
GSM8K = "She sold 48 clips in April and \\boxed{24} in May, so 48 + 24 = 72 in all.\n#### 72"
STEPS = ("Step 1: 1 + 1 = \\boxed{2}\nStep 2: 2 \\times 2 = \\boxed{4}\nStep 3: 4 \\times 2 = \\boxed{8}\n"
         "Step 4: 8 \\times 2 = \\boxed{16}\nStep 5: 16 \\times 2 = \\boxed{32}\nSo the result is \\boxed{32}.")
LAST_STATEMENT = [
    # The later 'Final Answer:' corrects the earlier box: the honest correction scores, the overruled box does not.
    # Catches ranking kinds again (boxes before 'Answer:' lines: the old _final loop) and taking the first statement.
    (CORRECTION, "5", C, ""), (CORRECTION, "3", W, "extracted 5"),
    (GSM8K, "72", C, ""), (GSM8K, "24", W, "extracted 72"),  # a boxed intermediate value is not the answer
    ("<answer>12</answer> 4 boxes of 4 is 16, not 12, so \\boxed{16}.", "16", C, ""),  # tags rank no higher
    ("<answer>12</answer> 4 boxes of 4 is 16, not 12, so \\boxed{16}.", "12", W, ""),
    # A line that states no value does not overrule the box before it (rlvr.verifiers.math.lines.states_value).
    ("So \\boxed{9}.\n\nI hope this answer is helpful!", "9", C, ""),
    ("So \\boxed{9}.\n\nThis answer is consistent with both equations.", "9", C, ""),
    ("So \\boxed{8}.\n\nI hope this answer is helpful!", "9", W, ""),
    # A box inside an 'Answer:' line is that line's value, not a second statement.
    ("Final Answer: $\\boxed{5}$", "5", C, ""), ("Final Answer: $\\boxed{5}$", "6", W, ""),
    # One correction is accepted; a hedge is two candidates with only connectives between them, across kinds too.
    ("The answer is 3. Wait, I added wrong: 2 + 2 is 4, so the answer is 4.", "4", C, ""),
    ("Answer: 3\n\\boxed{4}", "4", W, HEDGED), ("\\boxed{3}\nAnswer: 4", "4", W, HEDGED),
    # Declared answer spam stays wrong, across kinds (4 different declared answers > MAX_DISTINCT_ANSWERS).
    ("Answer: 1. Hmm.\n#### 2\nHmm. <answer>3</answer> Hmm. The answer is \\boxed{4}", "4", W, "answer spam"),
    ("The answer is 3. No, the answer is 4. Hmm, the answer is 5. Actually the answer is 6.", "6", W, "answer spam"),
    # Boxing each step and then the result is no spam: boxes outside declarations are steps (hedges.py); the
    # step's value is still not the answer.
    (STEPS, "32", C, ""), (STEPS, "16", W, "extracted 32"),
]


@pytest.mark.parametrize("completion, reference, outcome, detail", LAST_STATEMENT,
                         ids=[f"{i}:{c[:24]}" for i, (c, *_) in enumerate(LAST_STATEMENT)])
def test_the_last_answer_statement_is_the_answer(verifier, completion, reference, outcome, detail):
    check(verifier, completion, reference, outcome, detail)


def test_statements_merge_in_text_order():
    # The final statement's kind is the kind written last; the box in the answer line stands for the line.
    assert final_answer(CORRECTION).kind == "answer_line" and final_answer(GSM8K).kind == "hashes"
    assert final_answer("Answer: \\boxed{7}").kind == "boxed"
    # recent holds the declared answers and the final one: step boxes are not declared (catches counting them)
    assert final_answer(STEPS).recent == ("32",)
    assert final_answer("The answer is \\boxed{2}. No: the answer is \\boxed{3}.").recent == ("2", "3")


# ---------------------------------------------------------------- reasoning: every <think> block
@pytest.mark.parametrize("text, expected", [
    ("<think>a</think>b<think>c</think>d", "b\n\nd"),  # a second block after the answer is reasoning too
    ("a</think>b", "b"), ("x<think>a", "x"),  # prefilled <think>; an unclosed one runs to the end
    ("<think>\n<think>\nr</think>d", "d"),  # a <think> written twice opens one block
    ("a</think>b</think>c", "c"), ("plain", "plain"),
])
def test_outside_thinking(text, expected):
    assert outside_thinking(text) == expected


def test_strip_thinking_is_unchanged_for_tool_calls():
    # rlvr.agents.tool_calls counts positions from the last </think>: that helper keeps its meaning
    assert strip_thinking("<think>a</think>b<think>c</think>d") == "d"


@pytest.mark.parametrize("reference, outcome", [("7", C), ("3", W)])
def test_a_think_block_after_the_answer(verifier, reference, outcome):
    # Once, everything before the last </think> was reasoning, so this honest answer was 'only inside
    # <think>' (UNPARSEABLE). Catches outside_thinking reverting to strip_thinking in final_answer.
    check(verifier, "<think>3 + 4</think>\nThe answer is \\boxed{7}.\n<think>Check: 3 + 4 = 7.</think>", reference,
          outcome)


# ---------------------------------------------------------------- mixed numbers, words, dots, estimates
FORMS = [
    # mixed numbers are one value, never the whole part nor the fraction (nor 'several answers')
    ("Answer: 5 1/2", "\\frac{11}{2}", C), ("Answer: 5 1/2", "5", W), ("Answer: 5 1/2", "\\frac12", W),
    ("\\boxed{2 and 3/4}", "2.75", C), ("\\boxed{2 and 3/4}", "2", W),
    ("Answer: 5 and a half", "5.5", C), ("Answer: 5 and a half", "5", W),
    ("Answer: 3 4/3", "3", W),  # an improper fraction makes no mixed number: two numbers, a hedge
    # numbers in words
    ("Answer: five", "5", C), ("Answer: five", "6", W), ("Answer: twenty-one", "21", C),
    ("Answer: one hundred and five", "105", C), ("Answer: one hundred and five", "100", W),
    # fractions in words and plural magnitudes, never trimmed to the bare count (mode latex trimmed them)
    ("Answer: 3 fifths", "\\frac35", C), ("Answer: 3 fifths", "3", W), ("Answer: 5 tenths", "0.5", C),
    ("Answer: 5 tenths", "5", W), ("Answer: 3 dozens", "36", C), ("Answer: 3 dozens", "3", W),
    # '...' after a decimal repeats its last period; without one it is cut off, no exact value
    ("Answer: 0.333...", "\\frac13", C), ("Answer: 0.333...", "0.333", W), ("Answer: 0.1666...", "\\frac16", C),
    ("Answer: 3.14159...", "3.14159", W), ("Answer: 3.14159...", "\\pi", W),
    # an estimate is not the value
    ("Answer: ~5", "5", W), ("Answer: $\\approx 5$", "5", W),
    # thousands written with LaTeX's negative thin space and a space after it
    ("So $\\boxed{11,\\! 111,\\! 100}$ ways.", "11111100", C), ("So $\\boxed{11,\\! 111,\\! 100}$.", "11111000", W),
    # the value stated after a named object or a function's value
    ("Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", "120", C),
    ("Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", "20", W),
    ("Final Answer: The maximum number of points in the domain of $f(x)$ is 19.", "19", C),
    ("Final Answer: The maximum number of points in the domain of $f(x)$ is 19.", "18", W),
    # an 'Answer:' line ends at its sentence end when the rest states nothing (the earlier box is not read)
    ("It pays $\\boxed{255}$.\nFinal Answer: The final answer is $10,455$. I hope it is correct.", "10455", C),
    ("It pays $\\boxed{255}$.\nFinal Answer: The final answer is $10,455$. I hope it is correct.", "255", W),
    # a time of day compares as hours and minutes (math-verify reads 12/00, undefined)
    ("The meeting starts at \\boxed{12:00}.", "12:00", C), ("The meeting starts at \\boxed{1:00}.", "12:00", W),
    # decimal commas: after four ungrouped digits, or with a dollar sign after the number; '1,22' stays a list
    ("Answer: 1000,99", "1000.99", C), ("Answer: 2,74 $", "2.74", C), ("Answer: 1,22", "1.22", W),
]


@pytest.mark.parametrize("completion, reference, outcome", FORMS,
                         ids=[f"{i}:{c[:24]}" for i, (c, *_) in enumerate(FORMS)])
def test_forms(verifier, completion, reference, outcome):
    check(verifier, completion, reference, outcome)


RUNNING_TEXT = [  # no answer marker: mode strict reads none (UNPARSEABLE); the fallbacks read the last number
    ("She ran 5 1/2 miles in all.", "5.5", 1.0), ("She ran 5 1/2 miles in all.", "\\frac12", 0.0),  # mixed number
    ("She ran 5 and a half miles.", "5", 0.0),  # '5 and a half' is no 5 (no number in the fallbacks: no answer)
    ("It is 0.333...", "\\frac13", 1.0), ("It is 0.333...", "0.333", 0.0),
    ("The rope is about ~5 m long.", "5", 0.0),  # '~5' is no 5 anywhere
    ("The rope is 5 m long.", "5 \\text{ cm}", 0.0), ("The rope is 5 cm long.", "5 \\text{ cm}", 1.0),  # units
    ("The rope is $5$ m long.", "5 \\text{ cm}", 0.0), ("He paid €5.", "\\$5", 0.0), ("He paid 5 cents.", "\\$5", 0.0),
]


@pytest.mark.parametrize("completion, reference, score", RUNNING_TEXT,
                         ids=[f"{i}:{c[:24]}" for i, (c, *_) in enumerate(RUNNING_TEXT)])
def test_running_text(verifier, completion, reference, score):
    verdict = verifier.verify(completion, reference)
    assert verdict.score == (0.0 if verifier.mode == "strict" else score), verdict


@pytest.mark.parametrize("text, value", [
    ("5 1/2", Fraction(11, 2)), ("-5 1/2", Fraction(-11, 2)), ("2 and 3/4", Fraction(11, 4)),
    ("5 and a half", Fraction(11, 2)), ("five and three quarters", Fraction(23, 4)), ("3 fifths", Fraction(3, 5)),
    ("a half", Fraction(1, 2)), ("twenty-one", 21), ("two thousand three hundred", 2300), ("zero", 0),
    ("3 4/3", None), ("five three", None), ("thousand", None), ("a", None), ("3 and 4", None), ("5", None),
])
def test_words_value(text, value):
    assert words_value(text) == value


def test_cardinal_keeps_the_order_of_number_words():
    assert cardinal("one hundred and five") == 105 and cardinal("a hundred") == 100
    assert cardinal("one hundred two hundred") is None and cardinal("twenty thirty") is None


@pytest.mark.parametrize("text, value", [
    ("0.333...", Fraction(1, 3)), ("0.1666...", Fraction(1, 6)), ("0.142857142857...", Fraction(1, 7)),
    ("-0.333\\ldots", Fraction(-1, 3)), ("3.14159...", False), ("0.12...", False), ("0.5", None),
])
def test_repeating_dots(text, value):
    assert repeating_dots(text) == value  # False: cut off (no period written twice); None: no dots


# ---------------------------------------------------------------- units: the same unit or none, never converted
UNITS = [
    ("Answer: 5 m", "5 \\text{ cm}", W, "unit m where the reference has cm"), ("Answer: 5 cm", "5 \\text{ cm}", C, ""),
    ("\\boxed{5 \\text{ centimeters}}", "5\\text{ cm}", C, ""), ("\\boxed{120 \\text{ min}}", "2 \\text{ h}", W, ""),
    ("Answer: 5 cents", "\\$5", W, "unit cent"), ("Answer: 5 dollars", "\\$5", C, ""),
    ("\\boxed{\\text{\\euro}5}", "\\$5", W, "EUR"), ("\\boxed{12 \\text{ cm}}", "12 \\text{ cm}^2", W, ""),
    ("\\boxed{12 \\text{ cm}^2}", "12 \\text{ square centimeters}", C, ""),
    ("\\boxed{5 \\text{ cm}}", "5", C, ""), ("\\boxed{5}", "5 \\text{ cm}", C, ""),  # one side only: the number
    ("\\boxed{18 dollars}", "18", C, ""), ("\\boxed{18 dollars}", "19", W, ""), ("\\boxed{5 apples}", "5", C, ""),
    ("\\boxed{2 pi}", "2", W, ""),  # a counted noun never swallows pi
]


@pytest.mark.parametrize("completion, reference, outcome, detail", UNITS,
                         ids=[f"{i}:{c[:24]}" for i, (c, *_) in enumerate(UNITS)])
def test_units(verifier, completion, reference, outcome, detail):
    check(verifier, completion, reference, outcome, detail)


@pytest.mark.parametrize("written, unit", [
    ("5 cm", "cm"), ("5 Centimeters", "cm"), ("5\\text{ cm}", "cm"), ("15\\mbox{ cm}^2", "cm^2"), ("5 cm²", "cm^2"),
    ("5 sq. cm", "cm^2"), ("\\$5", "USD"), ("$5", "USD"), ("18\\$", "USD"), ("€5", "EUR"), ("45^\\circ", "deg"),
    ("45 degrees", "deg"), ("60 km/h", "km/h"), ("60 kilometers per hour", "km/h"), ("5°C", "degC"),
    ("5 M", None), ("5 apples", None), ("$10,455$", None), ("2\\pi r", None), ("5", None),
    # the unit the words after the number start with; 'KM' is km, 'M' stays no unit
    ("3 hours ago", "h"), ("5 cm long", "cm"), ("5 KM", "km"), ("5 ms", "ms"), ("125$ miles", "mi"),
])
def test_unit_of(written, unit):
    assert unit_of(written) == unit


def test_unit_problem_and_running_text():
    assert unit_problem("5 m", "5 cm") and unit_problem("5 cm", "5") is None and unit_problem("5", "5 m") is None
    text = "He paid €5 for 3 m of rope."
    assert unit_around(text, text.index("5"), text.index("5") + 1) == ("€", "")
    assert unit_around(text, text.index("3"), text.index("3") + 1) == ("", " m")


# ---------------------------------------------------------------- connectives: several values, never the last side
CONNECTIVES = ["x=3 \\\\ x=4", "x=3 \\lor x=4", "3 \\vee 4", "3 \\mid 4", "3 \\& 4", "x=3 \\wedge x=4", "3 \\land 4",
               "3 \\sim 4", "3 \\setminus 4", "3 \\quad 4", "3 \\qquad 4"]


@pytest.mark.parametrize("inner", CONNECTIVES)
def test_connectives_are_several_values(verifier, inner):
    # math-verify read each as its last side (4) or as a product/sum; catches dropping a connective from _JOINS
    check(verifier, f"\\boxed{{{inner}}}", "4", W, HEDGED)


@pytest.mark.parametrize("completion, reference, outcome", [
    ("\\boxed{3 \\quad 4}", "7", W), ("Answer: 12 3", "15", W), ("Answer: 12 3", "3", W),
    ("\\boxed{\\mathbb{R} \\setminus \\{0\\}}", "(-\\infty, 0) \\cup (0, \\infty)", C),  # between sets: one set
    ("\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", C),  # a row break
    ("\\boxed{1 000}", "1000", C),  # one number with a thousands space, not two numbers side by side
    ("\\boxed{5 \\quad \\text{cm}}", "5", C),  # spacing before a unit joins no second value
])
def test_connectives_correct_and_wrong(verifier, completion, reference, outcome):
    check(verifier, completion, reference, outcome)


def test_top_level_items_split_connectives():
    assert top_level_items("x=3 \\\\ x=4") == ["x=3", "x=4"] and top_level_items("12 3") == ["12", "3"]
    assert top_level_items("3 \\mid 4") == ["3", "4"] and top_level_items("a \\mid b") == ["a \\mid b"]
    # the rows of a cases or aligned environment are several values ('\\boxed{\\begin{cases} 3
    # \\\\ 4 \\end{cases}}' hedged 3 and 4); a matrix's rows stay one value
    assert top_level_items("\\begin{cases} 1 \\\\ 2 \\end{cases}") == ["1", "2"]
    assert top_level_items("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}") == ["\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"]
    assert top_level_items("5 1/2") == ["5 1/2"] and top_level_items("2 and 3/4") == ["2 and 3/4"]


# ---------------------------------------------------------------- lists: bare tuples, boxes on one line
@pytest.mark.parametrize("completion, reference, outcome", [
    ("So the point is \\boxed{2, 1}.", "(2, 1)", C), ("So the point is \\boxed{2, 1}.", "(1, 2)", W),  # order counts
    ("So the point is \\boxed{2, 1, 3}.", "(2, 1)", W), ("So the point is \\boxed{2, 1}.", "[2, 1]", W),
    ("The pair is \\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1, 1)}.", "(3, 3), (1, 1)", C),
    ("The pair is \\boxed{(3, 3)} \\text{ for part (a) or } \\boxed{(1, 1)}.", "(3, 3), (1, 1)", W),
])
def test_lists(verifier, completion, reference, outcome):
    check(verifier, completion, reference, outcome)


def test_reference_lists():
    assert tuple_length("(2, 1)") == 2 and tuple_length("\\left( 2, 1 \\right)") == 2 and tuple_length("(2)") == 0
    assert extract_reference("\\boxed{1} papers and \\boxed{2} bins") == "1, 2"  # boxes joined by 'and': a list
    assert extract_reference("\\boxed{1} no no no \\boxed{2}") == "2"  # nothing joins them: the last box
