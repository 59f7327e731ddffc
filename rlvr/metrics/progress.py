"""Progress of the long phases: training, evaluation, sampling.

    with progress("evaluating", total=800, unit="samples") as bar:
        bar.update(64)

On a terminal the phase is a live tqdm bar with rate and ETA. Where the output is a file or a pipe (a log, CI, a
job scheduler) carriage returns would garble it, so a plain line is written instead when the phase opens, at most
once every `interval_s` as it advances, and when it closes:

    evaluating: 120/800 samples (15 %) | 3.0 samples/s | eta 3.8 min

logging.progress picks the mode (auto = bar on a terminal, else lines; off = nothing). Lines are written on
update() only: no thread keeps ticking, so the rate shown is always that of finished work.
"""
from __future__ import annotations

import io
import os
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Callable, Literal, Protocol, TextIO

from rlvr.config.sections import LoggingConfig

Mode = Literal["auto", "bar", "lines", "off"]
LOGGING_DEFAULTS = LoggingConfig()  # the defaults live in the config section; read them, never repeat them


class Progress:
    """A phase that shows nothing (logging.progress=off, torchrun ranks other than 0); the base of the others."""

    done: int = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.done += n

    def advance_to(self, done: int) -> None:
        """Set the count to `done` (callers that know the total so far, e.g. a step number)."""
        self.update(done - self.done)

    def close(self) -> None:
        pass


class ProgressFactory(Protocol):
    """What long phases are handed to open their progress: a Reporter, or RunLogger.progress."""

    def __call__(self, label: str, total: int, unit: str = "it", initial: int = 0) -> Progress: ...


class _Lines(Progress):
    def __init__(self, label: str, total: int, unit: str, stream: TextIO, interval_s: float,
                 clock: Callable[[], float], initial: int, started: float | None):
        self.label, self.total, self.unit, self.stream = label, total, unit, stream
        self.interval_s, self.clock = interval_s, clock
        self.initial = self.done = initial  # a resumed phase: the rate counts only this process's work
        self.start = clock() if started is None else started
        self.last = clock()
        self.closed = False
        self.shown = self.done  # the count the latest line showed
        self._write(self.line(self.last))

    def update(self, n: int = 1) -> None:
        self.done += n
        now = self.clock()
        if now - self.last >= self.interval_s:
            self.last, self.shown = now, self.done
            self._write(self.line(now))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.done != self.shown:  # else the latest line already says where the phase ended
                self._write(self.line(self.clock()))

    def line(self, now: float) -> str:
        share = 100 * self.done / self.total if self.total else 100.0
        head = f"{self.label}: {self.done}/{self.total} {self.unit} ({share:.0f} %)"
        elapsed, work = now - self.start, self.done - self.initial
        if elapsed <= 0 or work <= 0:
            return head  # nothing measured yet: no rate, no guessed ETA
        rate = work / elapsed
        speed = f"{rate:.1f}" if rate >= 1 else f"{rate:.2g}"
        if self.done >= self.total:
            return f"{head} | {speed} {self.unit}/s | done in {elapsed / 60:.1f} min"
        return f"{head} | {speed} {self.unit}/s | eta {(self.total - self.done) / rate / 60:.1f} min"

    def _write(self, text: str) -> None:
        with clear_bars(self.stream):
            self.stream.write(text + "\n")
            self.stream.flush()


class _Bar(Progress):
    def __init__(self, label: str, total: int, unit: str, stream: TextIO, clock: Callable[[], float], initial: int,
                 started: float | None):
        from tqdm import tqdm

        # A pseudo-terminal that reports a 0 x 0 size (`script`, some containers) hides tqdm's bar: give it one
        sized = _columns(stream) != 0
        self.bar = tqdm(total=total, desc=label, unit=unit, file=stream, initial=initial, dynamic_ncols=sized,
                        ncols=None if sized else 80, nrows=None if sized else 24)
        self.done = initial
        if started is not None:
            # The phase began before the bar could be drawn (training draws it after step 1): date the bar back so
            # that the work done meanwhile counts in its rate and ETA.
            self.bar.start_t = self.bar.last_print_t = self.bar.start_t - (clock() - started)

    def update(self, n: int = 1) -> None:
        self.done += n
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


def _columns(stream: TextIO) -> int | None:
    """The terminal's width, None when it cannot be asked (a test's stream: tqdm picks its default then)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def resolve_mode(mode: Mode, stream: TextIO) -> Literal["bar", "lines", "off"]:
    if mode == "auto":
        return "bar" if isatty(stream) else "lines"
    return mode


def clear_bars(stream: TextIO) -> AbstractContextManager[object]:
    """Context for printing other text to `stream` while bars may be live: tqdm lifts them off the terminal and
    draws them again below the text, instead of the text landing in the middle of a bar."""
    if "tqdm" not in sys.modules:  # no bar can be live; do not import tqdm for nothing
        return nullcontext()
    from tqdm import tqdm

    return tqdm.external_write_mode(file=stream)


def progress(label: str, total: int, unit: str = "it", *, mode: Mode = LOGGING_DEFAULTS.progress,
             stream: TextIO | None = None, interval_s: float = LOGGING_DEFAULTS.progress_interval_s,
             clock: Callable[[], float] = time.monotonic, initial: int = 0, started: float | None = None) -> Progress:
    """Open the progress of one phase of `total` units (a context manager; update(n) as work finishes).

    stream: default sys.stderr. initial: units already done (a resumed run). started: clock() time at which the
    phase began when that was before this call (the rate then includes the time in between)."""
    stream = stream if stream is not None else sys.stderr
    kind = resolve_mode(mode, stream)
    if kind == "bar":
        return _Bar(label, total, unit, stream, clock, initial, started)
    if kind == "lines":
        return _Lines(label, total, unit, stream, interval_s, clock, initial, started)
    return Progress()


@dataclass(frozen=True)
class Reporter:
    """How progress is shown, fixed once from logging.* and handed to the code that runs a long phase."""

    mode: Mode = LOGGING_DEFAULTS.progress
    stream: TextIO | None = None  # None: sys.stderr when a phase opens (read late, so a redirected stderr counts)
    interval_s: float = LOGGING_DEFAULTS.progress_interval_s

    @classmethod
    def from_config(cls, config: LoggingConfig, stream: TextIO | None = None, writes: bool = True) -> "Reporter":
        """writes=False (torchrun ranks other than 0): nothing is shown, so the console holds each phase once."""
        return cls(config.progress if writes else "off", stream, config.progress_interval_s)

    def __call__(self, label: str, total: int, unit: str = "it", initial: int = 0) -> Progress:
        return progress(label, total, unit, mode=self.mode, stream=self.stream, interval_s=self.interval_s,
                        initial=initial)


SILENT = Reporter("off")
