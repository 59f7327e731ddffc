"""Metric records and where they go: metrics.jsonl (one object per optimizer step) and samples.jsonl always, the
optional sinks of logging.* (rlvr/metrics/sinks.py), and a progress line per step (with a live bar on a terminal)."""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, TextIO

from rlvr.metrics.progress import LOGGING_DEFAULTS, Mode, Progress, clear_bars, progress, resolve_mode
from rlvr.metrics.sinks import JsonlSink, Sink, append_lines

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig


def batch_accounting(config: RunConfig) -> str:
    """The numbers a user should check before a long run."""
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
    and the console hold each step once. `sinks`: the optional ones (rlvr.metrics.sinks.build_sinks); one
    that raises is dropped with one warning and the run goes on, as metrics.jsonl does. `progress_mode`:
    logging.progress; on a terminal (auto) the step lines are printed above a live bar of the steps."""

    def __init__(self, run_dir: Path, max_steps: int, stream: TextIO | None = None, writes: bool = True,
                 sinks: Sequence[Sink] = (), progress_mode: Mode = LOGGING_DEFAULTS.progress,
                 interval_s: float = LOGGING_DEFAULTS.progress_interval_s):
        self.jsonl = JsonlSink(run_dir)
        self.metrics_path, self.samples_path = self.jsonl.metrics_path, self.jsonl.samples_path
        self.max_steps = max_steps
        # sys.stdout as it is now, not as it was when this module was imported: a default argument would keep the
        # stream of whoever imported it first (a pytest capture closed since: 'I/O operation on closed file')
        self.stream = stream if stream is not None else sys.stdout
        self.start = time.monotonic()
        self.created = self.start  # when the loop began: the steps' bar is dated back to it
        self.writes = writes
        self.sinks = list(sinks) if writes else []
        self.progress_mode: Mode = progress_mode if writes else "off"
        self.interval_s = interval_s
        self._bar: Progress | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def log_step(self, record: dict[str, Any]) -> None:
        if not self.writes:
            return
        record = {"step": record["step"], "elapsed_s": round(self.elapsed(), 3),
                  **{k: _clean(v) for k, v in record.items() if k != "step"}}
        self.jsonl.scalars(record["step"], record)
        self._to_sinks("scalars", record["step"], record)
        self.message(self._progress_line(record))
        self._advance_bar(record["step"])  # after the line: the last step's line stays above the finished bar

    def log_eval(self, step: int, metrics: dict[str, Any]) -> None:
        """A row with only held-out metrics (the end-of-run evaluation, made after the last step's row)."""
        if not self.writes:
            return
        row = {"step": step, "elapsed_s": round(self.elapsed(), 3), **{k: _clean(v) for k, v in metrics.items()}}
        self.jsonl.scalars(step, row)
        self._to_sinks("scalars", step, row)

    def log_samples(self, rows: list[dict[str, Any]]) -> None:
        if not self.writes:
            return
        step = rows[0]["step"] if rows else 0
        self.jsonl.completions(step, rows)
        if rows:
            self._to_sinks("completions", step, rows)

    def progress(self, label: str, total: int, unit: str = "it", initial: int = 0) -> Progress:
        """A long phase of the run (the evaluation): shown on this logger's stream, nothing on ranks > 0."""
        return progress(label, total, unit, mode=self.progress_mode, stream=self.stream, interval_s=self.interval_s,
                        initial=initial)

    def close(self) -> None:
        """End of the run: the steps' bar and every sink closed (a sink that fails to close is reported)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._to_sinks("close")
        self.sinks = []

    def _to_sinks(self, method: str, *args: Any) -> None:
        for sink in list(self.sinks):
            try:
                getattr(sink, method)(*args)
            except Exception as err:  # noqa: BLE001 - an optional sink must never stop a training run
                self.sinks.remove(sink)
                self.message(f"WARNING: the {sink.name} sink failed ({type(err).__name__}: {err}); it is switched off "
                             f"for the rest of the run (metrics.jsonl keeps every step)")

    def _advance_bar(self, step: int) -> None:
        """On a terminal: a live bar of the steps, drawn from the first logged step on (dated back to when the loop
        began, so its rate counts that step too) and closed after the last."""
        if resolve_mode(self.progress_mode, self.stream) != "bar":
            return  # off a terminal the step lines are the whole progress report, as before
        if self._bar is None:
            self._bar = progress("training", self.max_steps, "step", mode="bar", stream=self.stream,
                                 initial=step - 1, started=self.created)
        self._bar.advance_to(step)
        if step >= self.max_steps:
            self._bar.close()
            self._bar = None

    def log_group(self, row: dict[str, Any] | None) -> None:
        """groups.jsonl: one group's completions with per-token advantages and ratios (the dashboard's group view)."""
        if not self.writes or row is None:
            return
        append_lines(self.metrics_path.parent / "groups.jsonl", [row])

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
        with clear_bars(self.stream):  # above a live bar rather than through it
            self.stream.write(text + "\n")
            self.stream.flush()
