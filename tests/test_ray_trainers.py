"""Trainer ranks as Ray actors on a local two-CPU Ray cluster: `rlvr train ray.enabled=true
ray.trainer_ranks=2` trains exactly as torchrun's two ranks do (the same final parameters, torch.equal, one run
directory, SIGTERM and resume), and a failing rank is one clear error that leaves no actor or reservation behind."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

ray = pytest.importorskip("ray")

from rlvr.cli.main import main  # noqa: E402
from rlvr.cluster import trainers  # noqa: E402
from rlvr.cluster.trainers import RankPlace, drives_ranks, order_ranks, rank_environments  # noqa: E402
from rlvr.config.base import ConfigError  # noqa: E402
from rlvr.errors import UserFacingError  # noqa: E402
from rlvr.grpo.loop import train  # noqa: E402
from test_distributed import ROOT, _env, _tiny_train_args, _torchrun, gloo  # noqa: E402

RAY_RANKS = ("ray.enabled=true", "ray.trainer_ranks=2", "distributed.backend=gloo")
MOVING = ("algorithm.entropy_coef=0.05",)  # no completion earns a reward: the entropy bonus moves the weights


@pytest.fixture(scope="module")
def cluster():
    # Started by the test, so `rlvr train` joins it (session.acquire) and the test can see what is left on it.
    ray.init(num_cpus=2, object_store_memory=200 * 1024 * 1024, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@dataclass
class StoppedRun:
    """A Ray-ranks run stopped by SIGTERM, then resumed one step further."""

    out: Path
    returncode: int
    output: str  # the driver's output up to the stop
    saved: list[int]  # the checkpoints' steps after the stop
    cpus_free: bool  # after the stop, before the resume
    resumed_rc: int


@pytest.fixture(scope="module")
def stopped_run(tiny_model_dir, tmp_path_factory, cluster) -> StoppedRun:
    """`rlvr train` in its own process, joining this cluster by address as on a real one, SIGTERM after its first
    step, then `--resume` to one step after the checkpoint (wherever the signal landed: the driver polls every
    0.5 s, so some steps later)."""
    cwd = tmp_path_factory.mktemp("stopped")
    out, address = cwd / "run", ray.get_runtime_context().gcs_address
    argv = ["-m", "rlvr", "train", *_tiny_train_args(tiny_model_dir, out, *MOVING, *RAY_RANKS, "max_steps=500",
                                                      f"ray.address={address}")]
    driver = subprocess.Popen([sys.executable, *argv], cwd=cwd, env={**_env(), "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert _wait_for_steps(out / "metrics.jsonl", 1, driver), "no step logged within the deadline"
        driver.send_signal(signal.SIGTERM)
        output, _ = driver.communicate(timeout=120)
    finally:
        driver.kill()
    saved = [int(p.name.split("-")[1]) for p in (out / "checkpoints").iterdir()]
    cpus_free = _all_cpus_free_again()
    resumed_rc = main(["train", "--resume", str(out), f"max_steps={saved[0] + 1}"]) if saved else -1
    return StoppedRun(out, driver.returncode, output, saved, cpus_free, resumed_rc)


@pytest.fixture(scope="module")
def torchrun_reference(tiny_model_dir, tmp_path_factory, stopped_run) -> Path:
    """torchrun's two gloo ranks on the same config, as many steps as the resumed run: the weights the Ray ranks
    must reach, in both Ray tests (one torchrun launch for both)."""
    cwd = tmp_path_factory.mktemp("torchrun")
    out, steps = cwd / "run", stopped_run.saved[0] + 1
    _torchrun(["-m", "rlvr", "train", *_tiny_train_args(tiny_model_dir, out, *MOVING, f"max_steps={steps}")], cwd=cwd)
    return out


def _assert_same_weights_as_torchrun(run: Path, reference: Path, initial: Path) -> None:
    """torch.equal on every tensor (both launchers run the same ranks: same seeds, prompt shares, reduction
    order), after asserting that the weights moved, or the comparison would prove nothing."""
    mine, theirs = load_file(run / "final" / "model.safetensors"), load_file(reference / "final" / "model.safetensors")
    start = load_file(initial / "model.safetensors")
    assert set(mine) == set(theirs) == set(start)
    moved = max((theirs[k] - start[k]).abs().max().item() for k in start)
    assert moved > 1e-4, f"the weights moved by {moved:.3g} only"
    different = [k for k in mine if not torch.equal(mine[k], theirs[k])]
    assert not different, f"{len(different)} tensors differ from torchrun's, e.g. {different[0]}"


def _all_cpus_free_again(deadline_s: float = 30.0) -> bool:
    """Killed actors and a removed placement group hand their CPUs back asynchronously."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if ray.available_resources().get("CPU", 0.0) == ray.cluster_resources()["CPU"]:
            return True
        time.sleep(0.2)
    return False


def test_ranks_get_torchruns_environment_node_by_node():
    # bundles placed out of order across two GPU nodes: ranks go node by node, GPUs in id order within a node
    places = [RankPlace(0, "node-b", "10.0.0.2", ("3",), 11), RankPlace(1, "node-a", "10.0.0.1", ("1",), 12),
              RankPlace(2, "node-b", "10.0.0.2", ("0",), 13), RankPlace(3, "node-a", "10.0.0.1", ("0",), 14)]
    launches = rank_environments(order_ranks(places), 29511)
    assert [x.place.pid for x in launches] == [13, 11, 14, 12]  # node-b first (bundle 0 is there), then node-a
    assert [(x.env["RANK"], x.env["LOCAL_RANK"], x.env["LOCAL_WORLD_SIZE"]) for x in launches] == [
        ("0", "0", "2"), ("1", "1", "2"), ("2", "0", "2"), ("3", "1", "2")]
    assert {x.env["MASTER_ADDR"] for x in launches} == {"10.0.0.2"}  # rank 0's node
    assert {(x.env["WORLD_SIZE"], x.env["MASTER_PORT"]) for x in launches} == {("4", "29511")}
    # LOCAL_RANK indexes the node's trainer GPUs: torch.cuda.set_device(LOCAL_RANK) is the actor's own GPU
    for x in launches:
        visible = x.env["CUDA_VISIBLE_DEVICES"].split(",")
        assert visible[int(x.env["LOCAL_RANK"])] == x.place.gpu_ids[0]
    cpu_only = rank_environments(order_ranks([RankPlace(1, "n", "h", (), 2), RankPlace(0, "n", "h", (), 1)]), 1)
    assert [x.place.bundle for x in cpu_only] == [0, 1] and "CUDA_VISIBLE_DEVICES" not in cpu_only[0].env


def test_signals_stop_gracefully_once_the_ranks_train_and_at_once_otherwise():
    with trainers.StopSignals() as signals:
        with pytest.raises(KeyboardInterrupt):  # still placing the ranks: nothing to checkpoint, stop now
            signal.raise_signal(signal.SIGTERM)
    with trainers.StopSignals() as signals:
        signals.graceful = True
        signal.raise_signal(signal.SIGINT)
        assert signals.pending and signals.received == ["SIGINT"]  # the wait loop passes it on to rank 0
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is not signals._handle  # the previous handlers are back


def test_the_driver_says_where_rank_zero_left_the_run(tmp_path):
    run = tmp_path / "run"
    stopped = trainers.rank_zero_outcome(str(run / "checkpoints" / "step-000007"), ["SIGTERM"])
    assert stopped == (f"rlvr: the trainer ranks stopped on SIGTERM; checkpoint {run}/checkpoints/step-000007 "
                       f"saved. Resume with: rlvr train --resume {run}")
    # a signal during the last step: the run simply finished (grpo/loop.py), nothing to resume
    for received in (["SIGINT"], []):
        assert trainers.rank_zero_outcome(str(run / "final"), received) == (
            f"rlvr: the trainer ranks finished; rank 0 saved {run}/final")


def test_a_bundle_no_single_node_can_hold_is_refused():
    class TwoNodes:  # the part of Ray's API the check reads: 8 CPUs in all, 4 on each node
        @staticmethod
        def nodes():
            return [{"Alive": True, "Resources": {"CPU": 4.0}}, {"Alive": True, "Resources": {"CPU": 4.0}}]

    trainers._check_a_node_fits(TwoNodes, {"CPU": 4.0})
    with pytest.raises(trainers.RayBackendError, match="no Ray node can hold one trainer rank's"):
        trainers._check_a_node_fits(TwoNodes, {"CPU": 6.0})


def test_torchrun_with_ray_trainer_ranks_is_one_clear_error(tiny_model_dir, tmp_path, monkeypatch, capsys):
    assert not drives_ranks(1, {"WORLD_SIZE": "2"})
    assert drives_ranks(2, {})
    with pytest.raises(ConfigError, match="WORLD_SIZE=2 ranks"):
        drives_ranks(2, {"WORLD_SIZE": "2"})
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setattr(trainers, "acquire", _no_ray)
    out = tmp_path / "run"
    assert main(["train", *_tiny_train_args(tiny_model_dir, out, *RAY_RANKS)]) == 2
    err = capsys.readouterr().err
    assert err.count("rlvr: error:") == 1 and "torchrun" in err and "ray.trainer_ranks=1" in err
    assert not out.exists()


def test_what_the_ranks_would_refuse_is_refused_before_ray_starts(tiny_model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(trainers, "acquire", _no_ray)
    out = tmp_path / "run"
    assert main(["train", *_tiny_train_args(tiny_model_dir, out, *RAY_RANKS, "rollout.prompts_per_step=3")]) == 2
    err = capsys.readouterr().err
    assert err.count("rlvr: error:") == 1 and "divisible by the number of ranks (2)" in err
    assert not out.exists()


def _no_ray(address):
    raise AssertionError("refused too late: the driver already went for the Ray cluster")


@gloo
def test_ray_ranks_train_as_torchrun_ranks(tiny_model_dir, tmp_path, cluster, stopped_run, torchrun_reference,
                                           monkeypatch):
    """Same config, same two gloo DDP ranks: the final parameters of the Ray run equal, bit for bit, the torchrun
    run's (each rank's sampling seed, prompt share and gradient sum are those of its torchrun rank)."""
    ray_out, steps = tmp_path / "ray", stopped_run.saved[0] + 1
    monkeypatch.chdir(tmp_path)  # the ranks work in the driver's directory: a rank claiming runs/ would show
    assert main(["train", *_tiny_train_args(tiny_model_dir, ray_out, *MOVING, *RAY_RANKS, f"max_steps={steps}")]) == 0
    _check_one_run_directory(ray_out, tmp_path, list(range(1, steps + 1)))
    _assert_same_weights_as_torchrun(ray_out, torchrun_reference, tiny_model_dir)
    assert _all_cpus_free_again()  # both actors and their placement group are gone


@gloo
def test_sigterm_stops_the_ranks_at_a_checkpoint_and_resume_continues(tiny_model_dir, stopped_run, torchrun_reference):
    """SIGTERM to the driver reaches the ranks (finish the step, checkpoint, exit 0, as under torchrun), no actor
    is left, and `--resume` starts two ranks again from the run's own config and goes on from the checkpoint: one
    step more gives torchrun's weights after that step, bit for bit (a resume that lost the weights, AdamW or a
    rank's RNG would not)."""
    run, output = stopped_run, stopped_run.output
    assert run.returncode == 0, output[-3000:]
    assert "SIGTERM passed on to trainer rank 0" in output
    # the driver's own line (the rank's "SIGTERM received" comes through Ray's log forwarding, late or not at all)
    step_dir = run.out / "checkpoints" / f"step-{run.saved[0]:06d}"
    assert (f"the trainer ranks stopped on SIGTERM; checkpoint {step_dir} saved. Resume with: rlvr train --resume "
            f"{run.out}\n") in output
    assert output.count("run directory:") == 1  # the ranks' output reaches the driver; rank 0 alone opened it
    assert len(run.saved) == 1 and 1 <= run.saved[0] < 500
    state = torch.load(run.out / "checkpoints" / f"step-{run.saved[0]:06d}" / "trainer_state.pt", weights_only=False)
    assert state["extra"]["world_size"] == 2 and len(state["extra"]["rank_rng"]) == 2  # both ranks' streams
    assert run.cpus_free and run.resumed_rc == 0
    rows = [json.loads(line) for line in (run.out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, run.saved[0] + 2))  # each step once, then one more
    _assert_same_weights_as_torchrun(run.out, torchrun_reference, tiny_model_dir)
    assert _all_cpus_free_again()


def _check_one_run_directory(out: Path, cwd: Path, steps: list[int]) -> None:
    """As test_distributed._check_run, less its stdout check (this driver's actors print to the Ray logs)."""
    assert (out / "final" / "config.json").is_file() and (out / "config.yaml").is_file()
    assert not list(cwd.glob("runs")), "a second rank claimed a run directory of its own"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == steps  # written once, by rank 0
    for row in rows:  # 2 prompts x G=4 = 8 completions per step, 4 on each rank: the global batch's counts
        assert sum(v for k, v in row.items() if k.startswith("outcomes/math/")) == 8
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len({s["prompt_id"] for s in samples if s["step"] == 1}) == 2  # both ranks' prompts are in the samples


def _wait_for_steps(metrics: Path, steps: int, driver: subprocess.Popen, deadline_s: float = 120.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and driver.poll() is None:
        if metrics.is_file() and metrics.read_text().count("\n") >= steps:
            return True
        time.sleep(0.2)
    return False


def test_a_failing_rank_is_one_error_and_leaves_nothing_behind(tiny_model_dir, tmp_path, cluster, monkeypatch):
    """Rank 1 gets a RANK outside WORLD_SIZE (a bad setting found inside the rank, before any process group):
    it raises at once while rank 0 waits for it at the rendezvous. The driver reports rank 1's error and kills
    rank 0, whose wait would otherwise last torch's 30-minute store timeout."""
    real = trainers.rank_environments

    def rank_one_misconfigured(ordered, port):
        launches = real(ordered, port)
        launches[1].env["RANK"] = "7"
        return launches

    monkeypatch.setattr(trainers, "rank_environments", rank_one_misconfigured)
    out = tmp_path / "run"
    started = time.monotonic()
    with pytest.raises(trainers.RayBackendError) as err:
        trainers.drive_trainer_ranks(_driver_config(tiny_model_dir, out), train)
    assert time.monotonic() - started < 60
    message = str(err.value)
    assert message.startswith("trainer rank 1 of 2") and "DistributedError" in message and "RANK=7" in message
    assert issubclass(err.type, UserFacingError)  # rlvr/cli/main.py prints it as one `rlvr: error:` line
    assert _all_cpus_free_again() and not out.exists()


def test_ranks_that_cannot_be_placed_are_refused_at_once(tiny_model_dir, tmp_path, cluster):
    out = tmp_path / "run"
    on_gpus = ["ray.trainer_gpus=1", "model.device=cuda", "distributed.backend=auto"]  # this cluster has none
    for extra, expected in ((["ray.trainer_cpus=2"], "CPU"), (on_gpus, "GPU")):
        started = time.monotonic()
        with pytest.raises(trainers.RayBackendError, match=expected):
            trainers.drive_trainer_ranks(_driver_config(tiny_model_dir, out, *extra), train)
        assert time.monotonic() - started < 10  # refused, not waited for
    assert _all_cpus_free_again() and not out.exists()


def _driver_config(model_dir: Path, out: Path, *extra: str):
    from rlvr.config.run import load_config

    return load_config(None, _tiny_train_args(model_dir, out, *RAY_RANKS, *extra))
