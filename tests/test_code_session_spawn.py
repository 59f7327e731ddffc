"""Mutation follow-up: what sandbox._spawn leaves behind (on success and when the start fails), the
session's non-blocking stdin, the session's report of a sandbox that never started, and the pidfd it keeps for
the sandboxed program.

All but the last test start a plain local process through _spawn's unsandboxed path with a host that has no
optional layer (no bwrap, prlimit, setpriv or cgroups), so they need no sandbox; the last runs the real one.
"""
from __future__ import annotations

import os
import sys

import pytest

from rlvr.verifiers.code import sandbox, sandbox_host
from rlvr.verifiers.code.budget import Budget
from rlvr.verifiers.code.chains import CandidateCall
from rlvr.verifiers.code.sandbox import SandboxConfig, Spawned
from rlvr.verifiers.code.session import Session

BARE = sandbox._Host(None, None, None, {}, "", None, "", frozenset())  # _spawn then only pipes and a scratch dir


def open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


def spawn(code: str) -> Spawned:
    """`code` run by this interpreter, unsandboxed, with a channel and a stdin pipe (as start_sandboxed asks)."""
    return sandbox._spawn([sys.executable, "-c", code], None, SandboxConfig(), BARE, False, {"a.txt": b"x"}, True)


def end(spawned: Spawned) -> None:
    spawned.proc.kill()
    spawned.proc.wait()
    spawned.release()


def test_release_closes_every_fd_and_removes_the_scratch_dir(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "main.py").write_text("pass")
    r, w = os.pipe()
    owned = [r, w]
    Spawned(None, {"stdout": r}, owned, [], str(scratch), 0.0, False).release()
    assert owned == [] and not scratch.exists()
    for fd in (r, w):  # closed: nothing else in this test opens an fd that could take the number again
        with pytest.raises(OSError):
            os.fstat(fd)
    Spawned(None, {}, [], [], None, 0.0, True).release()  # no scratch dir (sandboxed): nothing to remove


def test_a_start_that_fails_leaves_no_fd_and_no_scratch_dir(monkeypatch):
    # fork failing (EAGAIN) after the pipes, memfds and scratch dir exist: _spawn must release all of them
    # before re-raising, or each failed start in a trainer leaks ~8 fds and a directory
    made, real = [], sandbox_host.scratch_dir

    def scratch_dir(files, drop):
        made.append(real(files, drop))
        return made[-1]

    def no_fork(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(sandbox.sandbox_host, "scratch_dir", scratch_dir)
    monkeypatch.setattr(sandbox.subprocess, "Popen", no_fork)
    before = open_fds()
    with pytest.raises(OSError, match="temporarily unavailable"):
        spawn("pass")
    assert open_fds() == before
    assert len(made) == 1 and not os.path.exists(made[0])


def test_the_stdin_write_end_is_non_blocking():
    # the session writes each request to the program's stdin and, when the pipe is full, polls while reading the
    # program's output (session._send); a blocking write would hang the parent on a program that does not read
    spawned = spawn("import time\ntime.sleep(60)")
    try:
        assert spawned.stdin is not None and os.get_blocking(spawned.stdin) is False
        with pytest.raises(BlockingIOError):
            for _ in range(64):  # a pipe holds 64 KiB by default; 64 times 64 KiB cannot all fit
                os.write(spawned.stdin, b"x" * 65536)
    finally:
        end(spawned)


def test_a_sandbox_that_never_starts_is_reported_with_the_tail_of_its_stderr(monkeypatch):
    # the launcher exits with 3 before the harness says "ready", leaving 400 bytes, a byte that is not UTF-8 and
    # " tail" on stderr: the problem names the exit and the last 300 characters, the bad byte replaced by U+FFFD
    # (294 x's, U+FFFD, " tail": 300 characters, by hand)
    junk = "import os\nos.write(2, b'x' * 400 + b'\\xff tail')\nraise SystemExit(3)"
    monkeypatch.setattr(sandbox, "start_sandboxed", lambda argv, config, files: spawn(junk))
    with Session("def f():\n    return 1", "f", SandboxConfig(time_limit_s=10.0)) as session, Budget(10.0):
        result = session.call(CandidateCall("f", [["call", [], []]]))
    assert not result.ok
    assert session.problem == "sandbox failed (exit 3, signal None): " + "x" * 294 + "\ufffd tail", session.problem


@pytest.mark.sandbox
def test_the_session_holds_a_pidfd_of_the_sandboxed_program_itself():
    # bwrap's status line names the program's pid; the session opens a pidfd for it at its first wait, so that
    # killing it is exact and comes first (sandbox_io._kill_tree: bwrap killed first orphans it as a zombie).
    # The pidfd's fdinfo names the pid; that process is the harness (not bwrap, not the launcher).
    with Session("def f():\n    return 1", "f", SandboxConfig(time_limit_s=10.0)) as session, Budget(10.0):
        result = session.call(CandidateCall("f", [["call", [], []]]))
        assert result.ok and result.value == 1, result
        assert session.inner is not None and session.inner >= 0, session.inner
        with open(f"/proc/self/fdinfo/{session.inner}") as info:
            pid = next(int(line.split()[1]) for line in info if line.startswith("Pid:"))
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
        assert b"harness.py" in argv and not any(a.endswith(b"bwrap") for a in argv), argv


@pytest.mark.parametrize("code,sandboxed,status", [
    (0, True, (0, None)), (3, False, (3, None)),
    (-9, False, (None, 9)), (-9, True, (None, 9)),  # Popen: killed by signal 9
    (137, True, (None, 9)),  # bwrap reports a child killed by signal N as 128 + N
    (137, False, (137, None)), (128, True, (128, None)),  # unsandboxed, or not over 128: an exit code
])
def test_exit_status_separates_exit_codes_from_signals(code, sandboxed, status):
    assert sandbox.exit_status(code, sandboxed) == status
