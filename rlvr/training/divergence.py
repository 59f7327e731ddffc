"""Non-finite steps: shared by the GRPO and SFT loops (issue 9: a NaN must not end a run, nor go unnoticed).

The update functions leave a step with a non-finite loss or gradient a no-op and report it as skipped; the
loop counts those here and stops with a diagnosis after `checkpoint.max_consecutive_skips` in a row, before a
broken model can reach a checkpoint.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


class TrainingDiverged(RuntimeError):
    """Too many steps in a row had a non-finite loss or gradient; stop before writing a broken checkpoint."""

    user_facing = True


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
