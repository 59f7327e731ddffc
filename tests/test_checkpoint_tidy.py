"""Leftovers and retention of checkpoint saves (rlvr/checkpoint/store.py; mutants of these lines survived).

A save or a prune must never stop a run over housekeeping: a leftover of an earlier save is cleared out of the way,
and a leftover that cannot be deleted (a file held by another user's process, a filesystem that refuses) is left
where it is, with the save or the prune carrying on. Each fault here is injected at the os level, where
shutil.rmtree meets it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlvr.checkpoint.store import (
    CheckpointError,
    latest_good,
    list_checkpoints,
    prune,
    verify_checkpoint,
    write_checkpoint,
)


def _save(root: Path, step: int, extra: str = "") -> object:
    def fill(directory: Path) -> None:
        (directory / "state.pt").write_bytes(bytes([step]) * 64)
        if extra:
            (directory / extra).write_bytes(b"x")
    return write_checkpoint(root, step, fill)


def _steps(root: Path) -> list[int]:
    return [c.step for c in list_checkpoints(root)]


@pytest.fixture
def undeletable(monkeypatch):
    """Files named stuck.bin cannot be unlinked (as a file of another user's process in a sticky directory)."""
    real = os.unlink

    def unlink(path, *args, **kwargs):
        if str(path).endswith("stuck.bin"):
            raise PermissionError(1, "Operation not permitted", str(path))
        return real(path, *args, **kwargs)
    monkeypatch.setattr(os, "unlink", unlink)


def test_leftovers_of_earlier_saves_do_not_block_the_next_save(tmp_path):
    """A staging directory of this very pid (a killed save whose pid came round again) and a moved-aside copy of
    the step being saved (a re-save killed after its marker) are cleared, not a reason to fail."""
    (tmp_path / f".staging-step-000002-{os.getpid()}" / "model").mkdir(parents=True)
    assert _save(tmp_path, 2).step == 2
    _save(tmp_path, 3)
    aside = tmp_path / ".replaced-step-000003"
    (aside / "old").mkdir(parents=True)
    (aside / "old" / "state.pt").write_bytes(b"old")
    resaved = _save(tmp_path, 3)
    assert latest_good(tmp_path, log=lambda _: None) == resaved and not aside.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000002", "step-000003"]


def test_retention_keeps_what_it_is_told_with_few_checkpoints_and_with_one(tmp_path):
    """keep=5 of 3 checkpoints deletes none (a negative count is no count); keep=1 keeps only the newest; prune
    returns every path it removed, leftovers of interrupted saves included."""
    for step in (1, 2, 3):
        newest = _save(tmp_path, step)
    assert prune(tmp_path, keep=5, newest=newest) == [] and _steps(tmp_path) == [1, 2, 3]
    staging = tmp_path / ".staging-step-000004-1"
    staging.mkdir()
    removed = prune(tmp_path, keep=1, newest=newest)
    assert sorted(removed) == sorted([staging, tmp_path / "step-000001", tmp_path / "step-000002"])
    assert _steps(tmp_path) == [3] and not staging.exists()


def test_a_leftover_that_cannot_be_deleted_stops_neither_a_prune_nor_a_save(tmp_path, undeletable):
    for step in (1, 2):
        _save(tmp_path, step, extra="stuck.bin")
    (tmp_path / ".staging-step-000009-1").mkdir()
    (tmp_path / ".staging-step-000009-1" / "stuck.bin").write_bytes(b"x")
    aside = tmp_path / ".replaced-step-000001"
    aside.mkdir()
    (aside / "stuck.bin").write_bytes(b"x")
    newest = _save(tmp_path, 3, extra="stuck.bin")
    prune(tmp_path, keep=1, newest=newest)  # every leftover and old checkpoint holds a stuck file: no error
    assert latest_good(tmp_path, log=lambda _: None) == newest
    assert (tmp_path / "step-000001" / "stuck.bin").exists()  # left where it was, not half reported as gone

    # a re-save whose moved-aside copy cannot be removed afterwards still returns the new checkpoint
    resaved = _save(tmp_path, 3, extra="new.bin")
    assert (resaved.path / "new.bin").is_file() and latest_good(tmp_path, log=lambda _: None) == resaved


def test_a_shard_of_the_wrong_size_is_named_with_both_sizes(tmp_path):
    saved = _save(tmp_path, 1)
    with (saved.path / "state.pt").open("r+b") as f:
        f.truncate(10)
    with pytest.raises(CheckpointError, match=r"state.pt has 10 bytes, the manifest says 64 \(truncated"):
        verify_checkpoint(saved.path)
