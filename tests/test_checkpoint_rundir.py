"""Run directories are claimed atomically and never reused (rlvr/checkpoint/rundir.py, docs/runs.md): of
two runs started on one directory exactly one gets it, two started in the same second get different directories,
and a directory holding anything is never written into. The races are made deterministic by letting "the other run"
act at the exact moment between this run's check and its claim."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlvr.checkpoint.rundir import CLAIM, claim_run_dir, release_if_unused
from rlvr.config.run import ConfigError


def other_run_claims_after_mkdir(monkeypatch, victims: set[str]) -> None:
    """Another run claims each directory named in `victims` right after this run created (or found) it: the moment
    between this run's emptiness check and its own claim."""
    real = Path.mkdir

    def mkdir(self, *args, **kwargs):
        real(self, *args, **kwargs)
        if self.name in victims:
            (self / CLAIM).touch()

    monkeypatch.setattr(Path, "mkdir", mkdir)


def test_of_two_runs_on_one_directory_the_second_is_refused(tmp_path, monkeypatch):
    """Both saw the directory empty; the other run's claim came first (O_EXCL): this one must not share it."""
    target = tmp_path / "run"
    other_run_claims_after_mkdir(monkeypatch, {"run"})
    with pytest.raises(ConfigError, match=r"output_dir '.*run' was just claimed by another run; choose a new"):
        claim_run_dir(target)
    assert sorted(p.name for p in target.iterdir()) == [CLAIM]


def test_two_runs_started_in_the_same_second_get_different_directories(tmp_path, monkeypatch):
    """runs/<date-time> is taken by a run started in the same second (it exists, or it is claimed right after this
    run created it): this run goes on to <date-time>-1, -2, ..., each claimed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *args: "20250101-120000")
    first = claim_run_dir(None)
    assert first == Path("runs/20250101-120000") and (first / CLAIM).is_file()
    assert claim_run_dir(None) == Path("runs/20250101-120000-1")  # the first exists
    other_run_claims_after_mkdir(monkeypatch, {"20250101-120000-2"})  # created by this run, claimed by another
    assert claim_run_dir(None) == Path("runs/20250101-120000-3")
    assert sorted(p.name for p in Path("runs").iterdir()) == [f"20250101-120000{s}" for s in ("", "-1", "-2", "-3")]
    assert all((p / CLAIM).is_file() for p in Path("runs").iterdir())


def test_a_thousand_runs_in_one_second_is_one_error(tmp_path, monkeypatch):
    """The thousandth run of one second still gets a directory (-999); the next one is an error. Mutation caught:
    range(1000) as range(999)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *args: "20250101-120000")
    for k in range(999):
        Path("runs", "20250101-120000" + (f"-{k}" if k else "")).mkdir(parents=True)
    assert claim_run_dir(None) == Path("runs/20250101-120000-999")
    with pytest.raises(ConfigError, match=r"could not create a new run directory next to runs/20250101-120000$"):
        claim_run_dir(None)


def test_an_existing_file_or_a_directory_with_files_is_refused_and_an_empty_one_claimed(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"output_dir '.*file' is a file; choose a new output_dir=PATH"):
        claim_run_dir(tmp_path / "file")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"output_dir '.*full' already holds files; choose a new output_dir=PATH"):
        claim_run_dir(tmp_path / "full")
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    assert claim_run_dir(tmp_path / "empty") == tmp_path / "empty" and (tmp_path / "empty" / CLAIM).is_file()
    assert claim_run_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"  # parents are created


def test_release_removes_only_a_directory_that_holds_nothing_but_its_claim(tmp_path):
    """A run that fails in set-up gives its fresh directory back; one that wrote anything keeps it all; an empty one
    whose claim is already gone is removed without an error (mutation caught: unlink's missing_ok dropped)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    release_if_unused(empty)
    assert not empty.exists()
    unused = claim_run_dir(tmp_path / "unused")
    release_if_unused(unused)
    assert not unused.exists()
    used = claim_run_dir(tmp_path / "used")
    (used / "metrics.jsonl").write_text('{"step": 1}\n')
    release_if_unused(used)
    assert sorted(p.name for p in used.iterdir()) == [CLAIM, "metrics.jsonl"]
