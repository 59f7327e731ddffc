"""The guards shared by `rlvr train` and `rlvr sft` (rlvr/training/guards.py): the skipped-step counter and the
out-of-memory detector."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlvr.errors import UserFacingError
from rlvr.training.guards import TrainingDiverged, check_skips, is_out_of_memory


def step(n: int, skipped: bool) -> dict:
    return {"step": n, "skipped": 1.0 if skipped else 0.0, "loss": float("nan") if skipped else 0.5,
            "grad_norm": float("nan") if skipped else 1.0}


def test_a_finite_step_resets_the_run_of_skips_but_not_the_total():
    guard = {"consecutive_skips": 0, "skipped_steps": 0}
    for n, skipped in enumerate([True, True, False, True], start=1):
        record = step(n, skipped)
        check_skips(record, guard, limit=3, run_dir=Path("run"))
    # skips at steps 1, 2 and 4: three in total, but only one in a row at the end
    assert guard == {"consecutive_skips": 1, "skipped_steps": 3}
    assert record["skipped_steps"] == 3


def test_limit_skips_in_a_row_stop_with_the_step_the_hint_and_the_run_dir():
    guard = {"consecutive_skips": 0, "skipped_steps": 0}
    check_skips(step(1, True), guard, limit=2, run_dir=Path("runs/x"))
    with pytest.raises(TrainingDiverged) as err:
        check_skips(step(2, True), guard, limit=2, run_dir=Path("runs/x"), hint=" and check the rewards for NaN")
    message = str(err.value)
    assert "2 steps in a row" in message and "step 2" in message
    assert "check the rewards for NaN" in message and "runs/x" in message
    assert issubclass(TrainingDiverged, UserFacingError)  # the CLI prints it as one error line


CPU_OOM = ("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate "
           "123 bytes. Error code 12 (Cannot allocate memory)")


@pytest.mark.parametrize("err, expected", [
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),  # CUDA: its own class
    (RuntimeError(CPU_OOM), True),  # the CPU allocator: a plain RuntimeError, known by its text
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"), False),  # a bug: never retried
])
def test_out_of_memory_is_recognised_in_both_forms(err, expected):
    assert is_out_of_memory(err) is expected
