"""Checkpoint directories that are either complete and verified, or ignored.

A checkpoint is written into a hidden staging directory next to its final place, every file fsynced, a
manifest with each file's size and sha256 written last, the directory renamed into place (atomic on POSIX),
the parent directory fsynced, and only then a COMPLETE marker created. Resume takes the newest directory
that has the marker and whose files match the manifest; a torn or corrupted one is skipped with a message
naming the file (transformers#35782: half-written checkpoints were picked on resume). Retention deletes old
checkpoints only after a newer one is complete, and never the newest good one. A save of a step that already has a
complete checkpoint (the final save of a run resumed at its last step) moves the old one aside, to
.replaced-step-NNNNNN, until the new one is complete: at every moment one of them is found by resume.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rlvr.errors import UserFacingError, is_write_failure, write_failure_message

MANIFEST = "manifest.json"
COMPLETE = "COMPLETE"
FORMAT_VERSION = 1
_NAME = re.compile(r"^step-(\d{6,})$")
_STAGING_PREFIX = ".staging-"
_REPLACED_PREFIX = ".replaced-"  # a complete checkpoint moved aside while a save of its step replaces it


class CheckpointError(UserFacingError, RuntimeError):
    """A checkpoint cannot be written or used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int


def checkpoint_name(step: int) -> str:
    return f"step-{step:06d}"


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def write_checkpoint(root: Path, step: int, fill: Callable[[Path], None]) -> Checkpoint:
    """Create `root/step-NNNNNN` atomically: `fill(staging_dir)` writes the files, then fsync, manifest,
    rename, marker. On any error (disk full included) the staging directory is removed and the previous
    checkpoints are untouched (a complete one of this very step too: it is moved back); a failed write
    (errors.is_write_failure: torch's and safetensors' too) is a CheckpointError that says what happened and how
    much space is free."""
    root.mkdir(parents=True, exist_ok=True)
    target = root / checkpoint_name(step)
    staging = root / f"{_STAGING_PREFIX}{checkpoint_name(step)}-{os.getpid()}"
    replaced = root / f"{_REPLACED_PREFIX}{checkpoint_name(step)}"
    moved_aside = False
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        fill(staging)
        entries = {}
        for path in _files(staging):
            _fsync_path(path)
            entries[str(path.relative_to(staging))] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
        manifest = staging / MANIFEST
        manifest.write_text(json.dumps({"format": FORMAT_VERSION, "step": step, "files": entries}, indent=1))
        _fsync_path(manifest)
        for directory in sorted({p.parent for p in _files(staging)}, key=lambda p: -len(p.parts)):
            _fsync_path(directory, directory=True)
        if (target / COMPLETE).is_file():  # kept, aside, until the new one is complete
            shutil.rmtree(replaced, ignore_errors=True)  # an older copy, left by a save killed after its marker
            target.rename(replaced)
            moved_aside = True
            _fsync_path(root, directory=True)
        elif target.exists():  # a same-step leftover without a marker (a save killed after its rename)
            shutil.rmtree(target)
        staging.rename(target)
        _fsync_path(root, directory=True)
        (target / COMPLETE).write_text(f"{step}\n")
        _fsync_path(target / COMPLETE)
        _fsync_path(target, directory=True)
    except BaseException as err:
        # the free space is read before the partial write is removed: "0 MiB free" is what says the disk filled up
        message = write_failure_message(target, err) if is_write_failure(err) else None
        shutil.rmtree(staging, ignore_errors=True)
        if moved_aside:  # the new one is not complete: the old one goes back in its place
            shutil.rmtree(target, ignore_errors=True)
            replaced.rename(target)
        if message:
            raise CheckpointError(f"{message}; the previous checkpoints are intact") from err
        raise
    if moved_aside:
        shutil.rmtree(replaced, ignore_errors=True)
    return Checkpoint(target, step)


def verify_checkpoint(path: Path) -> None:
    """Raise CheckpointError naming the first file that is missing, of the wrong size or checksum, or not in the
    manifest (a file added after the save: resume loads every *.safetensors of model/), or the manifest that is
    unreadable or malformed."""
    if not (path / COMPLETE).is_file():
        raise CheckpointError(f"{path} is incomplete (no {COMPLETE} marker: the save was interrupted)")
    entries = _manifest_entries(path)
    present = {str(file.relative_to(path)) for file in _files(path)} - {MANIFEST, COMPLETE}
    for name, (size, sha256) in entries.items():
        file = path / name
        if name not in present:
            raise CheckpointError(f"{file} is missing")
        if file.stat().st_size != size:
            raise CheckpointError(f"{file} has {file.stat().st_size} bytes, the manifest says {size} "
                                  "(truncated or overwritten)")
        if _sha256(file) != sha256:
            raise CheckpointError(f"{file} does not match its checksum in {MANIFEST} (corrupted)")
    unlisted = sorted(present - set(entries))
    if unlisted:
        raise CheckpointError(f"{path / unlisted[0]} is not in {MANIFEST} (added after the save)")


def _manifest_entries(path: Path) -> dict[str, tuple[int, str]]:
    """{file: (bytes, sha256)} of the checkpoint's manifest; CheckpointError when it is unreadable or malformed."""
    manifest = path / MANIFEST
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{manifest} is unreadable ({err})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not files:
        raise CheckpointError(f"{manifest} is malformed: it lists no files (\"files\" is {files!r})")
    if data.get("format") != FORMAT_VERSION:  # a layout this code does not know is never loaded as if it were its own
        raise CheckpointError(f"{manifest} is format {data.get('format')!r}; this rlvr reads format {FORMAT_VERSION} "
                              "(written by another version of rlvr?)")
    entries = {}
    for name, entry in files.items():
        size, sha256 = (entry.get("bytes"), entry.get("sha256")) if isinstance(entry, dict) else (None, None)
        if type(size) is not int or not isinstance(sha256, str):
            raise CheckpointError(f"{manifest} is malformed: the entry of {name} is {entry!r}, not its bytes and "
                                  "sha256")
        entries[name] = (size, sha256)
    return entries


def list_checkpoints(root: Path) -> list[Checkpoint]:
    """Every step-NNNNNN directory under root, complete or not, oldest first."""
    if not root.is_dir():
        return []
    found = [Checkpoint(p, int(m.group(1))) for p in root.iterdir() if p.is_dir() and (m := _NAME.match(p.name))]
    return sorted(found, key=lambda c: c.step)


def _replaced(root: Path) -> list[Checkpoint]:
    """The complete checkpoints moved aside by a save of their step that was interrupted (write_checkpoint)."""
    if not root.is_dir():
        return []
    return [Checkpoint(p, int(m.group(1))) for p in root.iterdir() if p.is_dir()
            and p.name.startswith(_REPLACED_PREFIX) and (m := _NAME.match(p.name[len(_REPLACED_PREFIX):]))]


def latest_good(root: Path, log: Callable[[str], None] = print) -> Checkpoint | None:
    """The newest checkpoint that verifies; each one skipped on the way is reported through `log`. Of one step,
    step-NNNNNN is tried before a .replaced-step-NNNNNN (a save of that step killed before its marker)."""
    candidates = sorted(list_checkpoints(root) + _replaced(root),
                        key=lambda c: (c.step, not c.path.name.startswith(_REPLACED_PREFIX)))
    for checkpoint in reversed(candidates):
        try:
            verify_checkpoint(checkpoint.path)
        except CheckpointError as err:
            log(f"skipping checkpoint {checkpoint.path.name}: {err}")
            continue
        return checkpoint
    return None


def prune(root: Path, keep: int, newest: Checkpoint) -> list[Path]:
    """Delete all but the `keep` newest complete checkpoints (and leftovers of interrupted saves older than
    `newest`, or of its step); `newest`, which was just verified complete, is never deleted. Returns what was
    removed."""
    removed = []
    for leftover in root.glob(f"{_STAGING_PREFIX}*"):
        shutil.rmtree(leftover, ignore_errors=True)
        removed.append(leftover)
    for leftover in _replaced(root):
        if leftover.step <= newest.step and leftover.path != newest.path:
            shutil.rmtree(leftover.path, ignore_errors=True)
            removed.append(leftover.path)
    complete = [c for c in list_checkpoints(root) if (c.path / COMPLETE).is_file()]
    torn = [c for c in list_checkpoints(root) if not (c.path / COMPLETE).is_file() and c.step < newest.step]
    old = [c for c in complete if c.path != newest.path][: max(0, len(complete) - max(keep, 1))]
    for checkpoint in torn + old:
        shutil.rmtree(checkpoint.path, ignore_errors=True)
        removed.append(checkpoint.path)
    return removed
