"""How a torchrun rank ends (rlvr/distributed/exit.py): Python's exit steps are kept, only the teardown is skipped.

The teardown race itself (a gloo worker asking for the GIL while the interpreter finalizes: SIGABRT) is timing-
dependent and is not reproduced here; the torchrun tests in test_distributed.py run through this exit."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rlvr.cli.allocator
import rlvr.cli.main as cli
from rlvr.distributed.exit import is_torchrun_rank

ROOT = Path(__file__).resolve().parent.parent

# Each line is something a normal exit does and os._exit alone would lose: the thread would be killed mid-sleep,
# the atexit file never written, the piped (block-buffered) stdout dropped, and the idle executor worker would
# make a plain join of every thread wait forever (threading's exit hooks stop it first).
SCRIPT = textwrap.dedent("""
    import atexit, concurrent.futures, sys, threading, time
    from pathlib import Path
    from rlvr.distributed.exit import exit_rank

    out = Path(sys.argv[1])
    # Python's order: threads joined first, then the atexit callbacks (which may read what the threads wrote)
    atexit.register(lambda: (out / "atexit").write_text("after the thread" if (out / "thread").exists() else
                                                        "before the thread"))

    def late():
        time.sleep(0.3)
        (out / "thread").write_text("joined")

    threading.Thread(target=late).start()
    concurrent.futures.ThreadPoolExecutor(1).submit(int).result()
    sys.stdout.write("buffered")
    exit_rank(3)
    print("after exit_rank")
""")


def test_exit_rank_keeps_what_a_normal_exit_does(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered"  # flushed, and nothing after exit_rank ran
    assert (tmp_path / "thread").read_text() == "joined"
    assert (tmp_path / "atexit").read_text() == "after the thread"  # the order was not checked


@pytest.mark.parametrize(("world", "expected"), [("2", True), ("8", True), ("1", False), ("", False),
                                                 ("two", False), (None, False)])
def test_is_torchrun_rank(world, expected):
    assert is_torchrun_rank({} if world is None else {"WORLD_SIZE": world}) is expected


@pytest.fixture
def exits(monkeypatch) -> list[int]:
    """main()'s exit_rank calls, recorded instead of ending pytest's process."""
    calls: list[int] = []

    def record(code: int):
        calls.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(cli, "exit_rank", record)
    monkeypatch.setattr(rlvr.cli.allocator, "restart_with_tcmalloc", lambda argv: None)  # no exec of pytest
    return calls


def test_the_rlvr_command_on_a_rank_ends_through_exit_rank(exits, monkeypatch):
    # `rlvr eval` on 2 ranks is refused (exit 2) before any model loads: the cheapest command that reaches the end
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(sys, "argv", ["rlvr", "eval", "none"])
    with pytest.raises(SystemExit):
        cli.main()
    assert exits == [2]


def test_calls_from_python_and_single_process_runs_return_normally(exits, monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert cli.main(["eval", "none"]) == 2  # a call from Python: the caller's process goes on
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setattr(sys, "argv", ["rlvr", "verify", "--help"])
    with pytest.raises(SystemExit) as stop:  # argparse's own exit after --help, not exit_rank
        cli.main()
    assert stop.value.code == 0
    assert exits == []
    assert "runs in one process" in capsys.readouterr().err


def test_is_torchrun_rank_reads_the_environment_by_default(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert is_torchrun_rank() is True
    assert is_torchrun_rank({}) is False  # an explicit mapping is read instead of the environment
    monkeypatch.delenv("WORLD_SIZE")
    assert is_torchrun_rank() is False and is_torchrun_rank({"WORLD_SIZE": "2"}) is True


class _Stream:
    """A stream whose flush fails as a closed (ValueError) or broken (BrokenPipeError) one does."""

    def __init__(self, error: Exception | None):
        self.error, self.flushed = error, False

    def flush(self):
        if self.error is not None:
            raise self.error
        self.flushed = True


@pytest.mark.parametrize("error", [BrokenPipeError(32, "Broken pipe"), ValueError("I/O operation on closed file"),
                                   None])
def test_exit_rank_runs_python_s_exit_steps_in_order_and_ends_even_when_a_stream_is_gone(monkeypatch, error):
    """In-process, each step recorded: the threads are joined, then the atexit callbacks run, then both streams
    are flushed (a stdout whose reader went away, or a closed stderr, must not keep the rank from ending with its
    code), then the process ends with that code."""
    import atexit
    import threading

    import rlvr.distributed.exit as exit_module

    steps: list[str] = []
    out, err = _Stream(error), _Stream(None)
    monkeypatch.setattr(threading, "_shutdown", lambda: steps.append("threads"))
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: steps.append("atexit"))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)

    def end(code: int):
        steps.append(f"exit {code}")
        raise SystemExit(code)

    monkeypatch.setattr(exit_module.os, "_exit", end)
    with pytest.raises(SystemExit):
        exit_module.exit_rank(3)
    assert steps == ["threads", "atexit", "exit 3"]
    assert out.flushed is (error is None) and err.flushed  # stderr is flushed after a failed stdout too
