"""Math verifier, mode latex: honest answers in the forms models and datasets write score 1,
wrong ones in the same forms score 0; last_number never reads a number inside a larger expression; the
answer-mode default and config; the labelled corpus (bench/data/math_corpus.jsonl).

Decisions: rlvr/verifiers/math/latex.py (extraction), verifiers/math/numbers.py (numbers, the expression guard),
verifiers/math/extract.py (precedence, hedges, lists). The attack suite (tests/test_math_attacks.py) runs in every mode.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from rlvr.config.run import AnswerMode, ConfigError, TaskConfig, load_config
from rlvr.types import Outcome
from rlvr.verifiers import build_verifiers, math_answer_mode
from rlvr.verifiers.math.extract import extract_answer, final_answer
from rlvr.verifiers.math.latex import last_side, latex_envs, refine, trim_prose
from rlvr.verifiers.math.numbers import last_number
from rlvr.verifiers.math.verifier import MODES, MathVerifier

ROOT = Path(__file__).resolve().parents[1]
C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE


@pytest.fixture(scope="module")
def latex():
    return MathVerifier("latex", timeout_s=10)


# Each form from the issue, a correct and a wrong variant (and the strict outcome where strict misses it).
FORMS = [
    # a final LaTeX environment
    ("Only one of the six faces is a four, so the chance is $\\frac{1}{6}$.", "\\frac{1}{6}", C),
    ("Only one of the six faces is a four, so the chance is $\\frac{1}{4}$.", "\\frac{1}{6}", W),
    ("Squaring both sides gives \\( 16 \\)", "16", C), ("Squaring both sides gives \\( 4 \\)", "16", W),
    ("The sum telescopes:\n\\[ 10 \\]", "10", C), ("The sum telescopes:\n\\[ 11 \\]", "10", W),
    ("Therefore\n$$\\frac{\\sqrt{3}}{2}$$", "\\frac{\\sqrt{3}}{2}", C),
    ("Therefore\n$$\\frac{1}{2}$$", "\\frac{\\sqrt{3}}{2}", W),
    # 'The final answer is ...' with trailing prose
    ("The final answer is $y = -4$. I hope it is correct.", "-4", C),
    ("The final answer is $y = 4$. I hope it is correct.", "-4", W),
    ("The final answer is $\\frac{7}{9}$ of the tank.", "\\frac{7}{9}", C),
    ("The final answer is $\\frac{9}{7}$ of the tank.", "\\frac{7}{9}", W),
    # thousands, leading dot, currency, decimal comma
    ("The stadium holds 2,500.75 tonnes of steel.", "2500.75", C), ("It holds 2,500.75 tonnes.", "2500.57", W),
    ("In total there are 3 000 tickets.", "3000", C), ("In total there are 3 000 tickets.", "300", W),
    ("The chance of a match is .25", "\\frac{1}{4}", C), ("The chance of a match is .52", "\\frac{1}{4}", W),
    ("The bill came to $2,045.10 after tax.", "2045.1", C), ("The bill came to $2,045.10 after tax.", "2045", W),
    ("Die Fahrkarte kostet 3,95 €.", "3.95", C), ("Die Fahrkarte kostet 3,59 €.", "3.95", W),
    # fraction spellings, roots, units, percent
    ("The ratio is $\\frac25$.", "0.4", C), ("The ratio is $\\frac52$.", "0.4", W),
    ("Hence $\\dfrac{3}{8}$.", "0.375", C), ("Hence $\\tfrac{3}{8}$.", "0.375", C),
    ("Hence $\\cfrac{3}{8}$.", "0.375", C),
    ("Hence $\\dfrac{8}{3}$.", "0.375", W), ("Hence $\\cfrac{5}{8}$.", "0.375", W),
    ("The diagonal is $\\sqrt5$.", "\\sqrt{5}", C), ("The diagonal is $\\sqrt6$.", "\\sqrt{5}", W),
    ("The pipe is $\\frac{2}{5} \\text{meters}$ long.", "\\frac{2}{5}", C),
    ("The pipe is $\\frac{3}{5} \\text{meters}$ long.", "\\frac{2}{5}", W),
    ("Prices rose by 12 percent.", "12\\%", C), ("Prices rose by 21 percent.", "12\\%", W),
    ("Prices rose by 12 %.", "12\\%", C), ("Prices rose by 13 %.", "12\\%", W),
    # intervals, sets, matrices
    ("So $f$ is increasing on $(1, 4]$.", "(1,4]", C), ("So $f$ is increasing on $[1, 4]$.", "(1,4]", W),
    ("The solution set is $\\{-1, 6\\}$.", "\\{6,-1\\}", C), ("The solution set is $\\{1, 6\\}$.", "\\{6,-1\\}", W),
    ("$$\\begin{pmatrix} 0 & 1 \\\\ 1 & 0 \\end{pmatrix}$$", "\\begin{bmatrix} 0 & 1 \\\\ 1 & 0 \\end{bmatrix}", C),
    ("$$\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}$$", "\\begin{bmatrix} 0 & 1 \\\\ 1 & 0 \\end{bmatrix}", W),
    ("$\\left(\\begin{array}{cc} 2 & 0 \\\\ 0 & 2 \\end{array}\\right)$",
     "\\begin{pmatrix} 2 & 0 \\\\ 0 & 2 \\end{pmatrix}", C),
    ("$\\left(\\begin{array}{cc} 2 & 0 \\\\ 0 & 3 \\end{array}\\right)$",
     "\\begin{pmatrix} 2 & 0 \\\\ 0 & 2 \\end{pmatrix}", W),
    # relations
    ("It holds for all $t \\geq 3$.", "t >= 3", C), ("It holds for all $t > 3$.", "t >= 3", W),
    ("We need $7 \\leq n$.", "n \\geq 7", C), ("We need $7 \\geq n$.", "n \\geq 7", W),
    ("Thus $k = 13$.", "13", C), ("Thus $k = 31$.", "13", W), ("Thus $k \\geq 13$.", "13", W),
    ("So $3k + 1 = 13$.", "13", W),  # an equation in an unknown is not a value (guard 3)
    ("Finally $g(g(1)) = 9$.", "9", C),  # a function's value names it, as 'x = 9' does
    # several answers where the reference lists several; a hedge for one answer stays wrong
    ("The zeros are \\boxed{-1}, \\boxed{4}", "\\{-1, 4\\}", C),
    ("The zeros are \\boxed{-1}, \\boxed{3}", "\\{-1, 4\\}", W),
    ("So $t = \\boxed{2}$ and $t = \\boxed{7}$.", "2, 7", C), ("The zeros are \\boxed{-1}, \\boxed{4}", "4", W),
    ("Either \\boxed{-1} or \\boxed{4}.", "\\{-1, 4\\}", W), ("The zeros are $x = -1$ and $x = 4$.", "{-1, 4}", C),
    # a formula named right before it ('... is $-\\frac{b}{a} = -5$') states the number after '='
    ("The sum of the roots is $-\\frac{b}{a} = -5$.", "-5", C),
    ("The sum of the roots is $-\\frac{b}{a} = 5$.", "-5", W),
    ("So the number of diagonals is \\(\\frac{n(n-3)}{2} = 20\\).", "20", C),
    ("The equation is $2x + 3 = 7$.", "7", W), ("The value is $5 = 7$.", "7", W),  # an equation; a false identity
    # signs, magnitudes and thousands in running text; the value stated after the asked variable
    ("The temperature is \u22123.", "-3", C), ("The temperature is \u2013 3.", "-3", U),
    ("The population is $1\\,250\\,000$.", "1250000", C), ("So there are 11,\\!111,\\!111 ways.", "11111111", C),
    ("The city has 5 million people.", "5000000", U), ("It was 5 below zero.", "-5", U),
    ("The largest $n$ is 34.", "34", C), ("The final answer is: the largest $n$ is 34.", "34", C),
    ("The final answer is: the largest $n$ is 35.", "34", W), ("Hence $0.\\overline{6}$.", "\\frac23", C),
]


@pytest.mark.parametrize("completion, reference, outcome", FORMS,
                         ids=[f"{i}:{c[:28]}" for i, (c, *_) in enumerate(FORMS)])
def test_forms(latex, completion, reference, outcome):
    verdict = latex.verify(completion, reference)
    assert verdict.outcome is outcome and verdict.score == float(outcome is C), verdict


HEDGES = [  # candidates for one answer, in latex mode's new places: all WRONG
    ("So it is $6$ or $8$.", "8"), ("The answer is $6$, or maybe $8$.", "8"), ("<answer>$6$ or $8$</answer>", "8"),
    ("We get $6$, $7$, $8$.", "8"), ("Either 6 or 8.", "8"), ("Answer: 6 or 8 apples", "8"),
    ("$x = \\boxed{6}$ or $x = \\boxed{8}$", "8"),  # the variable named again does not break the run
    (", ".join(f"${i}$" for i in range(40)), "39"),  # a run of environments is spam
]


@pytest.mark.parametrize("completion, reference", HEDGES)
def test_hedges_stay_wrong(latex, completion, reference):
    verdict = latex.verify(completion, reference)
    assert verdict.outcome is W and "hedged" in verdict.detail, verdict


@pytest.mark.parametrize("completion, reference, outcome, detail", [
    ("<think>so it is $12$</think> I am unsure.", "12", U, "only inside <think>"),
    ("<think>It is 12.", "12", U, "only inside <think>"),
    ("<think>maybe $11$</think> Multiplying out, the count is $12$.", "12", C, ""),
    ("I cannot solve this.", "12", U, "no final answer"),
    ("\\boxed{\\frac{1}{2}", "\\frac{1}{2}", U, ""),  # an unclosed box is not rescued by the fallback
    ("#### Step 1: add\nThen 5 + 7 gives $12$.", "12", C, ""),  # a markdown heading is no GSM8K marker
    ("She buys 4 packs of 3, so 12 in all; then 2 friends join.", "12", W, ""),  # the last number is read
    ("Using $x = 3$ we get the area as 12 cm^2.", "12", U, "no final answer"),  # 2 is an exponent: no guess
])
def test_where_the_answer_is(latex, completion, reference, outcome, detail):
    verdict = latex.verify(completion, reference)
    assert verdict.outcome is outcome and detail in verdict.detail, verdict


@pytest.mark.parametrize("text, expected", [
    ("pick \\( \\frac{1}{2} \\) then $3$", ["\\frac{1}{2}", "3"]), ("$5 and $10 total", []), ("$x$ and\n$y", ["x"]),
    ("\\$5 and \\$6", []), ("$28$\\% of them", ["28\\%"]), ("\\\\[2pt] $1$", ["1"]), ("$$a\nb$$", ["a\nb"]),
])
def test_latex_environments(text, expected):
    assert [span.text for span in latex_envs(text)] == expected


@pytest.mark.parametrize("region, expected", [
    ("$3$ or $4$", "3 or 4"), ("$1$, $2$ and $3$", "1, 2, 3"), ("$x = 2$. I hope it is correct.", "x = 2"),
    ("42 apples.", "42"), ("The total is 1,234 dollars", "1,234"), ("minus 5", "minus 5"), ("2 million", "2 million"),
    ("at least 5", "at least 5"), ("5 or more", "5 or more"), ("Tuesday", "Tuesday"), ("x = 4", "x = 4"),
    ("about 5", "about 5"), ("roughly 3.14 meters", "roughly 3.14"), ("exactly 12 eggs", "12"),
])
def test_refine_answer_lines(region, expected):
    assert refine(region) == expected
    assert trim_prose("no digits here") == "no digits here"


@pytest.mark.parametrize("answer, expected", [
    ("f(f(2)) = 26", "26"), ("h(0) = \\frac{1}{2}", "\\frac{1}{2}"), ("2x + 3 = 7", "2x + 3 = 7"),
    ("5 = 7", "5 = 7"), ("x = 3", "x = 3"), ("f(x) = 26", "f(x) = 26"), ("f(2) = x", "f(2) = x"),
])
def test_last_side(answer, expected):
    assert last_side(answer) == expected


# ---------------------------------------------------------------- last_number: no number inside an expression
@pytest.mark.parametrize("text", [
    "$\\frac{1+\\sqrt{5}}{2}$", "\\frac{3}{2}", "\\frac32", "it is $\\sqrt{2}$", "so 3\\sqrt2", "2^{10}", "x^2",
    "e^{-2}", "the range [0, 2)", "on (1, 2]", "\\{1, 2\\}", "\\pi - 2", "x + 2", "x \\geq 2", "f(2)", "2\\pi",
    "$\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}$", "\\left( 1, 2 \\right)", "\\log_2", "H2",
])
def test_last_number_refuses_a_number_inside_an_expression(text):
    assert last_number(text) is None and extract_answer(text, "last_number") is None


@pytest.mark.parametrize("text, expected", [
    ("it is 5", "5"), ("it drops to -12", "-12"), ("from 3-5", "5"), ("turn by 30^\\circ", "30"),
    ("**$180**.", "180"), ("5 \\text{ cm}", "5"), ("option (2)", "2"), ("$x = 2$", "2"), ("1 000 seats", "1 000"),
    ("a rise of 50%", "50%"), ("3 * 4 = 12", "12"), ("2,74 € each", "2,74 €"),
])
def test_last_number_still_reads_plain_numbers(text, expected):
    assert last_number(text) == expected


@pytest.mark.parametrize("completion, reference", [
    ("$\\frac{1+\\sqrt{5}}{2}$", "2"), ("$\\frac{1+\\sqrt{5}}{2}$", "5"), ("so $2^{10}$", "10"), ("x in [0, 2)", "2"),
    ("$\\sqrt{7}$", "7"), ("$\\pi - 3$", "3"),
    # a sign or a word that changes the number, outside LaTeX
    ("The temperature is \u22123.", "3"), ("The temperature is \u20133.", "3"), ("It fell to \u2212 3.", "3"),
    ("The city has 5 million people.", "5"), ("The prize is 5k.", "5"), ("It was 5 below zero.", "5"),
    ("The answer is $5 \\text{ million}$.", "5"), ("so 7 \\text{ (mod 5)}", "7"), ("It is 5 squared.", "5"),
])
@pytest.mark.parametrize("mode", MODES)
def test_no_mode_scores_the_number_inside_an_expression(mode, completion, reference):
    verdict = MathVerifier(mode, timeout_s=10).verify(completion, reference)
    assert verdict.score == 0.0, verdict


# ---------------------------------------------------------------- config
def test_answer_mode_defaults_per_task_and_an_explicit_setting_wins():
    assert math_answer_mode(TaskConfig()) == "strict" and TaskConfig().answer_mode is None
    assert math_answer_mode(TaskConfig(name="qa", path="d.jsonl")) == "latex"
    assert math_answer_mode(TaskConfig(name="qa", path="d.jsonl", answer_mode="strict")) == "strict"
    assert math_answer_mode(TaskConfig(answer_mode="latex")) == "latex"
    assert math_answer_mode(TaskConfig(answer_mode="last_number")) == "last_number"
    assert build_verifiers(TaskConfig(name="qa", path="d.jsonl"))["math"].mode == "latex"
    assert build_verifiers(TaskConfig())["math"].mode == "strict"
    assert set(get_args(AnswerMode)) == set(MODES)  # the config's choices are the verifier's modes


def test_a_bad_answer_mode_is_one_clear_error():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["task.answer_mode=latexx"])
    assert str(err.value).count("\n") == 0 and "'strict', 'last_number' or 'latex'" in str(err.value)
    with pytest.raises(ValueError, match="'strict', 'last_number', 'latex'"):
        MathVerifier("boxed")


def test_final_answer_kinds_in_latex_mode():
    assert final_answer("so $4$", "latex").kind == "latex" and final_answer("\\boxed{4} $5$", "latex").kind == "boxed"
    assert final_answer("Answer: $4$ or $5$", "latex").text == "4 or 5"  # the line's first environments, chained
    # a digit after them is a second value, so the line is read whole, never its first value
    assert final_answer("Answer: $4$ then $5$", "latex").text == "4$ then $5"
    assert final_answer("so $4$", "strict") is None


# ---------------------------------------------------------------- the labelled corpus
CORPUS = ROOT / "bench" / "data" / "math_corpus.jsonl"


def test_corpus_is_well_formed():
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 300
    assert all(set(row) == {"completion", "reference", "label", "form"} for row in rows)
    assert all(isinstance(row["label"], bool) and isinstance(row["completion"], str) for row in rows)
    forms = {row["form"] for row in rows}
    assert len(forms) >= 45  # 17 classes were added to the first 33
    for form in forms:  # every class has a correct and a wrong variant
        assert {row["label"] for row in rows if row["form"] == form} == {True, False}, form


def test_latex_mode_agrees_with_the_corpus_labels():
    # ~2 s: every row through mode latex; bench/math_corpus.py prints all modes and plain math-verify
    sys.path.insert(0, str(ROOT / "bench"))
    import math_corpus

    rows = math_corpus.load(CORPUS)
    result = math_corpus.score("latex", math_corpus.rlvr_judge("latex"), rows)
    assert result.agreement >= 0.99 and result.false_positives == 0, result.disagreements


def test_bench_script_runs():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "math_corpus.py")], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "mode latex" in out.stdout and "plain math-verify" in out.stdout
