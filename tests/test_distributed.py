"""torchrun DDP and FSDP2 on this CPU with gloo: two ranks give the single process's parameters.

The two-process tests launch `python -m torch.distributed.run --nproc_per_node 2` and skip where
torch.distributed or gloo is missing.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr.cli.main import main
from rlvr.config.run import load_config
from rlvr.distributed.checks import problems
from rlvr.distributed.context import SINGLE, DistContext, DistributedError, from_env
from rlvr.distributed.state import check_strategy

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "distributed_worker.py"
gloo = pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                          reason="torch.distributed with gloo is not available in this torch build")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    return {**env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def _torchrun(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    # A collective that one rank never joins hangs both: the timeout turns that into a failure.
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
    done = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    # the workers' tracebacks, and a C++ abort's one line (the SIGABRT of rlvr/distributed/exit.py printed only that)
    ranks = [line for line in done.stderr.splitlines() if line.startswith("[rank") or "terminate called" in line
             or "what():" in line]
    assert done.returncode == 0, "\n".join([done.stdout[-2000:], *ranks[-40:], done.stderr[-1500:]])
    return done


CASES = [("ddp", "token_mean"), ("fsdp2", "sequence_mean")]


@pytest.fixture(scope="module")
def update_results(tiny_model_dir, tmp_path_factory) -> Path:
    """One two-rank launch runs both strategies; the single-process references run in this process."""
    out = tmp_path_factory.mktemp("update")
    _torchrun([str(WORKER), str(tiny_model_dir), ",".join(f"{s}:{a}" for s, a in CASES), str(out)], cwd=ROOT)
    spec = importlib.util.spec_from_file_location("distributed_worker", WORKER)
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    saved = {k: os.environ.pop(k) for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK") if k in os.environ}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the ranks (OMP_NUM_THREADS=1); a tiny model's ops only wait on a second thread
    try:  # no WORLD_SIZE: one process, nothing initialised
        worker.main(str(tiny_model_dir), ",".join(f"none:{a}" for _, a in CASES), str(out))
    finally:
        os.environ.update(saved)
        torch.set_num_threads(threads)
    return out


@gloo
@pytest.mark.parametrize("strategy, aggregation", CASES)
def test_two_ranks_match_one_process_after_three_steps(update_results, strategy, aggregation):
    """Three SGD steps on the same fixed batches (pre-made, not sampled: the ranks sample with different seeds,
    so this isolates the update path), each rank on its half of the groups, micro-batches of 2 rows. The rows
    differ in length, so each rank's token count differs from the other's: a rank-local denominator (no
    all-reduce), or DDP/FSDP2 averaging the gradients instead of summing them, moves the parameters by a
    different amount (checked by hand: each breaks this test by 0.05 to 0.5). Tolerance 1e-5: float32 sums in
    another order (measured: 2e-8 DDP, 1.2e-7 FSDP2)."""
    one = torch.load(update_results / f"none-{aggregation}.pt")
    two = torch.load(update_results / f"{strategy}-{aggregation}.pt")
    assert two["world"] == 2 and one["world"] == 1 and set(one["params"]) == set(two["params"])
    moved = max((one["params"][k] - two["params"][k]).abs().max().item() for k in one["params"])
    assert moved <= 1e-5, f"max abs parameter difference {moved:.3g} between 1 and 2 ranks"
    # the logged loss, KL, entropy and gradient norm are the global batch's on both
    assert torch.allclose(torch.tensor(one["stats"]), torch.tensor(two["stats"]), rtol=1e-4, atol=1e-6)
    if strategy == "fsdp2":  # decoding 3 vs 9 tokens on the two ranks neither hung nor changed a token
        assert two["decoded"] == [True, True]


def _tiny_train_args(model_dir: Path, out: Path, *extra: str) -> list[str]:
    return [f"model.name_or_path={model_dir}", f"output_dir={out}", "max_steps=2", "rollout.group_size=4",
            "rollout.prompts_per_step=2", "rollout.max_new_tokens=8", "optimizer.micro_batch_size=2",
            "eval.at_end=false", "optimizer.lr=1e-3", "reward.workers=0", *extra]


def _check_run(out: Path, tmp_path: Path, stdout: str, steps: list[int]) -> None:
    assert (out / "final" / "config.json").is_file() and (out / "config.yaml").is_file()
    assert not list(tmp_path.glob("runs")), "a second rank claimed a run directory of its own"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == steps  # written once, by rank 0
    for row in rows:  # 2 prompts x G=4 = 8 completions per step, 4 on each rank: the counts are the global batch's
        assert sum(v for k, v in row.items() if k.startswith("outcomes/math/")) == 8
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len({s["prompt_id"] for s in samples if s["step"] == 1}) == 2  # both ranks' prompts are in the samples
    assert stdout.count("run directory:") == 1


@gloo
def test_torchrun_fsdp2_train_writes_one_run_directory(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    # an entropy bonus moves the weights even when every group ties (a random model earns no reward)
    args = _tiny_train_args(tiny_model_dir, out, "distributed.strategy=fsdp2", "algorithm.entropy_coef=0.05")
    done = _torchrun(["-m", "rlvr", "train", *args], cwd=tmp_path)
    _check_run(out, tmp_path, done.stdout, [1, 2])
    # final/ holds the gathered, trained weights under the single-process names (tied LM head stored once)
    final, initial = load_file(out / "final" / "model.safetensors"), load_file(tiny_model_dir / "model.safetensors")
    assert set(final) == set(initial)
    assert any(not torch.equal(final[k], initial[k]) for k in final)


@gloo
def test_torchrun_ddp_train_writes_one_run_directory_and_resumes(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    done = _torchrun(["-m", "rlvr", "train", *_tiny_train_args(tiny_model_dir, out, "save_every=1")], cwd=tmp_path)
    _check_run(out, tmp_path, done.stdout, [1, 2])
    state = torch.load(out / "checkpoints" / "step-000001" / "trainer_state.pt", weights_only=False)
    assert state["extra"]["world_size"] == 2
    first, second = (s["torch"] for s in state["extra"]["rank_rng"])
    assert not torch.equal(first, second)  # each rank's own sampling stream, restored to the same rank
    # one process cannot continue a two-rank run (its prompt shares and sampling streams would change)
    assert main(["train", "--resume", str(out), "max_steps=3"]) == 2
    assert "written by 2 rank(s)" in capsys.readouterr().err
    _torchrun(["-m", "rlvr", "train", "--resume", str(out), "max_steps=3"], cwd=tmp_path)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]


@gloo
def test_torchrun_fsdp2_resume_continues_the_run_exactly(tiny_model_dir, tmp_path, capsys):
    """3 FSDP2 steps straight vs 2 steps, checkpoint, resume to 3: bit-identical final weights (torch.equal). AdamW
    moves each weight by about lr whatever the gradient, so a lost optimizer state (Adam's moments) or a rank
    continuing with another sampling stream changes the weights by ~1e-3 (lr). Both runs reduce in the same order
    (same ranks, same shards), so nothing but an exact resume gives equal bits."""
    fsdp = ("distributed.strategy=fsdp2", "algorithm.entropy_coef=0.05")  # entropy: the weights move without reward
    straight, split = tmp_path / "straight", tmp_path / "split"
    _torchrun(["-m", "rlvr", "train", *_tiny_train_args(tiny_model_dir, straight, *fsdp, "max_steps=3")], cwd=tmp_path)
    _torchrun(["-m", "rlvr", "train", *_tiny_train_args(tiny_model_dir, split, *fsdp)], cwd=tmp_path)
    # one process cannot continue a two-rank FSDP2 run either: refused before any weight is loaded
    assert main(["train", "--resume", str(split), "max_steps=3"]) == 2
    assert "written by 2 rank(s)" in capsys.readouterr().err
    done = _torchrun(["-m", "rlvr", "train", "--resume", str(split), "max_steps=3"], cwd=tmp_path)
    assert "resumed at step 2" in done.stdout
    rows = [json.loads(line) for line in (split / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]  # each step once: step 3 is not a second copy of an earlier one
    one, two = load_file(straight / "final" / "model.safetensors"), load_file(split / "final" / "model.safetensors")
    initial = load_file(tiny_model_dir / "model.safetensors")
    assert set(one) == set(two) == set(initial)
    moved = max((one[k] - initial[k]).abs().max().item() for k in one)
    assert moved > 1e-4, f"the weights moved by {moved:.3g} only: the match would prove nothing"
    different = [k for k in one if not torch.equal(one[k], two[k])]
    assert not different, f"{len(different)} tensors differ between straight and resumed, e.g. {different[0]}"


def test_prompts_not_divisible_by_ranks_is_one_clear_error(tiny_model_dir, tmp_path, monkeypatch, capsys):
    # Checked from torchrun's environment before any process group or model: nothing hangs, nothing is written.
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    out = tmp_path / "run"
    assert main(["train", *_tiny_train_args(tiny_model_dir, out, "rollout.prompts_per_step=3")]) == 2
    err = capsys.readouterr().err
    assert "rollout.prompts_per_step=3 must be divisible by the number of ranks (2)" in err
    assert err.count("rlvr: error:") == 1 and not out.exists()


def test_single_process_needs_no_torchrun(monkeypatch):
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    assert from_env() == (0, 1, 0)
    assert SINGLE.sum([1.5, 2.0]) == [1.5, 2.0] and SINGLE.gather("x") == ["x"] and not SINGLE.enabled


def test_refusals_name_the_setting():
    two = DistContext(rank=0, world_size=2, local_rank=0, backend="gloo")
    config = load_config(None, ["algorithm.advantage=reinforce_pp", "rollout.prompts_per_step=4"])
    found = problems(config, two)
    assert len(found) == 1 and "algorithm.advantage=reinforce_pp" in found[0]
    # FSDP2 resume is supported (same world size, checked against the checkpoint when it is read)
    resumed = load_config(None, ["distributed.strategy=fsdp2", "checkpoint.resume=auto", "rollout.prompts_per_step=4"])
    assert problems(resumed, two) == []
    # a checkpoint of another strategy (checkpoint.resume_force) is one clear error, not a failure inside torch
    by_name, by_index = {"param_groups": [{"params": ["model.lm_head.weight"]}]}, {"param_groups": [{"params": [0]}]}
    check_strategy(by_name, sharded=True)
    check_strategy(by_index, sharded=False)
    with pytest.raises(DistributedError, match="written by a distributed.strategy=fsdp2 run"):
        check_strategy(by_name, sharded=False)
    with pytest.raises(DistributedError, match="launch is fsdp2"):
        check_strategy(by_index, sharded=True)
    assert problems(config, SINGLE) == []  # one process runs everything
    with pytest.raises(DistributedError, match="divisible"):
        two.share(list(range(3)))
    assert DistContext(1, 2, 1, "gloo").share(list(range(4))) == [2, 3]  # rank 1 keeps the second half
