"""Reward model as one more reward, on a tiny randomly initialised Llama classifier."""
from __future__ import annotations

import json
import math

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

from rlvr.config.run import load_config
from rlvr.errors import UserFacingError
from rlvr.grpo.loop import train
from rlvr.rewards.reward_model import (
    MAX_SCORE,
    NAME,
    RewardModel,
    RewardModelError,
    RewardModelSettings,
    preference_score,
    reward_model_components,
)
from rlvr.rewards.rewarder import build_rewarder, reward_functions
from rlvr.rewards.service import RewardService
from rlvr.types import Outcome, Prompt

QUESTIONS = ["What is 7 * 8?", "What is 2 + 3?", "Say hello.", "What is 12 * 12?", "Why?"]
COMPLETIONS = ["<think>\n7 * 8 = 56.\n</think>\nAnswer: 56", "Answer: 5", "hello there, friend", "144", ""]


@pytest.fixture(scope="module")
def rm_dir(tiny_model_dir, tmp_path_factory):
    """The conftest's character tokenizer and chat template, with a random 1-label Llama classifier head."""
    target = tmp_path_factory.mktemp("tiny-rm")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(target)
    config = LlamaConfig.from_pretrained(tiny_model_dir, num_labels=1)
    torch.manual_seed(1)
    model = LlamaForSequenceClassification(config)
    with torch.no_grad():  # a random head gives logits near 0; scale it so scores spread over (0, 1)
        model.score.weight.mul_(50.0)
    model.save_pretrained(target)
    return target


def settings(path, batch_size=16) -> RewardModelSettings:
    return RewardModelSettings(str(path), batch_size, "cpu", "float32", False)


def config_with(rm_dir, *extra):
    return load_config(None, [f"reward.model_path={rm_dir}", *extra])


def test_preference_score_by_hand():
    # sigmoid(0) = 1/2, sigmoid(ln 3) = 3 / (3 + 1) = 3/4; a huge logit is capped below 1 (never CORRECT).
    one_label = preference_score(torch.tensor([[0.0], [math.log(3.0)], [100.0]]))
    assert one_label.tolist() == pytest.approx([0.5, 0.75, MAX_SCORE])
    assert float(one_label[2]) < 1.0
    # two labels: softmax of [0, ln 3] gives the last label e^{ln 3} / (1 + 3) = 3/4; [ln 3, 0] gives 1/4.
    two_labels = preference_score(torch.tensor([[0.0, math.log(3.0)], [math.log(3.0), 0.0]]))
    assert two_labels.tolist() == pytest.approx([0.75, 0.25])


def test_scores_deterministic_and_batched_equals_unbatched(rm_dir):
    batched = RewardModel.load(settings(rm_dir, batch_size=16))
    one_by_one = RewardModel.load(settings(rm_dir, batch_size=1))
    first = batched(QUESTIONS, COMPLETIONS)
    assert first == batched(QUESTIONS, COMPLETIONS)  # no dropout, no sampling: bit-identical
    assert one_by_one(QUESTIONS, COMPLETIONS) == pytest.approx(first, abs=1e-5)
    assert [batched([q], [c])[0] for q, c in zip(QUESTIONS, COMPLETIONS)] == pytest.approx(first, abs=1e-5)
    assert len(first) == 5 and all(0.0 <= s < 1.0 for s in first)
    assert len(set(round(s, 4) for s in first)) > 1  # the scores depend on the text
    assert batched([], []) == []


def test_score_reads_the_chat_rendered_question_and_completion(rm_dir):
    model = RewardModel.load(settings(rm_dir))
    text = model.render("What is 2 + 3?", "Answer: 5")
    assert text == "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\nAnswer: 5<|im_end|>\n"
    assert model(["What is 2 + 3?"], ["Answer: 5"]) != model(["What is 2 + 3?"], ["Answer: 6"])


def test_weight_scales_the_total_reward(rm_dir):
    prompts = [Prompt(id=f"t/{i}", messages=({"role": "user", "content": q},), reference="56")
               for i, q in enumerate(QUESTIONS)]
    rm_scores = RewardModel.load(settings(rm_dir))(QUESTIONS, COMPLETIONS)
    for weight in (1.0, 0.25):
        rewarder = build_rewarder(config_with(rm_dir, f"reward.model_weight={weight}"))
        assert list(rewarder.components) == ["math", NAME]
        scored = rewarder.score(prompts, COMPLETIONS)
        # reward = 1.0 * math + weight * rm; math is 1 only for completion 0 ("Answer: 56" vs reference 56).
        math_scores = [1.0, 0.0, 0.0, 0.0, 0.0]
        expected = [m + weight * s for m, s in zip(math_scores, rm_scores)]
        assert scored.rewards.tolist() == pytest.approx(expected, abs=1e-5)
        assert all(v.outcome is Outcome.WRONG for v in scored.verdicts[NAME])  # a preference is never CORRECT


def test_no_model_path_means_no_component(rm_dir):
    defaults = load_config(None, [])
    assert reward_model_components(defaults.reward, defaults.model) == {}
    assert list(build_rewarder(defaults).components) == ["math"]


def test_reward_service_runs_the_model_in_the_trainer_process(rm_dir):
    # workers=1: verifiers run in a worker; the model is a reward function, which RewardService calls in the
    # parent (pickling it to a worker would fail), and its scores reach the ScoredBatch unchanged.
    config = config_with(rm_dir)
    rewarder = build_rewarder(config)
    prompts = [Prompt(id=f"t/{i}", messages=({"role": "user", "content": q},), reference="56")
               for i, q in enumerate(QUESTIONS)]
    with RewardService.start(config.task, workers=1, reward_functions=reward_functions(rewarder)) as service:
        from_service = service.score(prompts, COMPLETIONS)
    in_process = rewarder.score(prompts, COMPLETIONS)
    assert from_service.rewards.tolist() == pytest.approx(in_process.rewards.tolist())
    assert from_service.scores[NAME].tolist() == pytest.approx(in_process.scores[NAME].tolist())


def test_loading_errors_name_reward_model_path(tmp_path, tiny_model_dir):
    with pytest.raises(RewardModelError, match=r"reward.model_path='.*missing'"):
        RewardModel.load(settings(tmp_path / "missing"))
    with pytest.raises(RewardModelError, match="not a trained reward model .*LlamaForCausalLM.*score.weight"):
        RewardModel.load(settings(tiny_model_dir))  # a causal LM would get a silent random head
    assert issubclass(RewardModelError, UserFacingError)


def test_grpo_step_with_the_reward_model(tiny_model_dir, rm_dir, tmp_path):
    out = tmp_path / "run"
    config = load_config(None, [
        f"model.name_or_path={tiny_model_dir}", f"output_dir={out}", "max_steps=1", "rollout.group_size=4",
        "rollout.prompts_per_step=2", "rollout.max_new_tokens=8", "optimizer.micro_batch_size=4",
        "eval.at_end=false", "reward.workers=0", f"reward.model_path={rm_dir}", "reward.model_weight=0.5"])
    train(config)
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert 0.0 < record[f"reward/{NAME}"] < 1.0
    assert record[f"outcomes/{NAME}/correct"] == 0 and record[f"outcomes/{NAME}/wrong"] == 8
    # reward = 1.0 * math + 0.5 * rm per completion, so the batch means add up the same way
    assert record["reward_mean"] == pytest.approx(record["reward/math"] + 0.5 * record[f"reward/{NAME}"], abs=1e-5)
