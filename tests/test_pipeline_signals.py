"""SIGTERM in any stage of a real pipeline ("must be true"): the stage checkpoints and the pipeline
stops; re-running the same recipe skips the finished stages and continues the interrupted one to the end.

Every stage runs its real command on the tiny random model. A random model is never right, so rejection
sampling would keep nothing for the next SFT stage: here `is_correct` accepts every sample (the selection
rule has its own tests in test_sampling.py); the pipeline's wiring is what is under test."""
from __future__ import annotations

import json
import os
import signal

import pytest
import yaml

from rlvr.pipeline import runner
from rlvr.pipeline.manifest import DONE, INTERRUPTED, load_manifest
from rlvr.pipeline.runner import run_recipe
from rlvr.pipeline.spec import load_recipe

TINY = {"rollout": {"group_size": 2, "prompts_per_step": 2, "max_new_tokens": 6},
        "optimizer": {"micro_batch_size": 4, "lr": 1e-3}, "reward": {"workers": 0}, "samples_per_step": 0}
STAGES = [
    {"name": "cold", "kind": "sft", "config": {"sft": {"data": "cold_start", "cold_start_size": 6, "batch_size": 2,
                                                       "epochs": 1}}},
    {"name": "rl", "kind": "grpo", "config": {"max_steps": 3}},
    {"name": "rs", "kind": "sample", "config": {"sample": {"samples": 2, "prompts": 4, "batch_size": 2}}},
    {"name": "sft2", "kind": "sft", "config": {"sft": {"batch_size": 2, "epochs": 1}}},
]
# where the signal is sent, by stage: inside an optimizer step (sft, grpo), inside generation (sample)
HOOKS = {"cold": ("rlvr.sft.trainer", "train_step"), "rl": ("rlvr.grpo.loop", "grpo_step"),
         "rs": ("rlvr.rollout.hf.HFRolloutEngine", "generate"), "sft2": ("rlvr.sft.trainer", "train_step")}


@pytest.fixture
def recipe_file(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setattr("rlvr.sampling.run.is_correct", lambda candidate, weights: True)
    monkeypatch.setattr("rlvr.sampling.select.is_correct", lambda candidate, weights: True)
    data = {"base": {"model": {"name_or_path": str(tiny_model_dir)}, **TINY},
            "evaluation": {"eval": {"size": 2, "samples": 2, "ks": [1, 2], "greedy": False}}, "stages": STAGES}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def sigterm_once_inside(monkeypatch, target: str):
    """Wrap the hooked function so its first call in the target stage sends this process a SIGTERM."""
    module_name, attribute = HOOKS[target]
    owner = _resolve(module_name)
    original, state = getattr(owner, attribute), {"armed": False}

    def wrapped(*args, **kwargs):
        result = original(*args, **kwargs)
        if state.pop("armed", False):
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(owner, attribute, wrapped)
    real = runner.STAGE_RUNNERS.copy()
    for kind, run in real.items():
        def arming(config, directory, run=run):
            if directory.name.endswith(f"-{target}"):
                state["armed"] = True
            return run(config, directory)
        monkeypatch.setitem(runner.STAGE_RUNNERS, kind, arming)


def _resolve(dotted: str):
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


def count_calls(monkeypatch) -> list[str]:
    ran: list[str] = []
    for kind, run in runner.STAGE_RUNNERS.copy().items():
        def counting(config, directory, run=run):
            ran.append(directory.name)
            return run(config, directory)
        monkeypatch.setitem(runner.STAGE_RUNNERS, kind, counting)
    return ran


def count_steps_in(monkeypatch, target: str) -> list[int]:
    """Calls of the target stage's hooked function (its optimizer step, or generate), one count per attempt."""
    module_name, attribute = HOOKS[target]
    owner = _resolve(module_name)
    original, counts, active = getattr(owner, attribute), [], [False]

    def counted(*args, **kwargs):
        if active[0]:
            counts[-1] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, attribute, counted)
    for kind, run in runner.STAGE_RUNNERS.copy().items():
        def tracking(config, directory, run=run):
            mine = directory.name.endswith(f"-{target}")
            if mine:
                counts.append(0)
            active[0] = mine
            try:
                return run(config, directory)
            finally:
                active[0] = False
        monkeypatch.setitem(runner.STAGE_RUNNERS, kind, tracking)
    return counts


@pytest.mark.parametrize("target", ["cold", "rl", "rs", "sft2"])
def test_sigterm_in_any_stage_then_rerun_continues(recipe_file, tmp_path, monkeypatch, target):
    run_dir = tmp_path / "run"
    attempts = count_steps_in(monkeypatch, target)
    with monkeypatch.context() as patch:
        sigterm_once_inside(patch, target)
        first = run_recipe(load_recipe(recipe_file), run_dir, say=lambda _: None)
    index = [s["name"] for s in STAGES].index(target)
    assert [s.status for s in first.stages][:index + 1] == [DONE] * index + [INTERRUPTED]
    assert not first.finished
    before = {s.name: s.eval for s in first.stages if s.status == DONE}
    ran = count_calls(monkeypatch)
    second = run_recipe(load_recipe(recipe_file), run_dir, say=lambda _: None)
    assert ran == [f"{i + 1:02d}-{s['name']}" for i, s in enumerate(STAGES)][index:]  # finished: not redone
    assert second.finished and [s.status for s in second.stages] == [DONE] * len(STAGES)
    assert {s.name: s.eval for s in second.stages if s.name in before} == before  # evaluations kept as they were
    stage = second.stage(target)
    if stage.kind in ("sft", "grpo"):  # continued from its checkpoint: every step logged exactly once
        steps = [json.loads(line)["step"] for line in (tmp_path / stage.directory / "metrics.jsonl").read_text()
                 .splitlines() if "loss" in line]
        assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 2
        # ... and only the steps after it ran again: a stage restarted from scratch would log the
        # same step numbers, but run all of its steps a second time
        assert len(attempts) == 2 and attempts[0] >= 1 and attempts[1] == len(steps) - attempts[0], attempts
    else:  # sampling continued from its progress file: the dataset has a row per prompt done
        report = json.loads((tmp_path / stage.directory / "report.json").read_text())
        assert report["prompts_done"] == 4
    assert load_manifest(run_dir).finished and (run_dir / "summary.md").is_file()


def test_sigterm_during_an_evaluation_keeps_the_stage_and_redoes_only_the_eval(recipe_file, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    from rlvr.evaluation.evaluate import evaluate_model

    def evaluator(config, model):
        result = evaluate_model(config, model).as_json()
        if model.endswith("02-rl/final"):
            os.kill(os.getpid(), signal.SIGTERM)  # the pipeline's own handler: this eval finishes, then it stops
        return result

    first = run_recipe(load_recipe(recipe_file), run_dir, evaluator=evaluator, say=lambda _: None)
    assert [s.status for s in first.stages][:3] == [DONE, DONE, "pending"] and first.stage("rl").eval is not None
    ran = count_calls(monkeypatch)
    run_recipe(load_recipe(recipe_file), run_dir, say=lambda _: None)
    assert ran == ["03-rs", "04-sft2"]
