"""The guards the GRPO and SFT loops share (one copy each): non-finite steps and out of memory.

Non-finite steps (a NaN must not end a run, nor go unnoticed): the update functions leave a step with
a non-finite loss or gradient a no-op and report it as skipped; the loop counts those with `check_skips` and
stops with a diagnosis after `checkpoint.max_consecutive_skips` in a row, before a broken model can reach a
checkpoint.

Out of memory: `is_out_of_memory` recognises both forms a micro-batch's forward/backward raises; each update
(rlvr/training/update.py, rlvr/sft/step.py) then decides whether to retry or name the setting to lower.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rlvr.errors import UserFacingError


class TrainingDiverged(UserFacingError, RuntimeError):
    """Too many steps in a row had a non-finite loss or gradient; stop before writing a broken checkpoint."""


def check_skips(record: dict[str, Any], guard: dict[str, int], limit: int, run_dir: Path, hint: str = "") -> None:
    """Update the skip counters in `guard` from one step's metrics `record` (adds record["skipped_steps"]);
    raise TrainingDiverged after `limit` skipped steps in a row. `hint`: what else to check, per loop."""
    if record["skipped"]:
        guard["consecutive_skips"] += 1
        guard["skipped_steps"] += 1
    else:
        guard["consecutive_skips"] = 0
    record["skipped_steps"] = guard["skipped_steps"]
    if guard["consecutive_skips"] >= limit:
        raise TrainingDiverged(
            f"{limit} steps in a row had a non-finite loss or gradient (step {record['step']}: loss {record['loss']}, "
            f"grad_norm {record['grad_norm']}); those steps changed nothing. Try a lower optimizer.lr or "
            f"max_grad_norm{hint}; metrics and checkpoints in {run_dir} are kept")


def is_out_of_memory(err: RuntimeError) -> bool:
    """CUDA's torch.OutOfMemoryError, or the CPU allocator's failure, which is a plain RuntimeError
    ("[enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: can't allocate memory: you tried to allocate ...")."""
    text = str(err)
    return isinstance(err, torch.OutOfMemoryError) or "DefaultCPUAllocator" in text or "can't allocate memory" in text
