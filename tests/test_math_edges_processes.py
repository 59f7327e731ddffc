"""Mutation survivors: the math verifier's process edges, run in the test process.

- MathVerifyWorker._cpu reads the worker's CPU time from /proc/<pid>/stat. The tests hand it crafted stat lines
  (through the module's `open`), so the parsing is checked exactly: the process name (field 2) may hold ')' and
  spaces, which is why the line is split at its LAST ')'.
- worker.py's `if __name__ == "__main__":` block runs as a separate process in production, where coverage cannot
  see it; here runpy runs the file as __main__ in-process, with stdin, stdout and os._exit replaced.
"""
from __future__ import annotations

import io
import logging
import os
import runpy
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import rlvr.verifiers.math.verifier as verifier_module
from rlvr.verifiers.math.verifier import MathVerifyWorker

WORKER_FILE = Path(verifier_module.__file__).parent / "worker.py"


# ---------------------------------------------------------------- MathVerifyWorker._cpu
def stat_line(name: bytes, state: bytes, utime: int, stime: int) -> bytes:
    """A /proc/<pid>/stat line (proc(5)): pid (name) state, then fields 4..13, utime (14), stime (15), cutime (16),
    cstime (17) and more. Every other number is distinct from utime and stime so a wrong index shows."""
    after = [state, *(str(100 + n).encode() for n in range(4, 14)), str(utime).encode(), str(stime).encode(),
             b"9999", b"8888", b"20", b"0", b"1", b"0", b"12345"]
    return b"4242 (" + name + b") " + b" ".join(after) + b"\n"


def worker_reading(monkeypatch, content: bytes | Exception) -> tuple[float | None, bool]:
    """What _cpu returns when the worker's stat file holds `content` (or opening it raises `content`)."""
    opened = []

    def fake_open(path, mode="r", *args, **kwargs):
        opened.append((path, mode))
        if isinstance(content, Exception):
            raise content
        return io.BytesIO(content)

    monkeypatch.setattr(verifier_module, "open", fake_open, raising=False)  # the module's global, before builtins
    worker = MathVerifyWorker()
    worker._proc = SimpleNamespace(pid=4242)  # never started: only its pid is read
    reading = worker._cpu()
    assert opened == [("/proc/4242/stat", "rb")]
    return reading


@pytest.mark.parametrize("name", [b"python", b"a) b", b"x) R 1 2 (y", b")", b"py thon) (z"])
def test_cpu_time_is_utime_plus_stime_whatever_the_process_name(monkeypatch, name):
    # utime 300 + stime 45 ticks = 345 ticks; the name's own ')' and spaces must not shift the fields (split at the
    # last ')'), and cutime (9999) is a child's time, not the worker's
    reading = worker_reading(monkeypatch, stat_line(name, b"R", 300, 45))
    assert reading == (345 / os.sysconf("SC_CLK_TCK"), True)


@pytest.mark.parametrize("state, runnable", [(b"R", True), (b"S", False), (b"D", False), (b"Z", False)])
def test_only_state_r_is_runnable(monkeypatch, state, runnable):
    # field 3, the first after the name: R is running or runnable; S sleeping, D disk wait, Z zombie are not
    assert worker_reading(monkeypatch, stat_line(b"a) b", state, 7, 0)) == (7 / os.sysconf("SC_CLK_TCK"), runnable)


@pytest.mark.parametrize("error", [FileNotFoundError(2, "gone"), PermissionError(13, "denied"), OSError(5, "io")])
def test_an_unreadable_stat_file_reads_as_unknown(monkeypatch, error):
    # the worker exited (no /proc entry) or /proc is not there (not Linux): no reading, never an exception
    assert worker_reading(monkeypatch, error) == (None, False)


@pytest.mark.parametrize("content", [
    stat_line(b"a) b", b"R", 300, 45).replace(b"300", b"3x0"),  # a field that is no number: ValueError
    b"4242 (python) R 1 2 3\n",  # too few fields: IndexError
    b"4242 python R 1 2 3 4 5 6 7 8 9 10 11 12 13\n",  # no ')' at all: IndexError
])
def test_a_malformed_stat_line_reads_as_unknown(monkeypatch, content):
    assert worker_reading(monkeypatch, content) == (None, False)


def test_a_worker_without_a_process_reads_as_unknown():
    # before the first start (or after close) _proc is None: None.pid is an AttributeError, caught
    assert MathVerifyWorker()._cpu() == (None, False)


# ---------------------------------------------------------------- worker.py run as __main__
class Exited(BaseException):
    """Raised by the stand-in for os._exit, which would end the test process."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class BrokenStdout(io.StringIO):
    """A stdout whose reader has gone: every write fails as a closed pipe does."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.fixture
def as_main(monkeypatch):
    """Runs worker.py as __main__ with the given stdin and stdout; returns the os._exit code, or None when the
    program ended without calling it. main() ignores SIGINT and silences logging: both are put back."""
    def exit_now(code: int) -> None:
        raise Exited(code)

    monkeypatch.setattr(os, "_exit", exit_now)
    sigint, disabled = signal.getsignal(signal.SIGINT), logging.root.manager.disable

    def run(stdin: str, stdout: io.StringIO) -> int | None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        monkeypatch.setattr(sys, "stdout", stdout)  # main() swaps it for stderr; monkeypatch puts the real one back
        try:
            runpy.run_path(str(WORKER_FILE), run_name="__main__")
        except Exited as exited:
            return exited.code
        finally:
            signal.signal(signal.SIGINT, sigint)
            logging.disable(disabled)
        return None

    return run


def test_the_worker_says_ready_and_ends_at_the_end_of_its_input(as_main):
    # no requests (stdin at EOF): main() warms the parser, writes 'ready' to the real stdout and returns; the
    # program ends normally, without os._exit
    out = io.StringIO()
    assert as_main("", out) is None
    assert out.getvalue() == "ready\n"


def test_a_parent_gone_before_ready_ends_the_worker_quietly(as_main):
    # the parent exited before reading 'ready': the write raises BrokenPipeError, and the worker leaves at once with
    # status 0 (os._exit: no traceback, no flushing a dead pipe again at interpreter exit)
    assert as_main("", BrokenStdout()) == 0
