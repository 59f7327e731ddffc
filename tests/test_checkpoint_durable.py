"""What a checkpoint save makes durable, and in which order (mutants that deleted an fsync survived).

A crash or power loss after `write_checkpoint` returns must find the checkpoint whole: each file's data, the
manifest, and the directory entries that name them are fsynced before the staging directory is renamed into
place, the root directory after that rename, and the COMPLETE marker last. The test records every fsync as the
path its descriptor names (/proc/self/fd), so deleting any one of them, or reordering them, fails here."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from rlvr.checkpoint.store import COMPLETE, MANIFEST, latest_good, list_checkpoints, write_checkpoint


def _record_fsyncs(monkeypatch) -> list[tuple[str, bool]]:
    """Each fsync as (path the descriptor names, whether it is a directory), in order."""
    synced: list[tuple[str, bool]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        synced.append((path, os.path.isdir(path)))
        real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    return synced


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name a descriptor's file")
def test_every_file_and_directory_is_fsynced_before_the_checkpoint_is_found(tmp_path, monkeypatch):
    synced = _record_fsyncs(monkeypatch)

    def fill(directory: Path) -> None:
        (directory / "model").mkdir()
        (directory / "model" / "weights.bin").write_bytes(b"w" * 100)
        (directory / "state.pt").write_bytes(b"s")
    saved = write_checkpoint(tmp_path, 7, fill)
    root, target = str(tmp_path.resolve()), str(saved.path.resolve())
    staging = f"{root}/.staging-step-000007-{os.getpid()}"
    assert synced == [
        (f"{staging}/model/weights.bin", False), (f"{staging}/state.pt", False),  # each file's data
        (f"{staging}/{MANIFEST}", False),
        (f"{staging}/model", True), (staging, True),  # the entries naming them, deepest first
        (root, True),  # the rename that puts step-000007 in place
        (f"{target}/{COMPLETE}", False), (target, True)]  # the marker, last
    assert latest_good(tmp_path, log=lambda _: None).step == 7


def test_a_checkpoint_record_is_a_value(tmp_path):
    """Checkpoint records come back from write_checkpoint, list_checkpoints and latest_good; callers keep them in
    sets and as dict keys (a run comparing what it saved with what is on disk), so they are hashable and fixed."""
    saved = write_checkpoint(tmp_path, 3, lambda d: (d / "x").write_bytes(b"1"))
    listed = list_checkpoints(tmp_path)
    assert listed == [saved] and {saved, *listed} == {saved}
    with pytest.raises(dataclasses.FrozenInstanceError):
        saved.step = 4  # type: ignore[misc]


def test_a_read_only_file_in_a_checkpoint_is_synced_without_write_access(tmp_path, monkeypatch):
    """A `fill` may leave a file read-only (a copied tokenizer file, a model directory from a read-only cache).
    fsync needs no write access, so the save opens files read-only; opened for writing, a non-root user's save
    would fail with EACCES. Root bypasses that check, so the test applies a non-root user's rule to os.open."""
    real_open = os.open

    def open_as_a_user(path, flags, *args, **kwargs):
        if flags & os.O_ACCMODE != os.O_RDONLY and os.path.isfile(path) and not os.stat(path).st_mode & 0o222:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", open_as_a_user)

    def fill(directory: Path) -> None:
        (directory / "tokenizer.json").write_text("{}")
        (directory / "tokenizer.json").chmod(0o444)
    saved = write_checkpoint(tmp_path, 5, fill)
    assert (saved.path / "tokenizer.json").read_text() == "{}" and latest_good(tmp_path, log=lambda _: None) == saved


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts this process's descriptors in /proc")
def test_saves_leave_no_descriptor_open(tmp_path):
    """Every fsync opens a descriptor; a trainer saves thousands of times, so each must be closed again (a leak
    ends a long run at the descriptor limit, EMFILE)."""
    _save = lambda step: write_checkpoint(tmp_path, step, lambda d: (d / "x").write_bytes(b"1"))  # noqa: E731
    _save(1)
    before = len(os.listdir("/proc/self/fd"))
    for step in range(2, 7):
        _save(step)
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name a descriptor's file")
def test_a_resave_makes_the_move_aside_durable_before_the_new_one_goes_in(tmp_path, monkeypatch):
    """Re-saving a step that has a complete checkpoint moves the old one aside first; the root is fsynced after that
    rename too, so a crash can never find neither the old checkpoint nor the new one under their names."""
    write_checkpoint(tmp_path, 4, lambda d: (d / "x").write_bytes(b"old"))
    synced = _record_fsyncs(monkeypatch)
    write_checkpoint(tmp_path, 4, lambda d: (d / "x").write_bytes(b"new"))
    root = str(tmp_path.resolve())
    assert [path for path, _ in synced].count(root) == 2  # after the move aside, and after the new one's rename
    assert (tmp_path / "step-000004" / "x").read_bytes() == b"new"
