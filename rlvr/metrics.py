"""Metric records and sinks: metrics.jsonl (one object per optimizer step), samples.jsonl, a progress line."""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from rlvr.config import RunConfig


def batch_accounting(config: RunConfig) -> str:
    """The numbers a user should check before a long run (issue #2, item 8)."""
    r, o = config.rollout, config.optimizer
    batch = config.batch_size
    micro = config.micro_batch_size
    passes = config.algorithm.updates_per_batch
    return (f"batch: {r.prompts_per_step} prompts/step x G={r.group_size} = {batch} completions/step; "
            f"{batch // micro if batch % micro == 0 else batch / micro:g} micro-batches of {micro}; "
            f"{passes} optimizer step(s) per rollout batch (mu); {config.max_steps} steps -> "
            f"{config.max_steps * batch} completions, {config.max_steps * passes} optimizer steps; lr {o.lr:g}")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; None marks it visibly instead of a silent number
    return value


class RunLogger:
    """Appends JSON lines; files are flushed per step so a crash loses at most the current step.

    `writes=False` (torchrun ranks other than 0): the clock runs, nothing is written or printed, so the logs
    and the console hold each step once (issue #11)."""

    def __init__(self, run_dir: Path, max_steps: int, stream: TextIO = sys.stdout, writes: bool = True):
        self.metrics_path = run_dir / "metrics.jsonl"
        self.samples_path = run_dir / "samples.jsonl"
        self.max_steps = max_steps
        self.stream = stream
        self.start = time.monotonic()
        self.writes = writes

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def log_step(self, record: dict[str, Any]) -> None:
        if not self.writes:
            return
        record = {"step": record["step"], "elapsed_s": round(self.elapsed(), 3),
                  **{k: _clean(v) for k, v in record.items() if k != "step"}}
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        self.stream.write(self._progress_line(record) + "\n")
        self.stream.flush()

    def log_eval(self, step: int, metrics: dict[str, Any]) -> None:
        """A row with only held-out metrics (the end-of-run evaluation, made after the last step's row)."""
        if not self.writes:
            return
        with self.metrics_path.open("a") as f:
            f.write(json.dumps({"step": step, "elapsed_s": round(self.elapsed(), 3),
                                **{k: _clean(v) for k, v in metrics.items()}}) + "\n")

    def log_samples(self, rows: list[dict[str, Any]]) -> None:
        if not self.writes:
            return
        with self.samples_path.open("a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")

    def _progress_line(self, r: dict[str, Any]) -> str:
        step, elapsed = r["step"], r["elapsed_s"]
        eta = elapsed / step * (self.max_steps - step)
        f = lambda key, spec: "nan" if r.get(key) is None else format(r[key], spec)  # noqa: E731
        return (f"step {step:>4}/{self.max_steps} | reward {f('reward_mean', '.3f')} | loss {f('loss', '+.4f')} | "
                f"kl {f('kl', '.5f')} | len {f('completion_length', '.1f')} | clip {f('clip_fraction', '.3f')} | "
                f"tied {f('zero_std_fraction', '.2f')} | {elapsed / step:.1f} s/step | eta {eta / 60:.1f} min")

    def message(self, text: str) -> None:
        if not self.writes:
            return
        self.stream.write(text + "\n")
        self.stream.flush()
