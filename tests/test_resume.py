"""Exact resume on the tiny model: a run stopped by a real SIGTERM and resumed ends with the same
weights and AdamW state (torch.equal on every tensor) and saw the same prompts and completions as an
uninterrupted run; also after two stops. The tiny random model never earns a reward, so an entropy bonus moves
its weights: each comparison first asserts that they moved, or two copies of the untouched model would match
. Plus the step guard (NaN loss / NaN gradient: the step is a no-op), the run-directory lock, the
RNG round trip (numpy included) and resume refusals."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr.cli.main import main
from rlvr.config.run import ConfigError, load_config

STEPS = 8  # tiny steps take ~0.1 s: room for each SIGTERM to land before the last step


def overrides(model_dir: Path, out: Path) -> list[str]:
    return [f"model.name_or_path={model_dir}", f"output_dir={out}", f"max_steps={STEPS}", "rollout.group_size=4",
            "rollout.prompts_per_step=2", "rollout.max_new_tokens=8", "optimizer.micro_batch_size=4",
            "optimizer.lr=1e-3", "eval.at_end=false", "samples_per_step=8", "threads=1", "reward.workers=1",
            # every group ties at reward 0 (zero advantages): the bonus is what moves the weights
            "algorithm.entropy_coef=0.1"]


def train_process(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rlvr.cli.main", "train", *args], stdout=subprocess.PIPE,
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


def last_state(run: Path) -> dict:
    """The final checkpoint's trainer state: AdamW, RNG, curriculum and critic after the last step."""
    return torch.load(run / "checkpoints" / f"step-{STEPS:06d}" / "trainer_state.pt", weights_only=False)


def assert_identical(a, b, where: str = "") -> None:
    """Nested dicts / lists / tuples of tensors and plain values, equal bit for bit (torch.equal)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            assert_identical(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


class Background:
    """A straight run started at once and waited for only when its directory is read: it trains on the second core
    while the test's own stopped run trains on the first (each run is threads=1, so neither changes the other)."""

    def __init__(self, args: list[str], out: Path) -> None:
        self.proc, self.out = train_process(args), out

    def run_dir(self) -> Path:
        if self.proc.returncode is None:
            finish(self.proc)
        assert self.proc.returncode == 0, "the straight run failed (its output is in the first test that read it)"
        return self.out

    def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture(scope="module")
def straight(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("resume") / "straight"
    background = Background(overrides(tiny_model_dir, out), out)
    yield background
    background.stop()


@pytest.fixture(scope="module")
def reference_run(straight) -> Path:
    return straight.run_dir()


def assert_same_run(resumed: Path, straight: Path, initial: Path) -> None:
    a, b, start = weights(straight), weights(resumed), load_file(initial / "model.safetensors")
    moved = max((a[k] - start[k]).abs().max().item() for k in start)
    assert moved > 1e-4, f"the weights moved by {moved:.3g} only: comparing them would prove nothing"
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    one, two = last_state(straight), last_state(resumed)
    assert_identical(one["optimizer"], two["optimizer"], "optimizer")  # AdamW's moments and step counts
    assert_identical(one["critic"], two["critic"], "critic")  # model + its AdamW (None without a critic)
    assert_identical(one["curriculum"], two["curriculum"], "curriculum")
    assert_identical([one["rng"][k] for k in ("python", "torch")], [two["rng"][k] for k in ("python", "torch")])
    assert trace(resumed) == trace(straight)  # the same prompts, in order, and the same sampled completions
    steps = [json.loads(line)["step"] for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, STEPS + 1))  # no duplicate or missing step
    groups = [json.loads(line)["step"] for line in (resumed / "groups.jsonl").read_text().splitlines()]
    assert groups == list(range(1, STEPS + 1))  # the group view's log is cut back to the checkpoint too


def test_sigterm_then_resume_is_bit_exact(tiny_model_dir, tmp_path, straight):
    out = tmp_path / "stopped"
    stop_after_first_steps(train_process(overrides(tiny_model_dir, out)), out / "metrics.jsonl", 1)
    assert list((out / "checkpoints").glob("step-*/COMPLETE"))
    finish(train_process(["--resume", str(out)]))
    assert_same_run(out, straight.run_dir(), tiny_model_dir)


def test_two_stops_and_resumes_are_bit_exact(tiny_model_dir, tmp_path, reference_run):
    out = tmp_path / "stopped-twice"
    stop_after_first_steps(train_process(overrides(tiny_model_dir, out)), out / "metrics.jsonl", 1)
    stop_after_first_steps(train_process(["--resume", str(out)]), out / "metrics.jsonl", 4)
    finish(train_process(["--resume", str(out), "checkpoint.resume_force=false"]))
    assert_same_run(out, reference_run, tiny_model_dir)


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

    from rlvr.training.update import train_step
    from test_update import make_batch, settings, tiny_llama  # the hand-built batch of the update tests

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
    # multi-turn episodes: the environments replay, the turns' seeds come from the checkpointed RNG
    ["task.name=calculator", "task.one_shot=false", "episode.list_tools=false", "episode.max_turns=2",
     "episode.tokens_per_turn=6", "episode.tokens_per_episode=40", "episode.credit=process", "curriculum.enabled=true",
     "rollout.dynamic_sampling.enabled=true"],
    ["task.name=filesystem", "task.one_shot=false", "episode.list_tools=false", "episode.max_turns=2",
     "episode.tokens_per_turn=6", "episode.tokens_per_episode=40", "episode.partial_credit=true",
     "algorithm.advantage=gae", "algorithm.aggregation=token_mean", "algorithm.kl_placement=reward",
     "algorithm.kl_estimator=k1"],
], ids=["curriculum+dynamic_sampling", "ppo_critic", "episodes+process_credit", "episodes+ppo_critic"])
def test_stateful_variants_resume_bit_exact(tiny_model_dir, tmp_path, variant):
    stopped = tmp_path / "stopped"
    straight = Background([*overrides(tiny_model_dir, tmp_path / "straight"), *variant], tmp_path / "straight")
    try:
        stop_after_first_steps(train_process([*overrides(tiny_model_dir, stopped), *variant]),
                               stopped / "metrics.jsonl", 2)
        finish(train_process(["--resume", str(stopped)]))
        assert_same_run(stopped, straight.run_dir(), tiny_model_dir)
    finally:
        straight.stop()
    critic = last_state(straight.out)["critic"]
    if critic is not None:  # PPO: the critic trained (its head starts at 0), so its match is not vacuous either
        assert critic["model"]["head.weight"].abs().max() > 0


def test_resume_with_another_thread_count_is_one_clear_error(reference_run, capsys):
    # threads=1 ran; 2 threads would split the CPU kernels' sums differently (the reason the error gives). One step
    # further than it ran: a resume of the finished run as it was says it is finished and trains nothing (FINISHED)
    assert main(["train", "--resume", str(reference_run), "threads=2", f"max_steps={STEPS + 1}"]) == 2
    err = capsys.readouterr().err
    assert err.count("rlvr: error:") == 1 and "threads: 1 -> 2 (torch's CPU kernels split their sums" in err
    assert "checkpoint.resume_force=true" in err  # the way to go on anyway is named too


def test_rng_state_round_trip_includes_numpy(tmp_path):
    import numpy

    from rlvr.checkpoint.state import TrainerState, load_state, restore_rng, rng_state, save_state

    random.seed(1), numpy.random.seed(2), torch.manual_seed(3)
    saved = TrainerState(step=1, prompts_drawn=0, rng=rng_state(), optimizer={}, scheduler={}, elapsed_s=0.0)
    save_state(saved, tmp_path)
    expected = (random.random(), numpy.random.rand(3).tolist(), torch.rand(3))
    random.seed(9), numpy.random.seed(9), torch.manual_seed(9)  # what a fresh process would draw instead
    assert numpy.random.rand(3).tolist() != expected[1]
    restore_rng(load_state(tmp_path).rng)
    again = (random.random(), numpy.random.rand(3).tolist(), torch.rand(3))
    assert again[:2] == expected[:2] and torch.equal(again[2], expected[2])


def test_a_second_trainer_on_a_running_run_is_refused_and_the_first_goes_on(tiny_model_dir, tmp_path, capsys):
    from rlvr.checkpoint.resume import hold_run_lock

    out = tmp_path / "busy"
    # no checkpoint is pruned, so the second one never reads a checkpoint that the first deletes meanwhile
    first = train_process([*overrides(tiny_model_dir, out), "max_steps=500", "save_every=1",
                           "checkpoint.save_total_limit=1000"])
    try:
        deadline = time.monotonic() + 240
        while not list((out / "checkpoints").glob("step-*/COMPLETE")) and time.monotonic() < deadline:
            time.sleep(0.05)
        # max_steps=1: were the second one let in, it would end at once instead of training beside the first
        assert main(["train", "--resume", str(out), "max_steps=1"]) == 2
        err = capsys.readouterr().err
        assert err.count("rlvr: error:") == 1 and f"{out} is in use by another rlvr process" in err
        assert first.poll() is None  # the first trainer runs on
        stop_after_first_steps(first, out / "metrics.jsonl", 1)
    finally:
        first.kill()
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, len(steps) + 1))  # its logs were not cut back by the refused one
    os.close(hold_run_lock(out))  # released when the first exited
    # a trainer killed outright leaves no stale lock: the kernel drops a flock with its process
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from rlvr.checkpoint.resume import hold_run_lock; hold_run_lock(Path(sys.argv[1])); "
                               "print('locked', flush=True); time.sleep(300)", str(out)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError, match="in use by another rlvr process"):
            hold_run_lock(out)
    finally:
        holder.kill()
        holder.wait()
    os.close(hold_run_lock(out))
