"""Math verifier: answer forms that must be read and judged CORRECT, and the helpers behind them.

The attacks that must score 0 live in tests/test_math_attacks.py; the decisions in
rlvr/verifiers/math/extract.py (extraction, numbers, hedging) and rlvr/verifiers/math/worker.py (guards).
"""
from __future__ import annotations

from fractions import Fraction

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.math.extract import (
    extract_answer,
    final_answer,
    hedge_problem,
    number_readings,
    strip_thinking,
    top_level_items,
)
from rlvr.verifiers.math.forms import counted_value, is_unit, machine_rounding, value_problem
from rlvr.verifiers.math.lines import ANSWER_MARK
from rlvr.verifiers.math.numbers import numbers_match, rounded_fractions
from rlvr.verifiers.math.scan import FALLBACK_CHARS, MAX_MARKS, ascii_lower, last_marks, nth_last, tail
from rlvr.verifiers.math.verifier import MODES, MathVerifier, brace_problem, shape_problem


@pytest.fixture(scope="module", params=MODES)
def verifier(request):
    return MathVerifier(request.param, timeout_s=10)  # every form holds in every answer mode


EQUIVALENT = [
    # percent / fraction / decimal: 50% == 0.5 == 1/2, and 50% == 50 ('%' read as a unit)
    ("\\boxed{50\\%}", "0.5"), ("\\boxed{50\\%}", "\\frac{1}{2}"), ("Answer: 0.5", "50\\%"), ("Answer: 50", "50\\%"),
    ("\\boxed{12.5\\%}", "\\frac{1}{8}"), ("Answer: 1/2", "0.5"), ("Answer: 1e-3", "0.001"),
    ("\\boxed{2 \\times 10^{-3}}", "0.002"), ("Answer: 7.50", "7.5"), ("Answer: -0", "0"),
    # LaTeX spellings
    ("\\boxed{\\dfrac{1}{2}}", "0.5"), ("\\boxed{\\tfrac{3}{4}}", "0.75"), ("\\boxed{\\frac12}", "\\frac{1}{2}"),
    ("\\boxed{-\\frac{3}{4}}", "-0.75"), ("\\boxed{\\left(1, 2\\right)}", "(1,2)"), ("\\boxed{30^\\circ}", "30"),
    ("\\boxed{30^{\\circ}}", "30"), ("\\boxed{5\\text{ cm}}", "5"), ("\\boxed{\\$5}", "5"),
    ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}"), ("\\boxed{0.5\\pi}", "\\frac{\\pi}{2}"),
    ("\\boxed{1-\\frac{1}{e}}", "1 - e^{-1}"), ("\\boxed{1 - \\frac{1}{\\mathrm{e}}}", "1-\\frac{1}{e}"),
    ("Answer: $x^2+1$", "1+x^2"), ("\\boxed{\\text{(C)}}", "C"),
    # sets and intervals
    ("\\boxed{\\{2,1\\}}", "\\{1,2\\}"), ("\\boxed{\\left\\{1, 2\\right\\}}", "\\{2, 1\\}"), ("\\boxed{3, 4}", "4, 3"),
    ("\\boxed{(0,1]}", "(0,1]"),
    ("\\boxed{\\left(0, 1\\right]}", "(0,1]"), ("\\boxed{[1, 2)}", "[1,2)"), ("\\boxed{(-\\infty, 0)}", "(-\\infty,0)"),
    # equations: an assignment matches its value both ways; a true numeric identity counts
    ("\\boxed{x=2}", "2"), ("\\boxed{2}", "x=2"), ("\\boxed{2=x}", "x=2"), ("\\boxed{x = 3 + 4 = 7}", "7"),
    # tiny values that are really equal
    ("\\boxed{\\frac{1}{2^{99}}}", "2^{-99}"), ("\\boxed{10^{-20}}", "\\frac{1}{10^{20}}"),
    # where the answer is: tags, last box, reasoning skipped, prefilled <think>
    ("<answer>7</answer>", "7"), ("<think>maybe 5</think><answer>\\boxed{7}</answer>", "7"),
    ("<think>...</think>\n<answer>The answer is 7</answer>", "7"),
    ("I first got \\boxed{5}, but checking the carry again the total is \\boxed{7}", "7"),
    ("Answer: 5. Hmm, 3 + 4 is 7, not 5, so let me fix that. Answer: 7", "7"),  # one self-correction is fine
    ("<think>the answer is \\boxed{5}</think> \\boxed{7}", "7"), ("so \\boxed{5}? no.</think> Answer: 7", "7"),
    ("\\boxed{7} \\boxed{7}", "7"), ("\\boxed{\\frac12} or equivalently \\boxed{0.5}", "0.5"),
    ("\\boxed{x = 3, y = 4}", "(3, 4)"),  # named values are one answer, not alternatives
    ("the answer is 3 \\text{ or } 4", "3 or 4"),  # a reference that itself offers alternatives
    # units after spacing, whole text groups, currency after the number, magnitudes as factors
    ("\\boxed{12\\,\\text{cm}^2}", "12"), ("\\boxed{12\\;\\mathrm{cm}^{2}}", "12"), ("\\boxed{\\text{5 cm}}", "5"),
    ("\\boxed{2\\sqrt{3}\\,\\text{cm}}", "2\\sqrt{3}"),  # '\\,' is spacing, not a list comma (math-verify path)
    ("\\boxed{5\\text{ km/h}}", "5"), ("\\boxed{18\\$}", "18"), ("Answer: 18\\$", "18"),
    ("\\boxed{5 \\text{ million}}", "5000000"), ("\\boxed{3\\text{ dozen}}", "36"), ("\\boxed{5 \\text{ more}}", "5"),
    # repeating decimals, double-precision prints of fractions, a reference's decimal comma
    ("\\boxed{0.\\overline{3}}", "\\frac{1}{3}"), ("\\boxed{-0.1\\overline{6}}", "-\\frac{1}{6}"),
    ("\\boxed{(0.\\overline{3}, 1)}", "(\\frac13, 1)"),
    ("\\boxed{0.0833333333333333}", "\\frac{1}{12}"),  # 1/12 = 0.08333...: 15 digits, truncated
    ("\\boxed{0.666666666666667}", "\\frac{2}{3}"), ("Answer: -0.6666666666666666", "-2/3"),  # rounded; 16
    ("\\boxed{(0.333333333333333, 1)}", "(\\frac13, 1)"),  # in a tuple, the same rule (math-verify path)
    ("\\boxed{1.22}", "1,22"), ("\\boxed{0.125}", "0,125"), ("\\boxed{1, 22}", "1,22"),
    ("\\boxed{11,\\!111,\\!111}", "11111111"), ("Answer: −3", "-3"),
    # inequalities for intervals, lists across boxes, the value stated after the asked variable
    ("\\boxed{x > 3}", "(3, \\infty)"), ("\\boxed{1 < x \\leq 2}", "(1, 2]"), ("\\boxed{x \\ge 3}", "[3,\\infty)"),
    ("\\boxed{1, 2}", "\\boxed{1}, \\boxed{2}"), ("\\boxed{1}, \\boxed{2}", "\\boxed{1} and \\boxed{2}"),
    ("The answer: the largest $n$ is 34.", "34"), ("So the answer is $n$ = 34.", "34"),
    ("<answer>The largest $n$ is $34$.</answer>", "34"),
]


@pytest.mark.parametrize("completion, reference", EQUIVALENT)
def test_equivalent_forms_are_correct(verifier, completion, reference):
    verdict = verifier.verify(completion, reference)
    assert verdict.outcome is Outcome.CORRECT and verdict.score == 1.0, verdict


@pytest.mark.parametrize("completion, reference", [("Answer: 50", "0.5"), ("\\boxed{\\frac{1}{2}}", "50"),
                                                   ("Answer: 3.1416", "3.14"), ("\\boxed{\\pi}", "3.14"),
                                                   ("\\boxed{0.33}", "\\frac{1}{3}")])
def test_documented_non_equivalences(verifier, completion, reference):
    # 50 is not 0.5 (only a '%' sign allows both readings); a decimal reference is matched exactly, so neither
    # a longer decimal nor the exact value it rounds counts (questions that want rounding say so).
    assert verifier.verify(completion, reference).outcome is Outcome.WRONG


# ---------------------------------------------------------------- helpers
@pytest.mark.parametrize("text, expected", [
    ("<think>a</think>b", "b"), ("a</think>b", "b"), ("x<think>a", "x"), ("<think>a</think>b<think>c", "b"),
    ("<think>a</think>b<think>c</think>d", "d"), ("plain", "plain"),
])
def test_strip_thinking(text, expected):
    assert strip_thinking(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("<answer>4</answer> \\boxed{5}", "5"),  # the last statement, whatever its kind (tags rank no higher)
    ("<answer>x \\boxed{4} y</answer>", "4"), ("<answer> </answer>\\boxed{5}", "5"),
    ("\\boxed 5.", "5"), ("\\boxed{\\boxed{3}}", "3"), ("Answer: 3 Answer: 4", "4"),
    ("#### 5 #### 6", "6"), ("<think>\\boxed{1}</think>", None),
])
def test_extraction_precedence(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize("answer, readings", [
    ("50\\%", {Fraction(1, 2), 50}), ("50%", {Fraction(1, 2), 50}), ("1e-10", {Fraction(1, 10**10)}),
    ("\\dfrac{3}{4}", {Fraction(3, 4)}), ("-\\frac12", {Fraction(-1, 2)}), ("1{,}234", {1234}),
    ("45^\\circ", {45}), ("5\\text{ cm}", {5}), ("2\\mathrm{i}", set()), ("1e9999", set()), ("x", set()),
])
def test_number_readings(answer, readings):
    assert number_readings(answer) == readings


def test_list_items_respect_brackets():
    assert top_level_items("3, 4") == ["3", "4"] and top_level_items("(0,1]") == ["(0,1]"]
    assert top_level_items("1,234") == ["1,234"] and top_level_items("\\{1,2\\}, 3") == ["\\{1,2\\}", "3"]
    assert top_level_items("3 \\text{ and } 4") == ["3", "4"]


def test_hedge_rules():
    final = final_answer("\\boxed{3} \\boxed{4}")
    assert final.run == ("3", "4") and hedge_problem(final, "4").startswith("hedged")
    assert hedge_problem(final_answer("\\boxed{3}, then we add one: \\boxed{4}"), "4") is None  # prose between
    three = "Answer: 1. no. Answer: 2. no. Answer: 3"
    assert hedge_problem(final_answer(three), "3") is None  # 3 different answers: allowed (MAX 3)
    assert "answer spam" in hedge_problem(final_answer(three + ". no. Answer: 4"), "4")


def test_braces_must_balance_but_escaped_ones_are_not_groups():
    assert brace_problem("\\frac12}") and brace_problem("\\frac{1}{2") and brace_problem("}{")
    assert brace_problem("\\left\\{ x \\right.") is None and brace_problem("\\{1, 2\\}") is None
    assert extract_answer("\\boxed{\\left\\{ 1 \\right.}") == "\\left\\{ 1 \\right."


@pytest.mark.parametrize("answer, problem", [
    ("10^{10^{10}}", "exponent"), ("x^{100000}", "exponent"), ("2^{2^{20}}", "exponent"),
    ("(" * 11 + ")" * 11, "nested 11 deep"), ("123456!", "too large"), ("1e99999", "too large"),
    ("2^{10}", None), ("e^{x^2}", None), ("\\frac{1}{\\sqrt{2}}", None), ("((((1))))", None),
])
def test_shape_problem(answer, problem):
    found = shape_problem(answer)
    assert (found is None) if problem is None else (problem in found), found


# ---------------------------------------------------------------- worker guards, in-process
def test_worker_guards_overrule_math_verify():
    from rlvr.verifiers.math import worker as math_worker

    assert math_worker.check("\\frac{1}{2^{98}}", "\\frac{1}{2^{99}}")["status"] == "different"
    assert math_worker.check("\\pi", "3.14159265358979")["status"] == "different"  # decimals are exact
    not_a_value = "an equation is not a value (only 'x = value' is read as one)"
    assert math_worker.check("7", "2x+3=7") == {"status": "different", "detail": not_a_value}
    assert math_worker.check("\\frac{2}{0}", "\\frac{1}{0}")["status"] == "different"
    assert math_worker.check("1 - \\frac{1}{\\mathrm{e}}", "1") == {"status": "gold_unparseable"}  # string-only
    assert math_worker.check("(1, 2^{-99})", "(1, 2^{-98})")["status"] == "different"  # inside tuples,
    assert math_worker.check("[0, 2^{-99})", "[0, 2^{-98})")["status"] == "different"  # intervals,
    assert math_worker.check("\\{2^{-99}, 1\\}", "\\{1, 2^{-98}\\}")["status"] == "different"  # sets
    assert math_worker.check("\\{10^{500}, 1\\}", "\\{1, 10^{500}\\}") == {"status": "equal"}
    assert math_worker.check("\\frac{\\pi}{2}", "0.5\\pi") == {"status": "equal"}
    assert math_worker.check("\\{1, 2\\}", "\\{2, 1\\}") == {"status": "equal"}


# ---------------------------------------------------------------- forms that keep or change a value
@pytest.mark.parametrize("text, unit", [
    ("cm", True), (" km/h ", True), ("sq. ft.", True), ("°C", True), ("m squared", True), ("apples", True),
    ("more", True), ("m", True), (" million", False), ("dozen", False), ("k", False), ("K", False), ("M", False),
    ("(mod 5)", False), ("below zero", False), ("or more", False), ("squared", False), ("1000s", False), ("", False),
])
def test_is_unit(text, unit):
    assert is_unit(text) is unit


def test_value_problem_names_what_changes_the_value():
    assert value_problem("7 \\text{ (mod 5)}", "7") == "'(mod 5)' after a number changes its value; it is not a unit"
    assert value_problem("7 \\text{ (mod 5)}", "7 \\text{ (mod 5)}") is None  # the reference says the same
    assert value_problem("(5 \\text{ cm}, 3\\,\\text{cm}^2)", "(5, 3)") is None  # units, item by item
    assert value_problem("x \\text{ for all } x", "x") is None  # not after a number
    assert value_problem("3 \\Rightarrow 4", "4") == "an arrow ('\\\\Rightarrow') is not a value"
    assert value_problem("\\lim_{x \\to 0} f", "\\lim_{x \\to 0} f") is None


def test_machine_rounding_rule():
    # 1/12 = 0.083333...: '0.0833333333333333' has 15 significant digits (8 and fourteen 3s) and is within
    # 1e-16 (one unit of its 16th decimal) of 1/12: |0.0833333333333333 - 1/12| = 1/(3 * 10^16)
    assert machine_rounding("0.0833333333333333", Fraction(1, 12))
    assert not machine_rounding("0.083333333333333", Fraction(1, 12))  # 14 digits
    # 0.0833333333333335 - 1/12 = 2e-16 - 1/(3 * 10^16) = 5/(3 * 10^16) > 1e-16: neither rounding nor truncation
    assert not machine_rounding("0.0833333333333335", Fraction(1, 12))
    assert machine_rounding("0.0833333333333334", Fraction(1, 12))  # 2/(3 * 10^16) < 1e-16: rounded up
    # 2/3 = 0.666...: rounded up at 15 digits, 0.666666666666667 - 2/3 = 1/(3 * 10^15) < 1e-15
    assert machine_rounding("0.666666666666667", Fraction(2, 3))
    assert not machine_rounding("0.125000000000000", Fraction(1, 8))  # 1/8 terminates: exact comparison only
    assert not machine_rounding("3.14159265358979", Fraction(22, 7))  # 3.142857...: far off


@pytest.mark.parametrize("pred, gold, same", [
    ("0.25\\%", "25\\%", False), ("25\\%", "25%", True), ("25\\%", "0.25", True), ("25", "25\\%", True),
    ("1.22", "1,22", True), ("1.22", "1,234", False), ("1234", "1,234", True), ("0.125", "0,125", True),
    ("3", "3,0", None),  # '3,0' is the list {3, 0}: no decimal reading that a partial '3' would match
    ("0.0833333333333333", "\\frac{1}{12}", True), ("0.3333333333", "\\frac13", False),
    ("5 \\text{ million}", "5000000", True), ("5 million", "5", False), ("x", "5", None), ("5", "x", None),
])
def test_numbers_match(pred, gold, same):
    assert numbers_match(pred, gold) is same


def test_rounded_fractions_only_where_the_reference_has_that_fraction():
    gold = "\\begin{pmatrix} \\frac13 & -\\frac{1}{12} \\\\ 2/3 & 1 \\end{pmatrix}"
    pred = "\\begin{pmatrix} 0.333333333333333 & -0.0833333333333333 \\\\ 0.67 & 1.0 \\end{pmatrix}"
    assert rounded_fractions(pred, gold) == \
        "\\begin{pmatrix} \\frac{1}{3} & -\\frac{1}{12} \\\\ 0.67 & 1.0 \\end{pmatrix}"
    assert rounded_fractions(pred, "(1, 2)") == pred  # no fraction in the reference: nothing to round to


def test_worker_reads_chains_and_inequalities():
    from rlvr.verifiers.math import worker as math_worker

    assert math_worker.check("4", "x = 3 = 4") == {"status": "different", "detail": "a false equation is not a value"}
    assert math_worker.check("7", "x = 3 + 4 = 7") == {"status": "equal"}  # every link holds
    assert math_worker.check("(3, \\infty)", "x > 3") == {"status": "equal"}
    assert math_worker.check("(-\\infty, -3) \\cup (3, \\infty)", "x^2 > 9") == {"status": "equal"}
    assert math_worker.check("(3, \\infty)", "x^2 > 9")["status"] == "different"
    assert math_worker.check("(3, \\infty)", "x > y")["status"] == "different"  # two unknowns: no set


# ---------------------------------------------------------------- bounded scans
def test_markers_are_found_from_the_end():
    marks = last_marks("A: answer: 1 ANSWER: 2 Answer is 3", (ANSWER_MARK,), ("answer",),
                       ascii_lower("A: answer: 1 ANSWER: 2 Answer is 3"))
    assert [m.group() for m in marks] == ["answer:", "ANSWER:", "Answer is "]
    assert extract_answer("##### 72") == "72"  # in a run of '#', the last four are the marker
    assert extract_answer("Answer: 7\n" + "answer " * MAX_MARKS) is None  # only the last MAX_MARKS are read
    assert extract_answer("Answer: 7\n" + "answer " * (MAX_MARKS - 1)) == "7"
    assert nth_last("a.a.a", "a", 2) == 2 and nth_last("a.a", "a", 5) == 0


def test_the_fallbacks_read_the_last_paragraphs():
    assert tail("x" * 10, 20) == "x" * 10
    text = "a" * 100 + "\n\nkept\nend"
    assert tail(text, 12) == "kept\nend" and tail("ab\ncd ef", 5) == "cd ef" and tail("ab cdefgh", 7) == "cdefgh"
    assert tail("abcdefghij", 6) == ""  # no line or word start in the window's first half: no prose, no answer
    far = "So the total is 12." + " and so on" * (FALLBACK_CHARS // 10 + 1)
    assert extract_answer(far, "last_number") is None and extract_answer(far, "latex") is None
    near = "x " * 500_000 + "\n\nSo the total is $12$ and so on."
    assert extract_answer(near, "last_number") == "12" and extract_answer(near, "latex") == "12"


# ---------------------------------------------------------------- a plain noun after the number
STORY_NOUNS = ("apples", "pens", "birds", "stickers", "flowers", "dollars", "cookies", "muffins")  # the calculator's


@pytest.mark.parametrize("noun", STORY_NOUNS)
@pytest.mark.parametrize("form", ["Answer: 17 {}", "Answer: 17 {}.", "<answer>17 {}</answer>", "Answer: 17 {} left",
                                  "Answer: 17 {} in a jar", "Answer: 17 {} to each group", "Answer: 17 {}!",
                                  "Answer: **17** {}", "Answer: 17 {}, in total", "Answer: 17\xa0{}"])
def test_strict_mode_reads_the_number_before_a_plain_noun(noun, form):
    """The agent tasks' honest answers: strict mode once scored 'Answer: 17 birds' WRONG on 7 of these
    8 nouns (math-verify took only 'apples' for a unit). Catches counted_value dropped from marked_lines or from
    _answer_tags, and a _COUNTED that does not take the noun."""
    assert MathVerifier("strict").verify(form.format(noun), "17").outcome is Outcome.CORRECT
    assert MathVerifier("strict").verify(form.format(noun), "18").outcome is Outcome.WRONG  # the number is read


@pytest.mark.parametrize("answer", [
    "Answer: 17 million", "Answer: 17 dozen", "Answer: 17 birds or more", "Answer: 17 birds or 18",
    "Answer: 17 squared", "Answer: 17 x", "Answer: about 17 birds", "Answer: 17 hundred birds",
    # the noun rule's edges: plurals of magnitudes, hedges, bounds, multipliers, number words
    "Answer: 17 thousands", "Answer: 17 millions of birds", "Answer: 17 dozens", "Answer: 17 tens",
    "Answer: 17 maybe", "Answer: 17 birds probably", "Answer: 17 ish", "Answer: 17 maximum", "Answer: 17 tops",
    "Answer: 17 point five", "Answer: 17 less one", "Answer: 17 doubled", "Answer: 17 fold", "Answer: 17 sixths",
    "Answer: 17 grand", "Answer: 17 birds upwards", "<answer>17 thousands</answer>",
])
def test_strict_mode_still_refuses_words_that_change_the_value(answer):
    """The earlier rules hold next to the noun rule: a magnitude, a bound, a hedge, a power or a lone letter (a
    variable) after the number is not 17. Catches counted_value without its is_unit check (every word a noun) and a
    _COUNTED that takes one-letter words."""
    assert MathVerifier("strict").verify(answer, "17").outcome is not Outcome.CORRECT


def test_counted_value_by_hand():
    """The number as written, for the exact comparison that follows ('1,234' is 1234 there)."""
    assert counted_value("17 birds") == "17" and counted_value("1,234 dollars") == "1,234"
    assert counted_value("3/4 cups") == "3/4" and counted_value("-2.5 degrees") == "-2.5"
    assert counted_value("17") is None and counted_value("17 million") is None and counted_value("17 b") is None
    assert counted_value("17 birds and 3 cats") is None  # a digit among the words: not a count of one thing
    assert counted_value("17 thousands") is None  # a plural is read as its singular, a magnitude
    # a count with a magnitude still reads as its value where the reference is that value
    assert MathVerifier("strict").verify("Answer: 17 thousands", "17000").outcome is Outcome.CORRECT
