"""The skipped-step guard shared by `rlvr train` and `rlvr sft` (rlvr/training/divergence.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from rlvr.training.divergence import TrainingDiverged, check_skips


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
    assert TrainingDiverged.user_facing  # the CLI prints it as one error line
