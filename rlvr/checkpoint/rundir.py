"""Run directories are claimed atomically and never reused: no data or checkpoint is ever lost (docs/runs.md)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from rlvr.config.run import ConfigError, RunConfig

CLAIM = ".rlvr-run"  # created with O_EXCL: of two runs started on one directory, exactly one gets it


def _claim(path: Path) -> bool:
    try:
        os.close(os.open(path / CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def claim_run_dir(path: Path | None) -> Path:
    """A new or empty directory, claimed for this run; None -> a new runs/<date-time>[-k]."""
    if path is None:
        base = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
        for k in range(1000):  # two runs started in the same second get different directories
            candidate = base if k == 0 else base.with_name(f"{base.name}-{k}")
            try:
                candidate.mkdir(parents=True)
            except FileExistsError:
                continue
            if _claim(candidate):
                return candidate
        raise ConfigError(f"could not create a new run directory next to {base}")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"output_dir {str(path)!r} is a file; choose a new output_dir=PATH")
    if path.exists() and any(path.iterdir()):
        raise ConfigError(f"output_dir {str(path)!r} already holds files; choose a new output_dir=PATH")
    path.mkdir(parents=True, exist_ok=True)
    if not _claim(path):
        raise ConfigError(f"output_dir {str(path)!r} was just claimed by another run; choose a new output_dir=PATH")
    return path


def open_run_dir(config: RunConfig, run_dir: Path | None, kind: str = "run",
                 start_again: Callable[[Path], Path | None] = lambda target: None) -> tuple[Path, bool]:
    """(directory, resumed?) as checkpoint.resume says, for every command that keeps a run directory (train and
    sft: resume.open_run; sample: sampling/run.py), each of which then checks that a resumed one is its kind of run.
    No resume: a new or empty directory, claimed. 'auto': run_dir or output_dir, claimed when new or empty, else
    continued, unless `start_again` (given the directory) returns the directory to start afresh in. A path: that
    run, continued. `kind` names the run in the message."""
    resume = config.checkpoint.resume
    target = run_dir if run_dir is not None else (Path(config.output_dir) if config.output_dir else None)
    if resume is None:
        return claim_run_dir(target), False
    if resume != "auto":
        return Path(resume), True
    if target is None:
        raise ConfigError(f"checkpoint.resume=auto needs output_dir=PATH (the {kind} to continue or start)")
    if not target.exists() or not any(target.iterdir()):
        return claim_run_dir(target), False
    fresh = start_again(target)
    return (target, True) if fresh is None else (fresh, False)


def release_if_unused(path: Path) -> None:
    """Remove a run directory that holds nothing but its claim (the run failed before writing anything)."""
    if {p.name for p in path.iterdir()} <= {CLAIM}:
        (path / CLAIM).unlink(missing_ok=True)
        path.rmdir()


def disk_use(path: Path) -> int:
    """Bytes of the files under `path`, each file once: a final checkpoint hard-links its weights to final/ (resume.
    save), so summing per name would count them twice where the disk holds them once."""
    seen, total = set(), 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                stat = os.lstat(os.path.join(root, name))
            except OSError:  # removed meanwhile (a staging directory)
                continue
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_size
    return total


def format_bytes(count: int) -> str:
    """1_600_000_000 -> '1.6 GB' (decimal units, as `du --si` and disk vendors count)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def disk_use_line(run_dir: Path, state: Path | None = None) -> str:
    """The run's last console line: what it keeps on disk; with `state`, the trainer state file of the
    final checkpoint (checkpoint.save_final=full), how much of that it is (what save_final=model leaves out)."""
    line = f"run directory {run_dir}: {format_bytes(disk_use(run_dir))}"
    if state is not None and state.is_file():
        line += (f" ({format_bytes(state.stat().st_size)} of it the final checkpoint's optimizer and RNG state, "
                 "for --resume; checkpoint.save_final=model keeps the final model alone)")
    return line
