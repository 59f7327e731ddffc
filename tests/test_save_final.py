"""checkpoint.save_final: what the end of a GRPO or SFT run keeps (full: final/ and a checkpoint
with the optimizer state; model: final/ alone; none: neither), that `rlvr eval RUN` loads the `model` variant and
says why there is nothing with `none`, that a recipe refuses `none`, and the run's disk use on the console."""
from __future__ import annotations

import json
import os
import re

import pytest

from rlvr.checkpoint.rundir import disk_use, disk_use_line, format_bytes
from rlvr.checkpoint.state import STATE_FILE
from rlvr.cli.main import main
from rlvr.config.run import ConfigError
from rlvr.pipeline.runner import run_recipe
from rlvr.pipeline.spec import load_recipe
from test_pipeline import Fakes, write_recipe
from test_sft import overrides as sft_overrides
from test_sft import write_data
from test_train_tiny import tiny_overrides

STEP = "step-000001"


def train(capsys, model_dir, out, mode: str, *extra: str) -> str:
    args = [*tiny_overrides(model_dir, out, steps=1), "eval.size=2", f"checkpoint.save_final={mode}", *extra]
    assert main(["train", *args]) == 0
    return capsys.readouterr().out


def disk_line(out: str, run_dir) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith(f"run directory {run_dir}: ")]
    return line


def test_full_keeps_final_and_a_checkpoint_with_the_optimizer_state(tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "full"
    out = train(capsys, tiny_model_dir, run, "full")
    checkpoint = run / "checkpoints" / STEP
    assert (run / "final" / "config.json").is_file()
    assert (checkpoint / "COMPLETE").is_file() and (checkpoint / STATE_FILE).is_file()
    # the checkpoint's weights are final/'s, hard-linked: one copy on disk (mutation: writing them again)
    assert os.path.samefile(checkpoint / "model" / "model.safetensors", run / "final" / "model.safetensors")
    assert f"saved final checkpoint to {run / 'final'}" in out  # the phrase bench/memory_plan.py waits for
    line = disk_line(out, run)
    assert line.startswith(f"run directory {run}: {format_bytes(disk_use(run))} (")
    assert "optimizer and RNG state" in line and "checkpoint.save_final=model" in line  # what `model` would save


def test_model_keeps_final_alone_and_eval_loads_it(tiny_model_dir, tmp_path, capsys, monkeypatch):
    run = tmp_path / "model"
    out = train(capsys, tiny_model_dir, run, "model")
    assert (run / "final" / "config.json").is_file() and (run / "final" / "model.safetensors").is_file()
    assert not list(run.glob("checkpoints/step-*"))  # mutation: `model` writing the full checkpoint too
    assert "checkpoint.save_final=model: no optimizer state" in out
    assert disk_line(out, run) == f"run directory {run}: {format_bytes(disk_use(run))}"  # no optimizer-state note
    monkeypatch.chdir(tmp_path)
    assert main(["eval", str(run), "--size", "2", "--n", "1", "--k", "1", "--no-greedy"]) == 0
    result = json.loads((run / "eval.json").read_text())
    assert result["model"] == str(run / "final") and result["problems"] == 2


@pytest.mark.parametrize("mode", ["model", "none"])
def test_resume_auto_of_a_finished_run_says_so_and_moves_nothing(tiny_model_dir, tmp_path, capsys, mode):
    run = tmp_path / "done"
    train(capsys, tiny_model_dir, run, mode)
    assert json.loads((run / "FINISHED").read_text()) == {"step": 1, "max_steps": 1}  # whatever save_final keeps
    before = {p.name: p.stat().st_mtime_ns for p in run.rglob("*")}
    code = main(["train", *tiny_overrides(tiny_model_dir, run, steps=1), "eval.size=2",
                 f"checkpoint.save_final={mode}", "checkpoint.resume=auto"])
    out = capsys.readouterr().out
    assert code == 0 and f"{run} already finished: the run already reached max_steps=1" in out
    # mutation: without the marker, resume=auto takes a finished run that kept no checkpoint (none: no final/
    # either) for one killed before its first checkpoint, moves it aside and trains it again from scratch
    assert {p.name: p.stat().st_mtime_ns for p in run.rglob("*")} == before
    assert [p.name for p in tmp_path.iterdir()] == ["done"]


def test_model_resume_of_a_finished_run_does_not_retrain_its_last_step(tiny_model_dir, tmp_path, capsys):
    # save_every=1 of 3 steps keeps step-1 and step-2 (the last step never is by save_every; `model` writes no
    # final checkpoint): --resume went on from step-2 and trained step 3 again, rewriting final/. Now it says what
    # the full mode says of a run at max_steps, and final/ is untouched (mutation: no marker check on --resume).
    run = tmp_path / "model3"
    train(capsys, tiny_model_dir, run, "model", "max_steps=3", "save_every=1", "eval.at_end=false")
    weights = (run / "final" / "model.safetensors").stat().st_mtime_ns
    rows = (run / "metrics.jsonl").read_text()
    args = [*tiny_overrides(tiny_model_dir, run, steps=3), "eval.size=2", "checkpoint.save_final=model",
            "save_every=1", "eval.at_end=false", "--resume", str(run)]
    assert main(["train", *args]) == 0
    assert "the run already reached max_steps=3" in capsys.readouterr().out
    assert (run / "final" / "model.safetensors").stat().st_mtime_ns == weights
    assert (run / "metrics.jsonl").read_text() == rows


def test_none_keeps_neither_and_eval_says_so(tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "none"
    out = train(capsys, tiny_model_dir, run, "none")
    assert not (run / "final").exists() and not (run / "checkpoints").exists()
    assert "checkpoint.save_final=none: no final model or checkpoint written" in out
    assert (run / "eval.jsonl").is_file()  # the end-of-run evaluation ran on the policy in memory
    assert disk_line(out, run) == f"run directory {run}: {format_bytes(disk_use(run))}"
    assert main(["eval", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no final model: it ran with checkpoint.save_final=none" in err
    assert "holds no checkpoint either" in err


def test_none_names_the_newest_save_every_checkpoint(tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "every"
    train(capsys, tiny_model_dir, run, "none", "max_steps=2", "save_every=1", "eval.at_end=false")
    assert main(["eval", str(run)]) == 2
    err = capsys.readouterr().err
    # save_every=1 of 2 steps: step 1 is saved (the last step never is by save_every), so that is the newest
    assert f"weights are at {run / 'checkpoints' / STEP / 'model'}" in err


def test_sft_honours_save_final(tiny_model_dir, tmp_path, capsys):
    data = write_data(tmp_path / "d.jsonl", rows=4)
    for mode, final, checkpoint in (("model", True, False), ("none", False, False)):
        run = tmp_path / mode
        assert main(["sft", *sft_overrides(tiny_model_dir, run, data, "sft.epochs=1",
                                           f"checkpoint.save_final={mode}")]) == 0
        out = capsys.readouterr().out
        assert (run / "final" / "config.json").is_file() == final, mode
        assert bool(list(run.glob("checkpoints/step-*"))) == checkpoint, mode
        assert disk_line(out, run) == f"run directory {run}: {format_bytes(disk_use(run))}"


def test_a_recipe_refuses_none_for_a_model_stage(tmp_path, tiny_model_dir, monkeypatch):
    stages = [{"name": "rl", "kind": "grpo", "config": {"checkpoint": {"save_final": "none"}}}]
    fakes = Fakes(monkeypatch)
    with pytest.raises(ConfigError, match=r"stage 'rl': checkpoint.save_final=none would keep no final model.*"
                                          r"use checkpoint.save_final=model"):
        run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, stages)), tmp_path / "run",
                   evaluator=fakes.evaluator, say=lambda _: None)
    assert fakes.calls == []  # refused before the base evaluation
    ok = [{"name": "rl", "kind": "grpo", "config": {"checkpoint": {"save_final": "model"}}}]
    run_recipe(load_recipe(write_recipe(tmp_path, tiny_model_dir, ok)), tmp_path / "run2",
               evaluator=fakes.evaluator, say=lambda _: None)
    assert [name for name, _ in fakes.calls] == ["eval", "01-rl", "eval"]


def test_disk_use_counts_a_hard_linked_file_once(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 1000)
    os.link(tmp_path / "a", tmp_path / "b")  # as a full final checkpoint links final/'s weights
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c").write_bytes(b"y" * 500)
    assert disk_use(tmp_path) == 1500  # 1000 once + 500, not 2500 (mutation: no inode set)
    assert disk_use_line(tmp_path) == f"run directory {tmp_path}: 1.5 kB"
    state = tmp_path / "sub" / "c"
    assert re.search(r": 1\.5 kB \(500 bytes of it the final checkpoint's", disk_use_line(tmp_path, state))


@pytest.mark.parametrize("count, text", [(1_600_000_000, "1.6 GB"), (999_999, "1000.0 kB"), (1_000_000, "1.0 MB"),
                                         (12_345, "12.3 kB"), (999, "999 bytes"),
                                         (1_000_000_000, "1.0 GB"), (1_000, "1.0 kB")])
def test_format_bytes_uses_decimal_units(count, text):
    assert format_bytes(count) == text


def test_run_finished_survives_the_broadcast_to_other_ranks():
    # torchrun: rank 0 broadcasts the RunFinished it raised (pickled); without __reduce__ unpickling fails
    # (its __init__ takes the path too), and the other ranks would crash instead of ending quietly
    import pickle
    from pathlib import Path

    from rlvr.checkpoint.resume import RunFinished

    done = pickle.loads(pickle.dumps(RunFinished(Path("/runs/a/final"), "already finished")))
    assert (done.path, str(done)) == (Path("/runs/a/final"), "already finished")
