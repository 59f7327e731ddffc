"""The trusted parent's side of one sandboxed run: reading the program's pipes (capped) and killing its tree.

Split from sandbox.py (layer 6 of its docstring). Before, a stdout flood kept the parent reading for the whole
time limit (0.7 s of CPU in 3 s); now a stream over its cap is closed, so the program's further writes fail
(EPIPE), and after _BUSY_WAKEUPS wakeups with data the parent reads at most every _THROTTLE_S, so a program
dripping a byte at a time cannot keep it busy either.
"""
from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import time

from rlvr.verifiers.code import sandbox_host

_GRACE_S = 0.5  # after the program exits (or is killed): time to drain pipes still held by leftovers
_BUSY_WAKEUPS = 64  # wakeups with data read at once (an honest run has a handful) ...
_THROTTLE_S = 0.005  # ... then at most one per 5 ms: data piles up in the pipe and is read in larger chunks


class Streams:
    """The pipes the parent reads: capped per stream; a stream over its cap is closed at once (and dropped from
    `owned`, which closes the rest after the run), so the program's further writes fail instead of costing
    the parent CPU until the deadline."""

    def __init__(self, readers: dict[str, int], owned: list[int], cap: int):
        self.names = {fd: name for name, fd in readers.items()}  # the open ones
        self.data = {name: bytearray() for name in readers}
        self.truncated: set[str] = set()
        self.owned, self.cap = owned, cap
        self.poller = select.poll()  # not select(): fds above 1024 are common in a busy trainer
        for fd in self.names:
            self.poller.register(fd, select.POLLIN)

    def read(self, fd: int) -> None:
        chunk = os.read(fd, 1 << 16)
        name = self.names[fd]
        buf = self.data[name]
        room = self.cap - len(buf)
        buf += chunk[:max(room, 0)]
        if len(chunk) > room:
            self.truncated.add(name)
        if not chunk or len(chunk) > room:
            self.poller.unregister(fd)
            del self.names[fd]
            if chunk:  # over the cap: close our end now (EOF just stops reading; the run closes it)
                os.close(fd)
                self.owned.remove(fd)


def collect(proc: subprocess.Popen, streams: Streams, deadline: float, cgroups: list[str],
             cut_after: tuple[bytes, float] | None) -> tuple[dict[str, bytes], set[str], bool, bool]:
    """Read every pipe (capped) until the program has exited and the pipes are closed, or the deadline.
    Returns (data, truncated streams, timed out, cut at the marker's deadline)."""
    poller = streams.poller
    try:
        wake = os.pidfd_open(proc.pid)  # readable when the launcher exits: no polling loop
        poller.register(wake, select.POLLIN)
    except (AttributeError, OSError):
        wake = None  # kernel < 5.3: poll every 10 ms instead
    end, timed_out, cut, exited, inner, busy, marked = deadline, False, False, False, None, 0, False
    try:
        while streams.names or not exited:
            now = time.monotonic()
            if now >= end:
                if exited:
                    break
                cut, timed_out = marked, not marked
                exited, end = True, now + _GRACE_S  # kill, then drain what is left
                _kill_tree(proc, cgroups, inner)
                continue
            if busy > _BUSY_WAKEUPS and not exited:
                time.sleep(min(_THROTTLE_S, max(end - now, 0)))
            step = end - now if wake is not None or exited else min(end - now, 0.01)
            ready = [fd for fd, _ in poller.poll(max(1, math.ceil(step * 1000))) if fd in streams.names]
            for fd in ready:
                streams.read(fd)
            busy += bool(ready)
            if cut_after is not None and not marked and cut_after[0] in streams.data.get("channel", b""):
                marked, end = True, min(end, time.monotonic() + cut_after[1])
            if inner is None and b"\n" in streams.data.get("status", b""):
                inner = _open_program(bytes(streams.data["status"]))
            if not exited and _has_exited(proc):
                exited, end = True, min(end, time.monotonic() + _GRACE_S)
                if wake is not None:
                    poller.unregister(wake)
                _kill_tree(proc, cgroups, inner)  # leftovers (unsandboxed daemons) would hold the pipes open
    finally:
        _kill_tree(proc, cgroups, inner)
        proc.wait()
        for fd in (wake, inner):
            if fd is not None and fd >= 0:
                os.close(fd)
    return {name: bytes(buf) for name, buf in streams.data.items()}, streams.truncated, timed_out, cut


def _has_exited(proc: subprocess.Popen) -> bool:
    """Without reaping: the pid (and so the process-group id) must stay reserved until we have killed."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (AttributeError, ChildProcessError):
        return proc.poll() is not None


def _open_program(status: bytes) -> int:
    """A pidfd for the sandboxed program (bwrap's child, from --json-status-fd), or -1."""
    try:
        return os.pidfd_open(int(json.loads(status.split(b"\n", 1)[0])["child-pid"]))
    except (ValueError, KeyError, TypeError, AttributeError, OSError):
        return -1


def _kill_tree(proc: subprocess.Popen, cgroups: list[str], program: int | None = None) -> None:
    """SIGKILL the program first, then the launcher's process group, then whatever is left in the cgroups.

    Program first: with --as-pid-1 it is bwrap's direct child, so bwrap reaps it and exits. Killing bwrap
    first orphans the program to the host's init as a zombie (measured here: reaped only ~2 s later).
    The pidfd makes this exact (no pid reuse race).
    """
    if program is not None and program >= 0 and not _has_exited(proc):
        try:
            signal.pidfd_send_signal(program, signal.SIGKILL)
            for _ in range(100):  # bwrap notices at once; bounded in case it does not
                if _has_exited(proc):
                    break
                time.sleep(0.002)
        except OSError:
            pass
    if proc.returncode is None:  # not reaped yet, so the group id cannot belong to anyone else
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    sandbox_host.kill(cgroups)
