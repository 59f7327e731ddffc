"""Adversarial forms: what stands around the final answer, and forms that were misread.

Each class has a wrong variant (the adversarial completion, paid before) and an honest variant that still scores.
Decisions: rlvr/verifiers/math/around.py (the extent of a line's value, retractions and hedges after the answer, a
box's neighbours), prose.py (words before and after a number), lines.py (which lines state a value), hedges.py
(connectives inside an answer), units.py, words.py. Corpus rows with the same forms: bench/data/math_corpus.jsonl.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.extract import extract_reference
from rlvr.verifiers.math.verifier import MODES, MathVerifier, MathVerifyWorker

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
HEDGED = "hedged: several answers"
ALL, S, N, L = MODES, ("strict",), ("last_number",), ("latex",)


# ---------------------------------------------------------------- A1-A5: the value is the first clause; what follows
AROUND = [
    # A1: a later sentence on the answer's line is not the answer; another value there makes it a hedge
    ("The final answer is 18. She has 20 dollars left.", "20", W, HEDGED, ALL),
    ("The final answer is 18. She has 20 dollars left.", "18", W, HEDGED, ALL),  # ambiguous: WRONG either way
    ("Answer: 18. Then 20 dollars remain.", "20", W, HEDGED, ALL),
    ("The final answer is 18. I hope it is correct.", "18", C, "", ALL),
    ("Answer: 12. Each box holds 3 \\times 4 = 12.", "12", C, "", ALL),  # arithmetic explains, it offers no value
    ("The answer is 5, not 6.", "5", C, "", ALL), ("The answer is 5, not 6.", "6", W, "", ALL),  # 6 is rejected
    ("The final answer is 12. <|im_start|>user", "12", C, "", ALL),  # a sentence end before a tag
    # C: an explanation after the first value is no second candidate
    ("Answer: 34. This is because the sum of 12 and 22 is 34.", "34", C, "", ALL),
    ("The answer is 34 because 12 + 22 = 34.", "34", C, "", ALL),
    ("The answer is 34, since 12 + 22 = 34.", "34", C, "", ALL),
    ("The answer is 34, since 12 + 22 = 34.", "12", W, "expected 12", ALL),
    ("So the answer is 34 (12 + 22).", "34", C, "", ALL), ("Answer: 5 (five)", "5", C, "", ALL),
    ("Answer: 5 (mod 7)", "5", W, "", ALL),  # a parenthesis that does not restate the value stays
    ("Therefore, the answer is 34 dollars, as computed in step 2.", "34", C, "", ALL),
    # A2: a later answer statement that starts with a word overrules an earlier box
    ("First attempt: \\boxed{3}.\n\nThe answer is therefore 4.", "3", W, "extracted 4", ALL),
    ("First attempt: \\boxed{3}.\n\nThe answer is therefore 4.", "4", C, "", ALL),
    ("\\boxed{3}\n\nFinal answer: total = 4", "3", W, "", ALL),
    ("\\boxed{3}\n\nFinal answer: It's 4.", "4", C, "", ALL),
    ("\\boxed{3}\n\nThe answer is clearly 4.", "3", W, "", ALL),
    ("So the sum is \\boxed{3}.\n\nFinal answer: the total is 4.", "4", C, "", ALL),
    ("Final answer: there are 4 apples.", "4", C, "", ALL), ("**Final Answer**: 5", "5", C, "", ALL),
    ("So \\boxed{9}.\n\nThis answer is correct because 4 + 5 = 9.", "9", C, "", ALL),  # a judgement states nothing
    ("\\boxed{3}\n\nThe answer is in 5 days.", "3", W, "", ALL),  # a later statement with a digit overrules it
    # A3: the value after a named subject, only when nothing after it may be another value
    ("Answer: the largest $n$ is 34 when $k$ = 5", "5", W, "", ALL),
    ("Answer: the largest $n$ is 34 when $k$ = 5", "34", W, "", ALL),
    ("Answer: $f(x)$ is 19 for $x$ = 2", "2", W, "", ALL),
    ("Answer: $3$ is what I first got, but really it's 4.", "3", W, "", ALL),
    ("Answer: $n$ is 34", "34", C, "", ALL), ("Answer: the largest $n$ was 34", "34", C, "", ALL),
    # A4: a box is its content only when nothing next to it changes it
    # the correction states 4: the last answer statement (tests/test_math_withdrawn.py)
    ("Answer: \\boxed{3} is wrong, the correct value is 4", "3", W, "extracted 4", ALL),
    ("Final Answer: -\\boxed{3}", "3", W, "part of an expression", ALL),
    ("Final Answer: \\boxed{3}^2", "3", W, "larger value", ALL),
    ("Final Answer: \\boxed{3} thousand", "3", W, "larger value", ALL),
    ("The population is \\boxed{5} million.", "5", W, "larger value", ALL),
    ("The answer is \\boxed{2}\\pi.", "2", W, "larger value", ALL),
    ("The answer is twice \\boxed{5}.", "5", W, "before the box", ALL),
    ("The population is \\boxed{5}\\,\\text{million}.", "5", W, "larger value", ALL),  # spacing before the word
    ("The population is \\boxed{5}~million.", "5", W, "larger value", ALL),
    ("The population is <answer>5</answer> million.", "5", W, "larger value", ALL),
    ("So $x < \\boxed{5}$.", "5", W, "expression", ALL), ("So $x \\leq \\boxed{5}$.", "5", W, "expression", ALL),
    ("So \\boxed{5} < x.", "5", W, "larger value", ALL), ("So $x = \\boxed{5}$.", "5", C, "", ALL),  # a bound, a value
    ("Final Answer: \\boxed{-3}", "-3", C, "", ALL), ("- \\boxed{7}", "7", C, "", ALL),  # a bullet is no sign
    ("The answer is \\boxed{50}\\%.", "50\\%", C, "", ALL), ("So it is $\\boxed{28}$ pct.", "28\\%", C, "", ALL),
    ("$129^{34} \\equiv \\boxed{9} \\pmod{11}$.", "9", C, "", ALL),  # a residue
    ("The answer is \\boxed{5} cm.", "5 m", W, "unit cm", ALL),
    # A5: a retraction after the final answer
    ("So \\boxed{5}. Hmm, actually the answer isn't 5.", "5", U, "retracted", ALL),
    ("The answer isn't 5.", "5", U, "", ALL),
    ("So we get $3$. Hmm, let me double check: no, that is wrong.", "3", U, "retracted", N + L),
    ("So we get $3$. Let me double check: 1 + 2 = 3. Yes.", "3", C, "", N + L),
    ("So \\boxed{5}. Hmm, let me double check: 2 + 3 = 5, right.", "5", C, "", ALL),
]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail", cases(AROUND))
def test_what_stands_around_the_answer(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


# ---------------------------------------------------------------- A6: hedges the verifier did not see
HEDGES = [
    ("<answer>\\boxed{3} or \\boxed{4}</answer>", "4", W, HEDGED, ALL),
    ("<answer>\\boxed{3} \\boxed{4}</answer>", "4", W, HEDGED, ALL),
    ("<answer>Answer: 3\nAnswer: 4</answer>", "4", W, HEDGED, ALL),
    ("<answer>\\boxed{3} and \\boxed{4}</answer>", "\\{3, 4\\}", C, "", ALL),
    ("\\boxed{\\{1,2\\}} or \\boxed{\\{1,3\\}}", "\\{1,3\\}", W, HEDGED, ALL),
    ("\\boxed{1, 2} or \\boxed{1, 3}", "1, 3", W, HEDGED, ALL),
    ("The answer is 1, 2. Or the answer is 1, 3.", "1, 3", W, HEDGED, ALL),
    ("\\boxed{1, 3}", "1, 3", C, "", ALL),
    ("Answer: 3\nor 4", "3", W, HEDGED, ALL), ("Answer: 3\n(or possibly 4)", "3", W, HEDGED, ALL),
    ("#### 3\nor 4", "3", W, HEDGED, ALL), ("\\boxed{3}\nor maybe 4, I am not sure.", "3", W, HEDGED, ALL),
    ("\\boxed{3}, though 4 is also possible.", "3", W, HEDGED, ALL),
    ("\\boxed{3}. 4 could work too.", "3", W, HEDGED, ALL),
    ("Answer: 12\n\nExplanation: 3 boxes of 4 eggs make 12 eggs, or 1 dozen.", "12", C, "", ALL),  # restated
    ("The answer is 3<think>\n</think> or 4", "3", W, HEDGED, ALL),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}, or approximately 0.866.", "\\frac{\\sqrt{3}}{2}", C, "", ALL),
    ("\\boxed{3} otherwise \\boxed{4}", "4", W, HEDGED, ALL),
    ("\\boxed{3} (if n is even), \\boxed{4} (if n is odd)", "4", W, HEDGED, ALL),
    ("\\boxed{3}. If we count the endpoints, \\boxed{4}.", "4", W, HEDGED, ALL),
    ("\\boxed{3}. Wait, if we count the endpoints, the answer is \\boxed{4}.", "4", C, "", ALL),  # a correction
    ("\\boxed{3} vs \\boxed{4}", "4", W, HEDGED, ALL), ("\\boxed{3} -> \\boxed{4}", "4", W, HEDGED, ALL),
    ("\\boxed{3} alternatively \\boxed{4}", "4", W, HEDGED, ALL),
    ("\\boxed{3}" + " " * 40 + "\\boxed{4}", "4", W, HEDGED, ALL),  # spaces alone join them, up to 200
    ("It is 3 or 4.", "4", W, HEDGED, N), ("It is 3, alternatively 4.", "4", W, HEDGED, N),
    ("It could be 3, but 5 is more likely.", "5", W, HEDGED, N + L), ("So we get 12 3.", "3", W, HEDGED, N),
    ("So we get 3 4/3.", "4/3", W, HEDGED, N), ("Between 3 and 4.", "4", W, HEDGED, N),
    ("The ratio is 3 to 4.", "4", W, HEDGED, N + L), ("The sum of 3 and 4 is 7.", "7", C, "", N + L),
    ("So the sum becomes $-\\frac{b}{a} = -5$", "-5", C, "", L),
]
BOXED = [r"3 \hspace{1cm} 4", r"3 \enspace 4", r"3 \> 4", r"3 | 4", r"3 \vert 4", r"3 \parallel 4", r"3 \cup 4",
         r"3 \cr 4", r"\begin{cases} 3 \\ 4 \end{cases}", r"\begin{aligned} x&=3 \\ x&=4 \end{aligned}", r"3 \dots 4",
         r"3~4"]
HEDGES += [(f"The answer is $\\boxed{{{inside}}}$.", "4", W, HEDGED, ALL) for inside in BOXED]
HEDGES += [("The answer is $\\boxed{[0, 1] \\cup [2, 3]}$.", "[0,1] \\cup [2,3]", C, "", ALL),
           ("$\\boxed{\\begin{pmatrix} 3 \\\\ 4 \\end{pmatrix}}$", "\\begin{pmatrix} 3 \\\\ 4 \\end{pmatrix}", C, "",
            ALL)]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail", cases(HEDGES))
def test_hedges_the_red_team_found(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


def test_hedge_words_between_boxes_join_no_reference_list():
    assert extract_reference("\\boxed{1}, or perhaps \\boxed{2}") == "2"
    assert extract_reference("\\boxed{1}, and \\boxed{2}") == "1, 2"


# ---------------------------------------------------------------- A7-A8, C: words and units around a number
WORDS = [
    *[(f"Answer: {text}", ref, W, "", modes) for text, ref, modes in [
        ("5 tens", "5", ALL), ("5 grand", "5", ALL), ("5 lakh", "5", ALL), ("5 score", "5", ALL),
        ("the reciprocal of 5", "5", ALL), ("twice 5", "5", ALL), ("the square of 5", "5", ALL),
        ("the opposite of 5", "5", ALL), ("upwards of 34", "34", ALL), ("just shy of 34", "34", ALL),
        ("34 minimum", "34", ALL), ("probably 34", "34", ALL), ("$n$ is 5 tens", "5", ALL),
        ("$n$ is likely 34", "34", ALL), ("5 times itself", "5", ALL), ("5 to the second", "5", ALL),
        ("5 cm long", "5 m", ALL), ("5 KM", "5 m", ALL), ("5 ms", "5 s", ALL), ("5 ms", "5 m", ALL),
        ("5 decades", "5 years", ALL), ("5 rupees", "\\$5", ALL), ("5 seconds", "5 min", ALL),
        ("5 cm³", "5 \\text{ cm}^2", ALL), ("5 cm³", "5 cm", ALL), ("5 furlongs", "5 m", ALL), ("5 2/2", "6", ALL),
        ("one thousand two thousand", "3000", ALL),
        ("the square of the side is 25", "25", ALL), ("the reciprocal of x is 5", "5", ALL),  # a subject that changes
        ("the total divided by two is 4", "4", ALL), ("the next integer is 5", "5", ALL)]],
    ("\\boxed{5 \\text{ cm long}}", "5 m", W, "unit cm", ALL), ("$\\boxed{x \\approx 4}$", "4", W, "estimate", ALL),
    ("$\\boxed{\\neg 4}$", "4", W, "negation", ALL), ("\\boxed{100,99}", "100.99", W, HEDGED, ALL),
    ("The length is ≈5.", "5", U, "", N), ("It costs 5bn.", "5", U, "", N),
    ("\\boxed{x = \\frac{1}{3} \\approx 0.33}", "\\frac{1}{3}", C, "", ALL),  # the exact value, then its estimate
    *[(f"Answer: {text}", ref, C, "", ALL) for text, ref in [
        ("the total is 5", "5"), ("the sum of the roots is -5", "-5"), ("exactly 12 eggs", "12"),
        ("5 meters long", "5 m"),
        ("5 milliseconds", "5 ms"), ("5 bucks", "\\$5"), ("twelve hundred", "1200"), ("two thousand and five", "2005"),
        ("three-fifths", "\\frac{3}{5}"), ("one-half", "\\frac12"), ("½", "\\frac12"), ("2¾", "\\frac{11}{4}"),
        ("5 seconds", "5 s"), ("5 cm³", "5 \\text{ cm}^3")]],
    ("Answer: 5 KM", "5 km", C, "", S + N),  # mode latex keeps the capitals: math-verify cannot read them
    ("Answer: ½", "\\frac13", W, "", ALL), ("Answer: twelve hundred", "120", W, "", ALL),
    ("\\boxed{0}\n\nAnswer: undefined", "0", W, "", ALL),  # a one-word answer overrules the box
    ("\\boxed{1}\n\nAnswer: a half", "1", W, "", ALL), ("Answer: a half", "\\frac{1}{2}", C, "", ALL),
    ("#### (2, 1)", "(2, 1)", C, "", ALL),
    ("So the share is $28$ percent.", "0.28", C, "", L),
]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail", cases(WORDS))
def test_words_and_units_around_a_number(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


# ---------------------------------------------------------------- A9: double readings, decided and kept
DECIDED = [
    # X% against a plain reference reads as X/100 or X: references of 'what percent' questions drop the sign
    ("Answer: 0.5%", "0.5", C, "", ALL), ("Answer: 0.5%", "0.005", C, "", ALL), ("Answer: 0.5%", "0.05", W, "", ALL),
    # a reference '1,5' is 1.5 and the list {1, 5}; a completion's '1,5' is a list only
    ("\\boxed{5, 1}", "1,5", C, "", ALL), ("\\boxed{1.5}", "1,5", C, "", ALL), ("\\boxed{1,5}", "1.5", W, HEDGED, ALL),
    ("\\boxed{3}\n\nTotal: 4", "3", C, "", S + L),  # no marker: 'Total: 4' is no statement
    ("Answer: x = 2 or x = 3", "2, 3", W, HEDGED, ALL), ("\\boxed{5, -5}", "\\pm 5", W, HEDGED, ALL),  # refused forms
]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail", cases(DECIDED))
def test_double_readings_and_refusals_as_decided(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


# ---------------------------------------------------------------- B: cost, in process CPU time
MB = 1_000_000
_PAD = "Some reasoning here.\n\n" * 45_000
COSTLY = {
    "64 answer lines of '**'": ("Answer: " + "**" * 990 + "5\n") * 64,
    "64 boxes of '**'": ("\\boxed{" + "**" * 990 + "5}\n") * 64,
    "64 answer lines of '$'": ("Answer: " + "$" * 995 + "5" + "$" * 995 + "\n") * 64,
    "1 MB, then an environment of '\\('": _PAD + "$$" + "\\(" * 7000 + "5$$",
    "1 MB, then an environment of '='": _PAD + "$" + "=" * 16_000 + "1$",
    # a unit stripped per pass over the value, for a parenthesis that may restate it: 80 s, 2 s
    "180 KB of '^\\circ', then a parenthesis": "Answer: 5" + "^\\circ" * 30_000 + " (5)",
    "36 KB of '\\text{ cm}^2', then a parenthesis": "Answer: 5" + "\\text{ cm}^2" * 3000 + " (5)",
    "1 MB of '(5) '": "Answer: " + "(5) " * (MB // 4),
}


@pytest.mark.parametrize("name", COSTLY)
def test_the_red_teams_costly_completions_take_little_cpu(name):
    """Quadratic before (latex.clean unwrapped one layer per pass, a lookahead per '='): 0.7-18 s of CPU each."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import math_adversarial

    case = math_adversarial.AdversarialCase(name, COSTLY[name], "5")
    for mode in MODES:
        verifier = MathVerifier(mode, worker=math_adversarial.NoWorker())
        assert math_adversarial.parent_cpu(verifier, case, tries=2) < 0.5, (name, mode)


# ---------------------------------------------------------------- the worker's budget on a loaded machine
SLOW_SOURCE = r"""
import json, sys, time
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    time.sleep(0.8 if req["pred"] == "slow" else 0)
    print(json.dumps({"status": "equal" if req["pred"] == req["gold"] else "different"}), flush=True)
"""


def test_a_worker_starved_of_cpu_gets_more_wall_time(monkeypatch):
    """A runnable worker that has used little CPU is waiting for a core, not slow: its budget is CPU time, with up
    to STARVED_WALL_FACTOR budgets of wall time. One that sleeps, or spent its budget, times out as before."""
    worker = MathVerifyWorker(source=SLOW_SOURCE)
    try:
        verifier = MathVerifier(timeout_s=0.5, worker=worker)
        assert verifier.verify("Answer: x", "x").outcome is C  # warm start
        monkeypatch.setattr(worker, "_cpu", lambda: (0.0, True))  # runnable, no CPU used: starved
        start = time.monotonic()
        assert verifier.verify("Answer: slow", "slow").outcome is C
        assert time.monotonic() - start < 1.5 + 0.5
        monkeypatch.setattr(worker, "_cpu", lambda: (0.0, False))  # sleeping: no extension
        assert MathVerifier(timeout_s=0.5, worker=worker).verify("Answer: slow", "slow").outcome is Outcome.TIMEOUT
    finally:
        worker.close()
