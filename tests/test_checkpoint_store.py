"""Atomic checkpoint directories, each fault a real injection: a writer SIGKILLed mid-save, a shard
truncated or flipped on disk, a disk that fills up, retention that must never delete the only good one."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlvr.checkpoint.store import (
    COMPLETE,
    MANIFEST,
    CheckpointError,
    latest_good,
    list_checkpoints,
    prune,
    verify_checkpoint,
    write_checkpoint,
)


def fill_with(files: dict[str, bytes]):
    def fill(directory: Path) -> None:
        for name, data in files.items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_bytes(data)
    return fill


def test_write_then_verify_and_find(tmp_path):
    for step in (10, 20):
        write_checkpoint(tmp_path, step, fill_with({"model/weights.bin": bytes([step]) * 1000, "state.pt": b"x"}))
    found = latest_good(tmp_path, log=lambda _: None)
    assert found.step == 20 and (found.path / COMPLETE).is_file() and (found.path / MANIFEST).is_file()
    assert (found.path / "model/weights.bin").read_bytes() == bytes([20]) * 1000
    assert not list(tmp_path.glob(".staging-*"))


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "no_marker"])
def test_damaged_newest_is_refused_by_name_and_previous_used(tmp_path, damage):
    write_checkpoint(tmp_path, 1, fill_with({"shard.bin": b"a" * 4096}))
    newest = write_checkpoint(tmp_path, 2, fill_with({"shard.bin": b"b" * 4096}))
    shard = newest.path / "shard.bin"
    if damage == "truncate":
        with shard.open("r+b") as f:
            f.truncate(100)
    elif damage == "flip":
        data = bytearray(shard.read_bytes())
        data[2000] ^= 0xFF
        shard.write_bytes(bytes(data))
    elif damage == "delete":
        shard.unlink()
    else:
        (newest.path / COMPLETE).unlink()
    with pytest.raises(CheckpointError) as err:
        verify_checkpoint(newest.path)
    assert ("shard.bin" in str(err.value)) or damage == "no_marker"
    messages = []
    assert latest_good(tmp_path, log=messages.append).step == 1
    assert len(messages) == 1 and "step-000002" in messages[0]


_KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from rlvr.checkpoint.store import write_checkpoint
    def fill(d):
        for i in range(200):
            (d / f"shard-{i}.bin").write_bytes(b"z" * 65536)
            if i == 20:
                print("writing", flush=True)
                time.sleep(30)  # SIGKILLed here, mid-save
    write_checkpoint(Path(sys.argv[1]), 2, fill)
""")


def test_sigkill_while_writing_leaves_previous_checkpoint_in_use(tmp_path):
    write_checkpoint(tmp_path, 1, fill_with({"shard.bin": b"good"}))
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert list(tmp_path.glob(".staging-*")), "the torn save is left in its staging directory"
    found = latest_good(tmp_path, log=lambda _: None)
    assert found.step == 1 and (found.path / "shard.bin").read_bytes() == b"good"
    newest = write_checkpoint(tmp_path, 3, fill_with({"shard.bin": b"next"}))
    prune(tmp_path, keep=5, newest=newest)
    assert not list(tmp_path.glob(".staging-*"))  # the next save's retention sweeps the leftover


def _full_disk(tmp_path: Path) -> Path | None:
    """A 1 MiB tmpfs when we may mount one (root, Linux), else None."""
    target = tmp_path / "small"
    target.mkdir()
    if os.geteuid() != 0:
        return None
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(target)], capture_output=True)
    return target if done.returncode == 0 else None


def test_disk_full_while_saving_is_a_clear_error_and_previous_intact(tmp_path):
    disk = _full_disk(tmp_path)
    if disk is None:
        pytest.skip("cannot mount a size-limited tmpfs here (needs root)")
    try:
        write_checkpoint(disk, 1, fill_with({"shard.bin": b"k" * 300_000}))
        with pytest.raises(CheckpointError, match="No space left on device") as err:
            write_checkpoint(disk, 2, fill_with({"shard.bin": b"k" * 900_000}))
        assert "previous checkpoints are intact" in str(err.value)
        # the free space as it was when the write failed (0), not after the partial write was removed (~0.7 MiB,
        # printed as 1): that is what says the disk filled up (read after the removal, no test saw it)
        assert "(0 MiB free on its disk)" in str(err.value)
        assert not list(disk.glob(".staging-*"))  # the partial write was removed: the space is back
        assert latest_good(disk, log=lambda _: None).step == 1
        verify_checkpoint(disk / "step-000001")
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)  # lazy: torch may still hold a file open


def test_retention_keeps_the_newest_n_and_never_the_only_good_one(tmp_path):
    for step in range(1, 6):
        newest = write_checkpoint(tmp_path, step, fill_with({"s": bytes([step])}))
        prune(tmp_path, keep=2, newest=newest)
    assert [c.step for c in list_checkpoints(tmp_path)] == [4, 5]
    (tmp_path / "step-000004" / COMPLETE).unlink()  # torn older one is swept; the newest good one is kept
    prune(tmp_path, keep=1, newest=list_checkpoints(tmp_path)[-1])
    assert [c.step for c in list_checkpoints(tmp_path)] == [5]
    prune(tmp_path, keep=0, newest=list_checkpoints(tmp_path)[-1])  # keep=0 still keeps the newest
    assert [c.step for c in list_checkpoints(tmp_path)] == [5]


def test_a_save_of_the_same_step_replaces_a_torn_leftover(tmp_path):
    torn = tmp_path / "step-000007"
    torn.mkdir()
    (torn / "junk").write_bytes(b"half")
    write_checkpoint(tmp_path, 7, fill_with({"s": b"ok"}))
    verify_checkpoint(torn)
    assert not (torn / "junk").exists()


def test_staging_write_error_removes_staging(tmp_path):
    def failing(directory: Path) -> None:
        (directory / "a").write_bytes(b"1")
        raise OSError(28, "No space left on device")

    with pytest.raises(CheckpointError, match="No space left"):
        write_checkpoint(tmp_path, 1, failing)
    assert not any(tmp_path.iterdir())
    start = time.monotonic()
    assert latest_good(tmp_path, log=lambda _: None) is None and time.monotonic() - start < 5


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs (skips where it cannot be mounted), unmounted afterwards."""
    disk = _full_disk(tmp_path)
    if disk is None:
        pytest.skip("cannot mount a size-limited tmpfs here (needs root)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)  # lazy: torch may still hold a file open


def test_torch_save_on_a_full_disk_is_one_line_with_the_free_space(full_disk):
    # torch.save on a full disk raises RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos
    # ...") or "basic_ios::clear" (measured here), no errno: the free space is what tells the user why.
    import torch

    write_checkpoint(full_disk, 1, fill_with({"s": b"ok"}))

    def fill(directory: Path) -> None:
        torch.save({"moments": torch.zeros(500_000)}, directory / "trainer_state.pt")  # 2 MB into 1 MiB

    with pytest.raises(CheckpointError, match=r"step-000002: .* \(0 MiB free on its disk\); the previous "
                                              r"checkpoints are intact") as err:
        write_checkpoint(full_disk, 2, fill)
    assert isinstance(err.value.__cause__, RuntimeError) and "\n" not in str(err.value)
    assert not list(full_disk.glob(".staging-*")) and latest_good(full_disk, log=lambda _: None).step == 1


def test_a_bug_in_the_writer_is_not_reported_as_a_write_failure(tmp_path):
    def buggy(directory: Path) -> None:
        raise KeyError("optimizer")  # a programming error: its traceback must survive, not become a CheckpointError

    with pytest.raises(KeyError):
        write_checkpoint(tmp_path, 1, buggy)
    assert not any(tmp_path.iterdir())


def test_saving_a_model_on_a_full_disk_keeps_the_saved_one(full_disk, tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.model.load import ModelError, save_model

    model, tokenizer = AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(
        tiny_model_dir)
    final = save_model(model, tokenizer, full_disk / "final")
    before = {p.name: p.read_bytes() for p in final.iterdir()}
    free = os.statvfs(full_disk).f_bavail * os.statvfs(full_disk).f_frsize
    (full_disk / "filler").write_bytes(b"f" * (free - 16_384))  # 16 KiB left: less than one weights file
    with torch.no_grad():  # new weights: a file left half-replaced could not pass for the first save's
        for weight in model.parameters():
            weight.zero_()
    with pytest.raises(ModelError, match=r"could not write .*final: .*\(0 MiB free on its disk\); nothing at "):
        save_model(model, tokenizer, full_disk / "final")
    assert {p.name: p.read_bytes() for p in final.iterdir()} == before  # the earlier save is untouched
    assert [p.name for p in full_disk.iterdir() if p.name.startswith(".final-")] == []  # no partial left



def _fail_at(monkeypatch, method: str, when) -> None:
    """Make Path.<method> raise a disk-full OSError on the call `when(path, *args)` picks; other calls run."""
    real = getattr(Path, method)

    def maybe_fail(self, *args, **kwargs):
        if when(self, *args):
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, method, maybe_fail)


@pytest.mark.parametrize("fault", ["rename_into_place", "marker"])
def test_a_failed_resave_of_a_complete_step_keeps_the_old_one_in_use(tmp_path, monkeypatch, fault):
    """A save of a step that already has a complete checkpoint (the final save of a run resumed at its last step,
    with final/ missing) must not delete it before the new one is complete: a failure at the rename into place or
    at the marker leaves the old one where resume finds it (it was once deleted first, and a
    failure then left no checkpoint at all)."""
    write_checkpoint(tmp_path, 5, fill_with({"state.pt": b"old"}))
    if fault == "rename_into_place":
        _fail_at(monkeypatch, "rename", lambda path, target: path.name.startswith(".staging-"))
    else:
        _fail_at(monkeypatch, "write_text", lambda path, text: path.name == COMPLETE)
    with pytest.raises(CheckpointError, match="No space left on device.*the previous checkpoints are intact"):
        write_checkpoint(tmp_path, 5, fill_with({"state.pt": b"new"}))
    monkeypatch.undo()
    found = latest_good(tmp_path, log=lambda _: None)
    assert found.path == tmp_path / "step-000005" and (found.path / "state.pt").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000005"]  # nothing staged or aside is left


def test_a_resave_of_a_complete_step_replaces_it_and_leaves_nothing_aside(tmp_path):
    write_checkpoint(tmp_path, 5, fill_with({"state.pt": b"old"}))
    saved = write_checkpoint(tmp_path, 5, fill_with({"state.pt": b"new"}))
    verify_checkpoint(saved.path)
    assert (saved.path / "state.pt").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000005"]


_KILLED_IN_THE_SWAP = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from rlvr.checkpoint.store import write_checkpoint
    real = Path.rename
    def rename(self, target):
        if self.name.startswith(".staging-"):
            os._exit(9)  # SIGKILL's effect: no handler, no cleanup, the old checkpoint already moved aside
        return real(self, target)
    Path.rename = rename
    def fill(d):
        (d / "state.pt").write_bytes(b"new")
    write_checkpoint(Path(sys.argv[1]), 5, fill)
""")


def test_a_resave_killed_between_its_renames_leaves_the_old_checkpoint_found(tmp_path):
    """The one moment no step-000005 exists (the old one moved aside, the new one not yet renamed in): a process
    killed there leaves the old checkpoint in .replaced-step-000005, and resume uses it; the next save of that step
    sweeps it once the new one is complete."""
    write_checkpoint(tmp_path, 4, fill_with({"state.pt": b"four"}))
    write_checkpoint(tmp_path, 5, fill_with({"state.pt": b"old"}))
    done = subprocess.run([sys.executable, "-c", _KILLED_IN_THE_SWAP, str(tmp_path)], capture_output=True, timeout=60)
    assert done.returncode == 9, done.stderr
    assert not (tmp_path / "step-000005").exists()  # the kill landed in the window
    messages = []
    found = latest_good(tmp_path, log=messages.append)
    assert found.step == 5 and (found.path / "state.pt").read_bytes() == b"old" and messages == []
    newest = write_checkpoint(tmp_path, 5, fill_with({"state.pt": b"again"}))
    prune(tmp_path, keep=5, newest=newest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000004", "step-000005"]
    assert latest_good(tmp_path, log=lambda _: None).path == newest.path


def test_of_one_step_the_checkpoint_in_place_is_preferred_to_the_one_moved_aside(tmp_path):
    """A save killed after its marker but before removing the old copy leaves both, complete: the new one, in
    place, is the one resume takes; a torn one in place falls back to the copy aside, with the torn one named."""
    write_checkpoint(tmp_path, 5, fill_with({"state.pt": b"old"}))
    (tmp_path / "step-000005").rename(tmp_path / ".replaced-step-000005")
    write_checkpoint(tmp_path, 5, fill_with({"state.pt": b"new"}))
    assert (latest_good(tmp_path, log=lambda _: None).path / "state.pt").read_bytes() == b"new"
    (tmp_path / "step-000005" / COMPLETE).unlink()
    messages = []
    found = latest_good(tmp_path, log=messages.append)
    assert found.path.name == ".replaced-step-000005" and (found.path / "state.pt").read_bytes() == b"old"
    assert len(messages) == 1 and "skipping checkpoint step-000005" in messages[0]


def test_retention_sweeps_only_leftovers_older_than_the_newest(tmp_path):
    """prune removes a torn step directory or a copy moved aside only when it is older than the checkpoint just
    written (or of its step): one newer than it is not a leftover of a save before it, and is left alone."""
    for step in (1, 2, 3):
        write_checkpoint(tmp_path, step, fill_with({"s": bytes([step])}))
    (tmp_path / "step-000001" / COMPLETE).unlink()  # torn, older
    (tmp_path / "step-000003").rename(tmp_path / ".replaced-step-000003")  # aside, newer
    torn_newer = tmp_path / "step-000004"
    torn_newer.mkdir()
    write_checkpoint(tmp_path, 2, fill_with({"s": b"two"}))  # a re-save of step 2: nothing left aside
    (tmp_path / "step-000002").rename(tmp_path / ".replaced-step-000002")
    newest = write_checkpoint(tmp_path, 2, fill_with({"s": b"2"}))
    removed = prune(tmp_path, keep=5, newest=newest)
    assert sorted(p.name for p in removed) == [".replaced-step-000002", "step-000001"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".replaced-step-000003", "step-000002", "step-000004"]


NO_FILES = "manifest.json is malformed: it lists no files"
BAD_ENTRY = "manifest.json is malformed: the entry of state.pt"


@pytest.mark.parametrize(("manifest", "says"), [
    ("{not json", "manifest.json is unreadable"),
    ("5", NO_FILES),
    ('{"format": 1, "files": null}', NO_FILES),
    ('{"format": 1, "files": ["state.pt"]}', NO_FILES),
    ('{"format": 1, "files": {}}', NO_FILES),
    ('{"format": 1, "files": {"state.pt": 3}}', f"{BAD_ENTRY} is 3, not its bytes and sha256"),
    ('{"format": 1, "files": {"state.pt": {"sha256": "x"}}}', BAD_ENTRY),
    ('{"format": 1, "files": {"state.pt": {"bytes": "3", "sha256": "x"}}}', BAD_ENTRY),
    ('{"format": 1, "files": {"state.pt": {"bytes": 3, "sha256": null}}}', BAD_ENTRY),
    ('{"format": 2, "files": {"state.pt": {"bytes": 3, "sha256": "x"}}}', "manifest.json is format 2; this rlvr reads "
                                                                           "format 1"),
    ('{"files": {"state.pt": {"bytes": 3, "sha256": "x"}}}', "manifest.json is format None"),
])
def test_a_malformed_manifest_is_skipped_by_name(tmp_path, manifest, says):
    """Whatever a damaged manifest holds, resume skips that checkpoint with a message naming it and takes the one
    before (a null or listed "files", or an entry without its size, once raised AttributeError,
    TypeError or KeyError out of latest_good; an empty map passed with the checkpoint's files deleted)."""
    write_checkpoint(tmp_path, 1, fill_with({"state.pt": b"one"}))
    newest = write_checkpoint(tmp_path, 2, fill_with({"state.pt": b"two"}))
    (newest.path / MANIFEST).write_text(manifest)
    if "{}" in manifest:
        (newest.path / "state.pt").unlink()
    with pytest.raises(CheckpointError, match=re.escape(f"step-000002/{says}")):
        verify_checkpoint(newest.path)
    messages = []
    assert latest_good(tmp_path, log=messages.append).step == 1
    assert len(messages) == 1 and says in messages[0]


def test_a_checkpoint_is_written_as_format_1(tmp_path):
    """The format number is part of what is on disk: checkpoints saved so far say 1, and a reader that expects
    another number refuses them. Written out, so a changed FORMAT_VERSION fails here (it survived a machine-made
    mutation while the number was written and never read)."""
    saved = write_checkpoint(tmp_path, 1, fill_with({"state.pt": b"one"}))
    assert json.loads((saved.path / MANIFEST).read_text())["format"] == 1


def test_a_file_added_after_the_save_fails_verification(tmp_path):
    """The manifest lists every file of the checkpoint: an extra weights shard dropped into model/ later would be
    loaded too (load_policy_weights reads every *.safetensors), so it fails verification, named."""
    write_checkpoint(tmp_path, 1, fill_with({"model/a.safetensors": b"w1", "state.pt": b"s1"}))
    newest = write_checkpoint(tmp_path, 2, fill_with({"model/a.safetensors": b"w2", "state.pt": b"s2"}))
    verify_checkpoint(newest.path)  # as written, it verifies
    (newest.path / "model" / "zz.safetensors").write_bytes(b"junk")
    with pytest.raises(CheckpointError, match=r"step-000002/model/zz.safetensors is not in manifest.json"):
        verify_checkpoint(newest.path)
    assert latest_good(tmp_path, log=lambda _: None).step == 1
