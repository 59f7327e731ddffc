"""The one base of the errors a user can act on (one class instead of a `user_facing` flag per class).

`rlvr.cli.main` prints a UserFacingError as one `rlvr: error: MESSAGE` line and exits with 2, never a
traceback: its message names the setting, file or limit to change. A subclass keeps its builtin base
(ValueError, RuntimeError) where callers catch that. Torch-free: the CLI and the config import it."""
from __future__ import annotations

import shutil
from pathlib import Path


class UserFacingError(Exception):
    """An expected failure, phrased for the user; the CLI prints the message alone (exit code 2)."""


# What a full disk raises while saving: OSError from Python's own writes, RuntimeError from torch.save ("unexpected
# pos 576 vs 534", "basic_ios::clear": its C++ stream hides errno) and SafetensorError (an Exception subclass) from
# safetensors. Measured on a 1 MiB tmpfs (tests/test_checkpoint_store.py).
WRITE_FAILURES = (OSError, RuntimeError)


def is_write_failure(err: BaseException) -> bool:
    """An error a save can raise when its disk is full or gone (see WRITE_FAILURES; safetensors' by name, so this
    module stays torch- and safetensors-free)."""
    return isinstance(err, WRITE_FAILURES) or type(err).__name__ == "SafetensorError"


def write_failure_message(target: Path, err: BaseException) -> str:
    """`could not write TARGET: REASON (N MiB free on its disk)`: torch's own reason names no errno, so the free
    space is what tells a user that the disk filled up."""
    lines = str(err).strip().splitlines()
    reason = (err.strerror if isinstance(err, OSError) else None) or (lines[0] if lines else type(err).__name__)
    existing = next((p for p in (Path(target), *Path(target).parents) if p.exists()), None)
    free = f"{shutil.disk_usage(existing).free / 2**20:.0f} MiB free on its disk" if existing else "its disk is gone"
    return f"could not write {target}: {reason} ({free})"
