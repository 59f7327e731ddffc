"""The shipped GSM-Symbolic config: configs/benchmarks/gsm_symbolic.yaml trains and evaluates
reasoning-gym's gsm_symbolic dataset through the reasoning_gym task as written, and bounds its own time. Skips
without reasoning-gym (the `test` extra installs it; on CI a skip fails, tests/conftest.py)."""
from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import pytest

from rlvr.config.run import load_config
from rlvr.tasks import build_task
from rlvr.types import Outcome
from rlvr.verifiers.reasoning_gym import GymRow, ReasoningGymVerifier, make_dataset

pytest.importorskip("reasoning_gym")
SHIPPED = Path(__file__).resolve().parent.parent / "configs" / "benchmarks" / "gsm_symbolic.yaml"


@pytest.fixture(scope="module")
def config():
    return load_config(SHIPPED)


def test_the_config_loads_and_bounds_its_own_time(config):
    # caught: a config that trains another dataset, lets training run on (max_minutes unset or >= 15), or leaves the
    # default 32-token completions, too short for a worked GSM8K solution (the dataset's: 87 tokens at the median)
    assert (config.task.name, config.task.gym_dataset) == ("reasoning_gym", "gsm_symbolic")
    assert config.task.verifiers == {"reasoning_gym": 1.0}
    assert config.max_minutes is not None and config.max_minutes < 15
    assert config.rollout.max_new_tokens >= 128


def test_its_task_yields_gsm_symbolic_problems_whose_references_score_their_answers(config):
    # caught: prompts without a reference the scorer can re-create, or a held-out split smaller than eval.size (the
    # final evaluation would score fewer rows than the config says)
    task = build_task(config.task)
    held_out = task.eval_prompts(config.eval.size)
    train = list(islice(task.train_prompts(config.seed), 5))
    assert len(held_out) == config.eval.size and len(train) == 5
    assert not {p.reference for p in held_out} & {p.reference for p in train}
    verifier = ReasoningGymVerifier()
    for prompt in held_out[:3] + train[:2]:
        row = GymRow.from_reference(prompt.reference)
        assert row.dataset == "gsm_symbolic" and row.question in prompt.messages[-1]["content"]
        answer = make_dataset(row.dataset, row.config, row.seed, row.size)[row.index]["answer"]
        right = verifier.verify(f"<answer>{answer}</answer>", prompt.reference)
        wrong = verifier.verify(f"<answer>{int(float(answer)) + 1}</answer>", prompt.reference)
        assert (right.outcome, right.score) == (Outcome.CORRECT, 1.0), right.detail
        assert (wrong.outcome, wrong.score) == (Outcome.WRONG, 0.01), wrong.detail  # the dataset's partial credit


def test_it_trains_a_step_and_evaluates_as_shipped(config, tiny_model_dir, tmp_path):
    # only the model and the scale are overridden: the config's task, verifier and evaluation run end to end
    from rlvr.grpo.loop import train

    out = tmp_path / "run"
    train(load_config(SHIPPED, [f"model.name_or_path={tiny_model_dir}", f"output_dir={out}", "max_steps=1",
                                "rollout.group_size=2", "rollout.prompts_per_step=2", "rollout.max_new_tokens=8",
                                "optimizer.micro_batch_size=4", "eval.size=2", "samples_per_step=0"]))
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 1] and "eval/pass@1" in records[1]  # the step, then the final eval
