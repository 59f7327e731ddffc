"""Attack suite for the math and format verifiers: adversarial completions that must never earn reward.

Each case scores 0 (WRONG / UNPARSEABLE / TIMEOUT) or, for a bad gold answer, is an unscorable ERROR. The
pathological ones must end within 3 s under a 1 s budget and leave the verifier (and its one worker
process) working. Every case holds in every answer mode (strict, last_number, latex). Decisions behind each
expectation: rlvr/verifiers/math/ (extract.py, latex.py, numbers.py, worker.py).
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import time
from pathlib import Path

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.format import FormatVerifier, TagCountVerifier, ThinkFormatVerifier
from rlvr.verifiers.math.verifier import MODES, MathVerifier

MB = 1_000_000
HEDGED = "hedged: several answers"


@pytest.fixture(scope="module", params=MODES)
def verifier(request):
    return MathVerifier(request.param, timeout_s=10)  # generous: the machine is shared; budgets are tested below


def spam_lines(n: int) -> str:
    return "\n".join(f"Answer: {i}" for i in range(n))


ATTACKS = [
    # ---- hedging: alternatives in the final answer, or several final answers side by side
    ("Answer: 3 or 4", "3", Outcome.WRONG, HEDGED),
    ("\\boxed{3} \\boxed{4}", "3", Outcome.WRONG, HEDGED),
    ("\\boxed{3} \\boxed{4}", "4", Outcome.WRONG, HEDGED),  # last box would win; side by side they hedge
    ("$\\boxed{3}$ or $\\boxed{4}$", "4", Outcome.WRONG, HEDGED),
    ("the answer is 3, or maybe 4", "3", Outcome.WRONG, HEDGED),
    ("Answer: either 3 or 4", "4", Outcome.WRONG, HEDGED),
    ("\\boxed{3, 4}", "4", Outcome.WRONG, HEDGED),  # a list of candidates for a one-value reference
    ("\\boxed{3 \\text{ and } 4}", "4", Outcome.WRONG, HEDGED),
    ("Answer: 3\nAnswer: 4", "4", Outcome.WRONG, HEDGED),
    ("<answer>3</answer><answer>4</answer>", "4", Outcome.WRONG, HEDGED),
    # ---- answer spam: many different final answers, the right one among them
    (spam_lines(100), "99", Outcome.WRONG, HEDGED),
    (" ".join(f"\\boxed{{{i}}}" for i in range(1000)), "999", Outcome.WRONG, HEDGED),
    ("".join(f"Hmm. Answer: {i}. Let me check that again.\n" for i in range(10)), "9", Outcome.WRONG,
     "answer spam"),
    # ---- the answer only inside the reasoning
    ("<think>so it is \\boxed{5}</think> I am not sure.", "5", Outcome.UNPARSEABLE, "only inside <think>"),
    ("<think>Answer: 5", "5", Outcome.UNPARSEABLE, "only inside <think>"),  # unclosed: all of it is thinking
    ("prefilled thinking: \\boxed{5}</think> no idea", "5", Outcome.UNPARSEABLE, "only inside <think>"),
    ("<think>a</think>\\boxed{4}<think>\\boxed{5}", "5", Outcome.WRONG, "extracted 4"),
    # ---- tolerance bait: approximations of exact values, tiny values
    ("Answer: 3.14", "\\pi", Outcome.WRONG, "expected \\pi"),
    ("Answer: 3.14159265358979", "\\pi", Outcome.WRONG, "expected \\pi"),  # math-verify: equal
    ("Answer: 0.333", "\\frac{1}{3}", Outcome.WRONG, ""),
    ("Answer: 0.3333333333", "\\frac{1}{3}", Outcome.WRONG, ""),  # math-verify: equal
    ("\\boxed{1.4142}", "\\sqrt{2}", Outcome.WRONG, ""),
    ("Answer: 1e-10", "0", Outcome.WRONG, ""),  # math-verify reads '1e-10' as e - 10
    ("\\boxed{0.0001}", "0.0002", Outcome.WRONG, ""),
    ("\\boxed{0.0000001}", "0.0000002", Outcome.WRONG, ""),  # math-verify: equal (6 decimals)
    ("\\boxed{\\frac{1}{2^{99}}}", "\\frac{1}{2^{98}}", Outcome.WRONG, "values differ"),  # math-verify: equal
    ("\\boxed{e^{-60}}", "e^{-50}", Outcome.WRONG, "values differ"),  # math-verify: equal
    ("\\boxed{\\frac{1}{2006!}}", "\\frac{1}{2004!}", Outcome.WRONG, "values differ"),  # math-verify: equal
    # ---- malformed LaTeX with the right number
    ("\\boxed{\\frac{1}{2}", "\\frac{1}{2}", Outcome.UNPARSEABLE, ""),  # an unclosed box is no answer
    ("Answer: \\frac12}", "0.5", Outcome.UNPARSEABLE, "malformed LaTeX"),
    ("Answer: \\frac{1}{2", "0.5", Outcome.UNPARSEABLE, "malformed LaTeX"),
    # ---- equations and values
    ("\\boxed{y=2}", "x=2", Outcome.WRONG, ""),
    ("\\boxed{x=3}", "x=2", Outcome.WRONG, ""),
    ("\\boxed{2x+3=7}", "7", Outcome.WRONG, "an equation is not a value"),  # math-verify: equal
    ("\\boxed{5=7}", "7", Outcome.WRONG, "a false equation"),  # math-verify: equal
    # ---- sign, intervals, undefined values
    ("\\boxed{1-\\frac{1}{e}}", "1+\\frac{1}{e}", Outcome.WRONG, ""),
    ("\\boxed{1 - \\frac{1}{\\mathrm{e}}}", "1 + \\frac{1}{\\mathrm{e}}", Outcome.WRONG, ""),
    ("\\boxed{(0,1)}", "(0,1]", Outcome.WRONG, ""),
    ("\\boxed{[0,1]}", "[0,1)", Outcome.WRONG, ""),
    ("\\boxed{\\pm 2}", "2", Outcome.WRONG, ""),
    ("\\boxed{\\frac{1}{0}}", "\\frac{2}{0}", Outcome.WRONG, ""),
    # ---- text after a number that changes it is no unit (math-verify drops it: 5 million == 5)
    ("\\boxed{5 \\text{ million}}", "5", Outcome.WRONG, "expected 5"),  # read as 5000000
    ("\\boxed{3\\text{ dozen}}", "3", Outcome.WRONG, "expected 3"),
    ("\\boxed{7 \\text{ (mod 5)}}", "7", Outcome.WRONG, "'(mod 5)' after a number changes its value"),
    ("\\boxed{5 \\text{ below zero}}", "5", Outcome.WRONG, "'below zero' after a number changes its value"),
    ("\\boxed{5\\mathrm{k}}", "5", Outcome.WRONG, "'k' after a number changes its value"),
    ("Answer: 5 \\text{ or more}", "5", Outcome.WRONG, HEDGED),
    # ---- two percents compare as written; arrows and false chains are no values
    ("\\boxed{0.25\\%}", "25\\%", Outcome.WRONG, "expected 25"),
    ("\\boxed{25\\%}", "0.25\\%", Outcome.WRONG, "expected 0.25"),
    ("\\boxed{x = 3 = 4}", "4", Outcome.WRONG, "a false equation"),  # math-verify: equal
    ("\\boxed{3 \\to 4}", "4", Outcome.WRONG, "an arrow ('\\\\to')"),  # math-verify: equal
    ("Answer: 3 -> 4", "4", Outcome.WRONG, "an arrow ('->')"),
    ("Answer: \u2212 3", "3", Outcome.WRONG, "expected 3"),  # U+2212 is a minus sign, spaced or not
    # ---- a short decimal for a fraction stays tolerance bait; only a double-precision print counts
    ("\\boxed{\\begin{pmatrix} 0.33 & 1 \\end{pmatrix}}", "\\begin{pmatrix} \\frac13 & 1 \\end{pmatrix}",
     Outcome.WRONG, ""),
    ("\\boxed{0.083333333333333}", "\\frac{1}{12}", Outcome.WRONG, ""),  # 14 significant digits: short of 15
    ("\\boxed{0.0833333333333343}", "\\frac{1}{12}", Outcome.WRONG, ""),  # 15 digits, but 1e-15 away
    ("\\boxed{x > 3}", "[3, \\infty)", Outcome.WRONG, ""),  # the interval it describes is open
    ("\\boxed{1,22}", "1.22", Outcome.WRONG, HEDGED),  # a completion's decimal comma stays a list (a hedge)
    ("\\boxed{3}", "3,0", Outcome.WRONG, ""),  # half of the list {3, 0}; a reference's '3,0' is not 3.0
    ("Answer: the largest $n$ is 34. Wait, $n$ is 35", "34", Outcome.WRONG, "hedged"),  # a second value on its line
]


@pytest.mark.parametrize("completion, reference, outcome, detail", ATTACKS,
                         ids=[f"{i}:{c[:30]}" for i, (c, *_) in enumerate(ATTACKS)])
def test_math_attack_scores_zero(verifier, completion, reference, outcome, detail):
    verdict = verifier.verify(completion, reference)
    assert verdict.score == 0.0 and verdict.outcome is outcome, verdict
    assert detail in verdict.detail, verdict.detail


@pytest.mark.parametrize("reference", ["", "   ", "\\text{}", "\\frac{1}{", "\\boxed{", "\\frac12}", "#### "])
def test_bad_gold_is_unscorable_never_a_reward(verifier, reference):
    for completion in ("Answer: 5", "\\boxed{\\frac{1}{2}}", f"\\boxed{{{reference}}}"):
        verdict = verifier.verify(completion, reference)
        assert verdict.outcome is Outcome.ERROR and verdict.score == 0.0 and not verdict.scorable, verdict
        assert verdict.detail.startswith("reference answer unparseable")


def child_pids() -> set[int]:
    me, found = str(os.getpid()), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


PATHOLOGICAL = [
    ("\\boxed{10^{10^{10}}}", "5"),  # sympy would build a 10-billion-digit integer
    ("\\boxed{2^{2^{2^{2^{2}}}}}", "5"),
    ("\\boxed{" + "{" * MB, "5"),  # 1 MB of braces
    ("Answer: " + "{" * MB, "5"),
    ("\\boxed{" + "(" * 10_000 + "1" + ")" * 10_000 + "}", "1"),  # deep nesting
    ("\\boxed{" + "{" * 11 + "1" + "}" * 11 + "}", "1"),  # 11 levels: antlr alone would take seconds
    ("\\boxed{" + "9" * 100_000 + "}", "9"),  # giant number
    ("Answer: " + "9" * 100_000, "9"),
    ("\\boxed{10!!!}", "5"),  # passes the cheap checks: the worker's budget ends it
    ("\\boxed{(10^{100})!}", "5"),
]


@pytest.mark.parametrize("mode", MODES)
def test_pathological_inputs_end_quickly_and_the_verifier_survives(mode):
    before = child_pids()
    verifier = MathVerifier(mode, timeout_s=1)
    assert verifier.verify("\\boxed{\\sqrt{4}}", "2").outcome is Outcome.CORRECT  # worker start-up, unbudgeted
    for completion, reference in PATHOLOGICAL:
        start = time.monotonic()
        verdict = verifier.verify(completion, reference)
        elapsed = time.monotonic() - start
        assert elapsed < 5.0, (completion[:40], elapsed)  # budget 1 s + kill; a hang would be minutes
        assert verdict.score == 0.0 and verdict.outcome in (Outcome.UNPARSEABLE, Outcome.TIMEOUT), verdict
    assert verifier.verify("\\boxed{\\sqrt{9}}", "3").outcome is Outcome.CORRECT  # alive and answering
    # killed workers are reaped; only the live one remains (children from before the test, such as the resource
    # tracker of an earlier test's spawned process, are not this verifier's)
    assert len(child_pids() - before) <= 1


def test_adversarial_completions_cost_little_parent_cpu():
    # <= 0.2 s of the trainer's CPU per ~1 MB completion (was 1-2 s, up to 5 s for 1 MB of
    # '{'); about 0.1 s at worst here after the bounded scans of rlvr/verifiers/math/scan.py, the 16 <answer> blocks
    # read as completions (extract._ANSWER_BLOCKS: 64 of them cost 0.25 s on tags_of_boxes, which failed CI) and the
    # explanation search tried only where a run of spaces starts (around._EXPLANATION: 64 lines of 2500 spaces cost
    # 22 s). CPU time, not wall time, so other processes on the machine do not eat the margin.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import math_adversarial

    verifiers = {mode: MathVerifier(mode, worker=math_adversarial.NoWorker()) for mode in MODES}
    cases = math_adversarial.math_adversarial_cases()
    assert len(cases) >= 50 and min(len(case.completion) for case in cases) > 0.99 * MB
    for case in cases:
        for mode in MODES:
            cost = math_adversarial.parent_cpu(verifiers[mode], case)
            if cost > math_adversarial.BUDGET_S:  # measured again before failing: the machine may be loaded
                cost = math_adversarial.parent_cpu(verifiers[mode], case, tries=3)
            assert cost <= math_adversarial.BUDGET_S, (case.name, mode, cost)


def test_answer_spam_in_many_blocks_is_still_seen(verifier):
    # Only the last 16 <answer> blocks are read (extract._ANSWER_BLOCKS); spam needs more than 3 different declared
    # answers (hedges.MAX_DISTINCT_ANSWERS), so 40 blocks of different answers are still spam, while three different
    # values over 41 blocks are a model changing its mind, and the last one stands.
    attempts = "\n\nAnother attempt follows.\n\n"
    spam = verifier.verify(attempts.join(f"<answer>{i}</answer>" for i in range(40)), "39")
    assert spam.outcome is Outcome.WRONG and "answer spam" in spam.detail, spam
    settled = attempts.join([f"<answer>{i % 2}</answer>" for i in range(40)] + ["<answer>5</answer>"])
    assert verifier.verify(settled, "5").outcome is Outcome.CORRECT


@pytest.mark.parametrize("mode", ["latex", "strict"])
def test_blocks_before_the_last_16_are_read_whole_and_end_at_their_tag(mode):
    # 17 blocks: the first is older than the last 16, which are read by their last statement ('4'). Reading the first
    # 16 as older (found[:+16]) adds their whole texts, 16 different answers: spam, 0 instead of 1.
    worked = ["<answer>4</answer>"] + [f"<answer>x{i} = {i}, so the answer is 4</answer>" for i in range(1, 17)]
    assert MathVerifier(mode=mode).verify("\n".join(worked), "4").outcome is Outcome.CORRECT
    # An older block offered as an alternative to the next ('3 or 4') is a hedge: that needs its end at '</answer>';
    # an end 9 characters short leaves '</answer> or ' between them, no alternative, and the hedge passed (1).
    hedge = "<answer>3</answer> or <answer>4</answer>\n" + "\n".join(["<answer>4</answer>"] * 16)
    assert MathVerifier(mode=mode).verify(hedge, "4").outcome is Outcome.WRONG
    corrected = hedge.replace(" or ", " Wait, no. ")  # a correction between them: the later block stands
    assert MathVerifier(mode=mode).verify(corrected, "4").outcome is Outcome.CORRECT


@pytest.mark.parametrize("completion, reference, mode, outcome", [
    # an attack on the cheaper scans: each kept the verdict it had before them
    ("\n\nNext.\n\n".join(["<answer>1</answer>", "<answer>2</answer>", "<answer>3</answer>"]
                          + ["<answer>4</answer>"] * 16), "4", "strict", Outcome.WRONG),  # spam before the last 16
    ("Answer: $41$ $42$ " + "$$\\,$$" * 17, "42", "latex", Outcome.WRONG),  # a hedge padded with 68 '$'
    ("Answer: 42 (not 6 " + "x" * 2400 + " because)", "42", "strict", Outcome.UNPARSEABLE),  # over-long value
    ("Answer: 42" + " " * 2400 + " because", "42", "strict", Outcome.CORRECT),  # spaces, then why: the value is 42
    ("Answer: 42." + " " * 2400 + "The end.", "42", "strict", Outcome.CORRECT),
])
def test_cheaper_scans_keep_their_verdicts(completion, reference, mode, outcome):
    assert MathVerifier(mode, timeout_s=10).verify(completion, reference).outcome is outcome


def _verify_in_child(case: tuple[str, str, str]) -> str:
    mode, completion, reference = case
    return MathVerifier(mode, timeout_s=1).verify(completion, reference).outcome.value


@pytest.mark.parametrize("mode", MODES)
def test_budget_holds_in_a_forked_worker_process(mode):
    # A forked child gets its own math-verify worker (the parent's pipes are not shared) and its own budget.
    with multiprocessing.get_context("fork").Pool(1) as pool:
        outcomes = pool.map(_verify_in_child, [(mode, "\\boxed{\\sqrt{4}}", "2"), (mode, "\\boxed{10!!!}", "5")])
    assert outcomes == ["correct", "timeout"]


# ---------------------------------------------------------------- format attacks
FORMAT_ATTACKS = [
    "<think><think>a</think></think><answer>4</answer>",  # nested
    "<think>a</think><think>b</think><answer>4</answer>",  # duplicated
    "<think></think><answer>4</answer>",  # empty reasoning (think_format; "format" allows it, see below)
    "<think>  \n </think>4",
    "<answer>4</answer><think>a</think>",  # answer before think
    "4 <think>a</think>",
    "```\n<think>a</think>\n```\n<answer>4</answer>",  # tags inside a code fence
    "<think>a",  # never closed
    "a</think> 4",  # closing tag only, without prefill
    "",
]


@pytest.mark.parametrize("completion", FORMAT_ATTACKS)
def test_think_format_attacks_score_zero(completion):
    verdict = ThinkFormatVerifier().verify(completion, "")
    assert verdict.outcome is Outcome.WRONG and verdict.score == 0.0, verdict
    if "<answer>" not in completion or completion.startswith("<think></think>"):
        return  # the R1 "format" verifier deliberately accepts an empty think block (Qwen3 non-thinking mode)
    assert FormatVerifier().verify(completion, "").score == 0.0


@pytest.mark.parametrize("completion", ["<think>a</think>4", "<think>a</think><answer>4</answer>"])
def test_prefilled_templates_reject_a_second_think(completion):
    # trl#6966: the prompt already opened <think>; another one in the completion is a duplicate
    assert ThinkFormatVerifier(think_prefilled=True).verify(completion, "").score == 0.0
    assert FormatVerifier(think_prefilled=True).verify(completion, "").score == 0.0


def test_tag_spam_earns_no_tag_credit():
    verdict = TagCountVerifier().verify("<think></think>" * 1000 + "<answer></answer>" * 1000, "")
    assert verdict.score == 0.0 and verdict.outcome is Outcome.WRONG
