"""Rewarder: weighted sum of verifier scores and TRL-style reward functions, validation, logging counts."""
from __future__ import annotations

import math

import pytest
import torch

from rlvr.config.run import TaskConfig
from rlvr.rewards.rewarder import Rewarder, mean_scores, outcome_counts, verdict_from_value
from rlvr.types import Outcome, Prompt, RolloutBatch
from rlvr.verifiers.format import AnswerLineVerifier
from rlvr.verifiers.math.verifier import MathVerifier


def prompt(reference: str, question: str = "q", **columns) -> Prompt:
    messages = ({"role": "system", "content": "be brief"}, {"role": "user", "content": question})
    return Prompt(id=f"test/{question}", messages=messages, reference=reference, columns=columns)


PROMPTS = [prompt("7", "3 + 4?"), prompt("7", "3 + 4?"), prompt("10", "5 + 5?")]
COMPLETIONS = ["3 + 4 = 7\nAnswer: 7", "Answer: 8", "ten, I think 10"]


def constant(values):
    def reward(prompts, completions, **columns):
        return list(values)
    return reward


def test_weighted_sum_by_hand():
    rewarder = Rewarder({"math": (MathVerifier(), 1.0), "answer_format": (AnswerLineVerifier(), 0.5),
                         "custom": (constant([0.5, None, 2.0]), 0.25)})
    scored = rewarder.score(PROMPTS, COMPLETIONS)
    # scores per component (completion 0, 1, 2):
    #   math:          1 (7 == 7), 0 (8 != 7), 0 (strict: no marker -> unparseable)
    #   answer_format: 1,          1,          0 (no 'Answer:' line)
    #   custom:        0.5,        0 (None),   2 (not clamped)
    # reward = 1.0*math + 0.5*answer_format + 0.25*custom:
    #   r0 = 1 + 0.5 + 0.125 = 1.625;  r1 = 0 + 0.5 + 0 = 0.5;  r2 = 0 + 0 + 0.5 = 0.5
    assert scored.rewards.tolist() == pytest.approx([1.625, 0.5, 0.5])
    assert scored.scores["custom"].tolist() == pytest.approx([0.5, 0.0, 2.0])
    assert [v.outcome for v in scored.verdicts["math"]] == [Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE]
    assert [v.outcome for v in scored.verdicts["custom"]] == [Outcome.WRONG, Outcome.UNPARSEABLE, Outcome.CORRECT]
    assert scored.verdicts["custom"][2].detail == "reward 2"
    assert scored.verdicts["custom"][1].detail == "reward function returned None"
    assert scored.rewards.shape == (3,) and scored.rewards.dtype == torch.float32


def test_outcome_counts_and_mean_scores():
    scored = Rewarder({"math": (MathVerifier(), 1.0)}).score(PROMPTS, COMPLETIONS)
    counts = outcome_counts(scored)
    assert counts == {"math/correct": 1, "math/wrong": 1, "math/unparseable": 1, "math/timeout": 0,
                      "math/error": 0}
    assert mean_scores(scored) == pytest.approx({"math": 1 / 3})


def test_trl_function_receives_prompts_completions_and_columns():
    seen = {}

    def reward(prompts, completions, **columns):
        seen.update(prompts=prompts, completions=completions, **columns)
        return [1.0] * len(completions)

    prompts = [prompt("7", "3 + 4?", level=1), prompt("10", "5 + 5?", level=2, answer="ten")]
    Rewarder({"r": (reward, 1.0)}).score(prompts, ["a", "b"])
    assert seen["prompts"] == ["3 + 4?", "5 + 5?"]  # the last user turn, as TRL's plain-text prompts
    assert seen["completions"] == ["a", "b"]
    assert seen["level"] == [1, 2]
    assert seen["answer"] == [None, "ten"]  # a dataset 'answer' column wins over the reference


def test_reference_is_passed_as_answer_column():
    def exact(prompts, completions, answer, **_):  # the usual TRL accuracy-reward signature
        return [float(c.strip() == a) for c, a in zip(completions, answer)]

    scored = Rewarder({"exact": (exact, 1.0)}).score(PROMPTS, ["7", " 7 ", "7"])
    assert scored.rewards.tolist() == [1.0, 1.0, 0.0]  # references are 7, 7, 10


@pytest.mark.parametrize("value, outcome, score", [
    (1.0, Outcome.CORRECT, 1.0), (True, Outcome.CORRECT, 1.0), (0, Outcome.WRONG, 0.0),
    (0.25, Outcome.WRONG, 0.25), (-3, Outcome.WRONG, -3.0), (2.5, Outcome.CORRECT, 2.5),
    (None, Outcome.UNPARSEABLE, 0.0), (float("nan"), Outcome.UNPARSEABLE, 0.0),
    (torch.tensor(1.0), Outcome.CORRECT, 1.0),
])
def test_reward_values_are_taken_as_they_are(value, outcome, score):
    verdict = verdict_from_value(value)
    assert verdict.outcome is outcome and verdict.score == score


@pytest.mark.parametrize("value", [float("inf"), "1.0", [1.0]])
def test_a_value_that_is_no_finite_number_is_refused(value):
    with pytest.raises(ValueError):
        verdict_from_value(value)


def test_nan_and_none_contribute_zero_and_are_counted():
    scored = Rewarder({"math": (MathVerifier(), 1.0), "f": (constant([float("nan"), None, 1.0]), 2.0)}
                      ).score(PROMPTS, COMPLETIONS)
    # math = [1, 0, 0]; f = [0 (NaN: TRL's None), 0 (None), 1]; reward = math + 2 f = [1, 0, 2]
    assert scored.rewards.tolist() == [1.0, 0.0, 2.0]
    assert all(math.isfinite(r) for r in scored.rewards.tolist())
    counts = outcome_counts(scored)
    assert (counts["f/unparseable"], counts["f/correct"]) == (2, 1)


def test_from_task_and_score_rollout():
    task = TaskConfig(verifiers={"math": 1.0, "answer_format": 0.5})
    rewarder = Rewarder.from_task(task)
    prompts = [prompt("7", "a"), prompt("10", "b")]  # G = 2: rows 0,1 -> prompt 0; rows 2,3 -> prompt 1
    zeros = torch.zeros(4, 3, dtype=torch.long)
    batch = RolloutBatch(prompts=prompts, group_size=2, prompt_ids=zeros, prompt_mask=zeros, completion_ids=zeros,
                         completion_mask=zeros, sampling_logprobs=zeros.float(),
                         completions=["Answer: 7", "Answer: 10", "Answer: 10", "so 10"],
                         truncated=torch.zeros(4, dtype=torch.bool))
    scored = rewarder.score_rollout(batch)
    # math: [1, 0, 1, 0 (unparseable)]; answer_format: [1, 1, 1, 0]; reward = math + 0.5 answer_format
    assert scored.rewards.tolist() == [1.5, 0.5, 1.5, 0.0]


def test_invalid_construction_and_length_mismatch():
    with pytest.raises(ValueError):
        Rewarder({})
    with pytest.raises(TypeError):
        Rewarder({"x": (42, 1.0)})
    with pytest.raises(ValueError, match="2 prompts for 3 completions"):
        Rewarder({"math": (MathVerifier(), 1.0)}).score(PROMPTS[:2], COMPLETIONS)


def test_numeric_batch_of_64():
    # Speed is measured by bench/verifiers.py, not here (timed unit tests flake on shared machines).
    rewarder = Rewarder({"math": (MathVerifier(), 1.0), "answer_format": (AnswerLineVerifier(), 0.1)})
    prompts = [prompt(str(i % 20), f"q{i}") for i in range(64)]
    completions = [f"{i} + 0 = {i % 20}\nAnswer: {i % 17}" for i in range(64)]
    scored = rewarder.score(prompts, completions)
    # i % 20 == i % 17 for i in 0..16 only (i < 17 makes both equal i; for i >= 17 they differ)
    assert outcome_counts(scored)["math/correct"] == 17
