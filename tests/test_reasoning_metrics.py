"""Reasoning measures (evaluation/reasoning.py) and the "steps" verifier (verifiers/steps.py): think
sections, think words, the arithmetic step check with hand-derived counts, its guards, and the verifier's verdicts.
Each test names in a comment the one-line mutation it catches."""
from __future__ import annotations

import time

import pytest
import torch

from rlvr.config.run import TaskConfig
from rlvr.evaluation.reasoning import (
    NOT_MEASURED,
    ReasoningSummary,
    StepCheck,
    check_steps,
    sample_reasoning,
    summarize_reasoning,
    think_text,
    think_words,
)
from rlvr.rewards.rewarder import Rewarder
from rlvr.types import Outcome, Prompt, RolloutBatch
from rlvr.verifiers import VERIFIERS, build_verifiers
from rlvr.verifiers.steps import MAX_DIGITS, StepsVerifier, evaluate_side


def test_think_text_closed_prefilled_unclosed_and_absent():
    # mutation caught: returning completion[close:] (the answer) for a prefilled <think>, or None when unclosed
    assert think_text("<think>a b</think> Answer: 1") == "a b"
    assert think_text("a b</think> Answer: 1") == "a b"  # the chat template opened <think> in the prompt
    assert think_text("x <think>a b c") == "a b c"  # cut by max_new_tokens: still reasoning
    assert think_text("Answer: 1") is None


def test_think_words_split_on_whitespace():
    # "7", "+", "5", "=", "12,", "carry", "1" -> 7; no think section -> 0
    # mutation caught: counting the whole completion's words (9: "Answer:", "82" added)
    assert think_words("<think> 7 + 5 = 12,\ncarry 1 </think> Answer: 82") == 7
    assert think_words("7 + 5 = 12 Answer: 12") == 0


@pytest.mark.parametrize("text, expected", [
    # three "=" and every side evaluates: 282 = 240 + 42 = 282 = 282
    ("47 * 6 = 40 * 6 + 7 * 6 = 240 + 42 = 282", (3, 0)),
    # two runs "7 + 5 = 12" and "4 + 3 + 1 = 8"; "1" and "82" hold no "="
    ("Ones: 7 + 5 = 12, carry 1. Tens: 4 + 3 + 1 = 8. So 82.", (2, 0)),
    ("3 * 4 = 13", (1, 1)),  # 12 != 13
    ("no equations here, just 3 and 4", (0, 0)),
    ("x = 3 + 4 = 7", (1, 0)),  # the empty side before the first "=" does not count
    ("(7 + 5) * 2 = 24 and 3 × 4 = 12 and 2·3 = 7", (3, 1)),  # × and · are times; 6 != 7
    ("(3 + 4 = 7)", (1, 0)),  # the parentheses belong to the prose
])
def test_check_steps_by_hand(text, expected):
    # mutation caught: `wrong += left == right` (inverted), or counting one step per side instead of per "="
    assert check_steps(text) == StepCheck(*expected)


@pytest.mark.parametrize("text", [
    "2.5 = 2.5",  # decimals: read as integers this would be "5 = 2"
    "1,234 + 1 = 1,235",  # grouped digits: "234 + 1 = 1"
    "12 / 4 = 3",  # division is not evaluated: "4 = 3"
    "3 x 4 = 12", "3 \\times 4 = 12", "10% of 50 = 5",  # operator words: "4 = 12", "50 = 5"
    "2x + 3 = 7", "y - 3 = 4", "CO2 = 44", "6 = 2x", "2^3 = 8",  # letters and powers continue the expression
])
def test_runs_inside_notation_it_does_not_read_are_skipped_not_judged(text):
    # mutation caught: dropping the edge check in check_steps (each of these would count a wrong step)
    assert check_steps(text) == StepCheck(0, 0)


def test_side_evaluator_reads_integer_expressions_only():
    # (1 + 2) * 3 = 9; -3 + 5 = 2. Power, floats, unary plus and names are not integer expressions
    # mutation caught: allowing ast.Pow in _value (2 ** 3 would read 8)
    assert evaluate_side("(1 + 2) * 3") == 9 and evaluate_side(" -3 + 5 ") == 2
    assert [evaluate_side(s) for s in ("2 ** 3", "1.5", "+3", "a + 1", "1 2", "007", "")] == [None] * 7


def test_long_numbers_and_huge_inputs_are_bounded():
    at_cap, past_cap = "1" + "0" * (MAX_DIGITS - 1), "1" + "0" * MAX_DIGITS  # 30 and 31 digits
    # mutation caught: `len(n) >= MAX_DIGITS` (a 30-digit number would be refused) or no digit cap at all
    assert check_steps(f"{at_cap} + 0 = {at_cap}") == StepCheck(1, 0)
    assert check_steps(f"{past_cap} + 0 = {past_cap}") == StepCheck(0, 0)
    start = time.perf_counter()
    # 200 000 nested parentheses and 2 000 chained 30-digit products: skipped by the side length cap
    assert check_steps("(" * 200_000 + "1 = 1") == StepCheck(0, 0)
    assert check_steps(" * ".join(["9" * 30] * 2000) + " = 1") == StepCheck(0, 0)
    assert time.perf_counter() - start < 5.0  # measured ~0.01 s; a quadratic scan or a bigint tower takes minutes


def test_sample_reasoning_and_the_summary_by_hand():
    phrases = ["wait", "let me check"]
    a = sample_reasoning("<think>47 * 6 = 282. Wait, let me check: 40 * 6 = 240</think> 282", phrases)
    # think words: 47 * 6 = 282. Wait, let me check: 40 * 6 = 240 -> 14; steps 47*6=282 (right), 40*6=240 (right)
    assert a == (14, True, StepCheck(2, 0))
    b = sample_reasoning("<think>3 * 4 = 13</think> 13", phrases)  # 5 words, 1 step, wrong
    c = sample_reasoning("Answer: 12", phrases)  # no think, no step; "await" would not be "wait" either
    # 12 words (Wait: 2 + 2 = 4 and 3 * 3 = 9), 2 right steps; no phrases: "Wait" is not a reflection
    d = sample_reasoning("<think>Wait: 2 + 2 = 4 and 3 * 3 = 9</think> 9", [])
    assert (b, c, d) == ((5, False, StepCheck(1, 1)), (0, False, StepCheck(0, 0)), (12, False, StepCheck(2, 0)))
    summary = summarize_reasoning(*zip(a, b, c, d))
    # think words (14 + 5 + 0 + 12) / 4 = 7.75; reflection 1/4; stated a, b, d -> 3/4; right a, d -> 2/4 of all,
    # 2/3 of the stated. mutation caught: steps_right divided by the stated count (it would read 2/3)
    assert summary == ReasoningSummary(7.75, 0.25, 0.75, 0.5, 2 / 3)
    assert summarize_reasoning([0], [False], [StepCheck(0, 0)]).steps_right_given_stated is None  # nothing stated
    assert summarize_reasoning([], [], []) == NOT_MEASURED


def test_steps_verifier_verdicts():
    verifier = StepsVerifier()
    right = verifier.verify("<think>47 * 6 = 240 + 42 = 282</think><answer>282</answer>")
    wrong = verifier.verify("<think>47 * 6 = 240 + 42 = 272</think><answer>272</answer>")
    # the equation after </think> is not reasoning: the think section alone is read when there is one
    unstated = verifier.verify("<think>I just know it</think> 3 * 4 = 13")
    prefilled = verifier.verify("7 + 5 = 12</think> Answer: 12")
    # mutation caught: returning CORRECT when check.stated is 0, or reading the whole completion despite <think>
    assert (right.outcome, right.score) == (Outcome.CORRECT, 1.0)
    assert (wrong.outcome, wrong.score, wrong.detail) == (Outcome.WRONG, 0.0, "1 of 2 stated steps wrong")
    assert (unstated.outcome, unstated.score) == (Outcome.UNPARSEABLE, 0.0)
    assert prefilled.outcome == Outcome.CORRECT
    assert verifier.verify(None).outcome == Outcome.ERROR  # never raises


def test_steps_is_a_registered_verifier_whose_no_step_reward_is_zero():
    assert "steps" in VERIFIERS
    verifiers = build_verifiers(TaskConfig(verifiers={"steps": 0.1}))
    assert isinstance(verifiers["steps"], StepsVerifier)
    # one prompt, G = 3: right steps, no steps, wrong steps -> rewards 0.1 * (1, 0, 0)
    # mutation caught: UNPARSEABLE scored above 0 (no-step traces would earn a process reward for nothing)
    prompt = Prompt("p", ({"role": "user", "content": "7 + 5?"},), "12")
    texts = ["<think>7 + 5 = 12</think> 12", "<think>easy</think> 12", "<think>7 + 5 = 13</think> 13"]
    batch = RolloutBatch([prompt], 3, torch.zeros(1, 1), torch.ones(1, 1), torch.ones(3, 1), torch.ones(3, 1),
                         torch.zeros(3, 1), texts, torch.zeros(3, dtype=torch.bool))
    scored = Rewarder({"steps": (verifiers["steps"], 0.1)}).score_rollout(batch)
    assert scored.rewards.tolist() == pytest.approx([0.1, 0.0, 0.0])
