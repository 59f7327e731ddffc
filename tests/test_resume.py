"""Exact resume (issue #9) on the tiny model: a run stopped by a real SIGTERM and resumed ends with the same
weights (torch.equal on every tensor) and saw the same prompts and completions as an uninterrupted run; also
after two stops. Plus the step guard (NaN loss / NaN gradient: the step is a no-op) and resume refusals."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr.config import ConfigError, load_config

STEPS = 8  # tiny steps take ~0.1 s: room for each SIGTERM to land before the last step


def overrides(model_dir: Path, out: Path) -> list[str]:
    return [f"model.name_or_path={model_dir}", f"output_dir={out}", f"max_steps={STEPS}", "rollout.group_size=4",
            "rollout.prompts_per_step=2", "rollout.max_new_tokens=8", "optimizer.micro_batch_size=4",
            "optimizer.lr=1e-3", "eval.at_end=false", "samples_per_step=8", "threads=1", "reward.workers=1"]


def train_process(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rlvr.cli", "train", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    return out


def stop_after_first_steps(proc: subprocess.Popen, metrics: Path, steps_done: int) -> str:
    """SIGTERM once `steps_done` steps are logged, i.e. while the next step runs."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if metrics.is_file() and len(metrics.read_text().splitlines()) >= steps_done:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out = finish(proc)
    assert "checkpoint saved. Resume with: rlvr train --resume" in out, out
    return out


def trace(run: Path) -> list[tuple]:
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    return [(r["step"], r["prompt_id"], r["completion"]) for r in rows]


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(run / "final" / "model.safetensors")


@pytest.fixture(scope="module")
def reference_run(tiny_model_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("resume") / "straight"
    finish(train_process(overrides(tiny_model_dir, out)))
    return out


def assert_same_run(resumed: Path, straight: Path) -> None:
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert trace(resumed) == trace(straight)  # the same prompts, in order, and the same sampled completions
    steps = [json.loads(line)["step"] for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, STEPS + 1))  # no duplicate or missing step
    groups = [json.loads(line)["step"] for line in (resumed / "groups.jsonl").read_text().splitlines()]
    assert groups == list(range(1, STEPS + 1))  # the group view's log is cut back to the checkpoint too


def test_sigterm_then_resume_is_bit_exact(tiny_model_dir, tmp_path, reference_run):
    out = tmp_path / "stopped"
    stop_after_first_steps(train_process(overrides(tiny_model_dir, out)), out / "metrics.jsonl", 1)
    assert list((out / "checkpoints").glob("step-*/COMPLETE"))
    finish(train_process(["--resume", str(out)]))
    assert_same_run(out, reference_run)


def test_two_stops_and_resumes_are_bit_exact(tiny_model_dir, tmp_path, reference_run):
    out = tmp_path / "stopped-twice"
    stop_after_first_steps(train_process(overrides(tiny_model_dir, out)), out / "metrics.jsonl", 1)
    stop_after_first_steps(train_process(["--resume", str(out)]), out / "metrics.jsonl", 4)
    finish(train_process(["--resume", str(out), "checkpoint.resume_force=false"]))
    assert_same_run(out, reference_run)


def test_resume_refuses_a_config_that_breaks_exactness(tiny_model_dir, reference_run):
    from rlvr.checkpoint.resume import open_run

    config = load_config(reference_run / "config.yaml", [f"checkpoint.resume={reference_run}",
                                                          "rollout.group_size=2", "max_steps=9"])
    with pytest.raises(ConfigError, match=r"rollout.group_size: 4 -> 2") as err:
        open_run(config, None)
    assert "max_steps" not in str(err.value)  # running longer is allowed
    config.checkpoint.resume_force = True
    run_dir, checkpoint = open_run(config, None)
    assert run_dir == reference_run and checkpoint.step == STEPS


def test_resume_auto_starts_fresh_then_continues(tiny_model_dir, tmp_path):
    from rlvr.checkpoint.resume import open_run

    out = tmp_path / "auto"
    config = load_config(None, [*overrides(tiny_model_dir, out), "checkpoint.resume=auto"])
    run_dir, checkpoint = open_run(config, None)
    assert run_dir == out and checkpoint is None  # new directory: a fresh run, claimed
    (out / "config.yaml").write_text("seed: 0\n")
    with pytest.raises(ConfigError, match="no complete checkpoint"):
        open_run(config, None)


def test_nan_loss_and_nan_gradient_leave_the_step_a_no_op():
    from dataclasses import replace

    from test_update import make_batch, settings, tiny_llama  # the hand-built batch of the update tests
    from rlvr.update import train_step

    policy = tiny_llama()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    batch, s = make_batch(policy, with_ref=True, with_old=False), settings(4)
    assert train_step(policy, batch, optimizer, s, scheduler).skipped == 0.0  # one real step first
    before = ({k: v.clone() for k, v in policy.state_dict().items()},
              {k: v.clone() for k, v in optimizer.state_dict()["state"][0].items()}, scheduler.last_epoch)

    nan_loss = replace(batch, advantages=torch.full_like(batch.advantages, float("nan")))  # injected into the loss
    stats = train_step(policy, nan_loss, optimizer, s, scheduler)
    hook = next(policy.parameters()).register_hook(lambda g: torch.full_like(g, float("nan")))  # into a gradient
    stats_grad = train_step(policy, batch, optimizer, s, scheduler)
    hook.remove()
    assert stats.skipped == 1.0 and stats_grad.skipped == 1.0
    assert all(torch.equal(before[0][k], v) for k, v in policy.state_dict().items())
    assert all(torch.equal(before[1][k], v) for k, v in optimizer.state_dict()["state"][0].items())
    assert scheduler.last_epoch == before[2]
    assert train_step(policy, batch, optimizer, s, scheduler).skipped == 0.0  # and training goes on


@pytest.mark.parametrize("variant", [
    ["curriculum.enabled=true", "curriculum.revisit_probability=0.5", "rollout.dynamic_sampling.enabled=true"],
    ["algorithm.advantage=gae", "algorithm.aggregation=token_mean", "algorithm.updates_per_batch=2",
     "algorithm.kl_placement=reward", "algorithm.kl_estimator=k1"],  # PPO: the critic and its AdamW resume too
], ids=["curriculum+dynamic_sampling", "ppo_critic"])
def test_stateful_variants_resume_bit_exact(tiny_model_dir, tmp_path, variant):
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    finish(train_process([*overrides(tiny_model_dir, straight), *variant]))
    stop_after_first_steps(train_process([*overrides(tiny_model_dir, stopped), *variant]), stopped / "metrics.jsonl", 2)
    finish(train_process(["--resume", str(stopped)]))
    assert_same_run(stopped, straight)
