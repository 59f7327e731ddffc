"""A live sandboxed run per completion: the parent's calls go to the candidate one at a time.

Before, the asserts' calls ran in rounds: every call whose arguments were known went to one sandbox run,
nested calls (`f(g(1) + 1)`) to the next run, in a fresh process, and calls of branches Python might not take
ran last. A function that keeps state between calls (a counter, a cache, a class-level registry) then saw another
order than the asserts', or lost its state between rounds. Now one sandboxed harness (harness_main.py) loads the
code once and answers each call when the parent's evaluation reaches it, so the candidate sees exactly the calls
Python would make, in Python's order, in one process; a `check(candidate)` program's calls go the same way.

The sandbox's guarantees are run_sandboxed's (code/sandbox.py: the same launcher, bwrap, rlimits, cgroups); the
wall-clock limit covers the whole session. The parent's side stays bounded: every wait checks the completion's
CPU budget (code/budget.py), a result line is capped at SandboxConfig.max_output_bytes and decoded only if the
budget can pay for it, a program that drips bytes without finishing a line is read after 64 wakeups at most
every 5 ms, then twice as long every 16 wakeups up to 0.25 s (bench's channel_drip_for_ten_seconds: 18 ms of
parent CPU; 41 ms with 5 ms throttling, and 30 s of it spent the whole budget), the trainer's garbage collector
runs during the waits (code/budget.Budget.waiting), and a line the protocol does not expect ends the session
(code/harness.py). After the session ends, every call fails
with the reason, so nothing the candidate does after a timeout, exit or forged line can pass a test.
"""
from __future__ import annotations

import math
import os
import select
import threading
import time

from rlvr.verifiers.code import sandbox
from rlvr.verifiers.code.budget import OverBudget, check, waiting
from rlvr.verifiers.code.evaluate import MISSING, CallResult, CandidateCall
from rlvr.verifiers.code.harness import Desync, harness_files, read_reply, read_start, request
from rlvr.verifiers.code.sandbox import CHANNEL_FD, PYTHON, SandboxConfig
from rlvr.verifiers.code.sandbox_io import Streams, _kill_tree, _open_program

MAX_CALLS = 20_000  # per completion; the CPU budget normally ends a longer session first (about 30 us a call here)
_BUSY_WAKEUPS = 64  # wakeups without a whole line (an honest reply needs one or two) ...
_THROTTLE_S = 0.005  # ... then at most one per 5 ms, so a byte-at-a-time drip cannot keep the parent busy,
_MAX_THROTTLE_S = 0.25  # and slower and slower: with 5 ms always, a 30 s drip cost the whole 0.1 s budget


class Session:
    """One completion's calls: `call()` answers each in order, `problem` says why the session ended early (for the
    verdict: "timeout", "timeout after some tests", "sandbox failed ...", "code failed to load: ..."), `close()`
    kills what is left. Started at the first call."""

    def __init__(self, code: str, entry: str | None, config: SandboxConfig):
        self.config, self.files = config, harness_files(code, entry)
        self.live: sandbox.Spawned | None = None
        self.streams: Streams | None = None
        self.inner: int | None = None  # a pidfd of the sandboxed program, for an exact kill (sandbox_io)
        self.deadline = 0.0
        self.ended = ""  # why every further call fails
        self.problem = ""
        self.sent = self.answered = 0
        self._lock = threading.Lock()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, call: CandidateCall) -> CallResult:
        with self._lock:  # a check program's threads: one call at a time, or the protocol would interleave
            return self._call(call)

    def _call(self, call: CandidateCall) -> CallResult:
        if self.live is None and not self.ended:
            self._start()
        if self.ended:
            return CallResult(False, self.ended)
        if self.sent >= MAX_CALLS:
            return self._end(f"more than {MAX_CALLS} candidate calls for one completion")
        try:
            self._send(request(call))
            raw = self._line()
            if raw is None:
                return CallResult(False, self.ended)
            result = read_reply(raw, self.sent, call)
        except Desync as err:
            return self._end(f"{MISSING[:-1]}; {err})")
        except OverBudget as err:
            return self._end(str(err))
        except OSError as err:  # the machine's fault, not the candidate's: the verdict says so (ERROR when none passed)
            self.problem = self.problem or f"sandbox failed: {err}"
            return self._end(f"no result (sandbox failed: {err})")
        self.sent += 1
        self.answered += 1
        return result

    def close(self) -> None:
        live, self.live = self.live, None
        if live is None:
            return
        _kill_tree(live.proc, live.cgroups, self.inner)
        live.proc.wait()
        if self.inner is not None and self.inner >= 0:
            os.close(self.inner)
        live.release()

    # ---------------------------------------------------------------- the session's life
    def _start(self) -> None:
        argv = [PYTHON, "-I", "-B", "harness.py", CHANNEL_FD]
        try:
            self.live = sandbox.start_sandboxed(argv, self.config, self.files)
        except (OSError, sandbox.SandboxUnavailable) as err:  # no fork, no fds, no sandbox: never the candidate's
            self.problem = f"sandbox failed: {err}"
            self._end(f"no result (sandbox failed: {err})")
            return
        self.streams = Streams(self.live.readers, self.live.owned, self.config.max_output_bytes)
        self.deadline = self.live.start + self.config.time_limit_s
        for expected in ("ready", "loaded"):
            try:
                raw = self._line()
                failure = "" if raw is None else read_start(raw, expected)
            except (Desync, OverBudget) as err:
                raw, failure = None, str(err)
            if expected == "ready" and raw is None and not self.problem:
                self._failed()
            if raw is None or failure:
                if failure.startswith("code failed to load"):
                    self.problem = failure
                self._end(failure or self.ended)
                return

    def _failed(self) -> None:
        """The harness never started: the sandbox failed (bwrap's complaint is on stderr)."""
        live, streams = self.live, self.streams
        _kill_tree(live.proc, live.cgroups, self.inner)
        live.proc.wait()
        code, signal = sandbox.exit_status(live.proc.returncode, live.sandboxed)
        stderr = bytes(streams.data["stderr"]).decode(errors="replace").strip()[-300:]
        self.problem = f"sandbox failed (exit {code}, signal {signal}): {stderr}"

    def _end(self, why: str) -> CallResult:
        if not self.ended:
            self.ended = why or MISSING
            if self.live is not None:
                _kill_tree(self.live.proc, self.live.cgroups, self.inner)
        return CallResult(False, self.ended)

    def _timeout(self) -> None:
        self.problem = self.problem or ("timeout after some tests" if self.answered else "timeout")
        self._end(f"no result: timed out after {self.config.time_limit_s:g}s")

    # ---------------------------------------------------------------- the pipes
    def _send(self, data: bytes) -> None:
        view, fd = memoryview(data), self.live.stdin
        while view:
            try:
                view = view[os.write(fd, view):]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise Desync("the program closed its input") from None
            self.streams.poller.register(fd, select.POLLOUT)  # wait for room, reading the program meanwhile
            try:
                if not self._wait():
                    raise Desync("no room to send the call")
            finally:
                self.streams.poller.unregister(fd)

    def _line(self) -> bytes | None:
        """The channel's next line, or None once the session ended (exit, timeout, a line over the cap)."""
        channel, busy = self.streams.data["channel"], 0
        while True:
            end = channel.find(b"\n")
            if end >= 0:
                line = bytes(channel[:end])
                del channel[:end + 1]
                return line
            if "channel" in self.streams.truncated:
                self._end(f"no result: a result line over the {self.config.max_output_bytes}-byte cap")
                return None
            if self.live.readers["channel"] not in self.streams.names:  # EOF: the program exited
                self._end(MISSING)
                return None
            if busy > _BUSY_WAKEUPS:  # a drip: every 16 further wakeups wait twice as long, up to 0.25 s
                with waiting():
                    time.sleep(min(_THROTTLE_S * 2 ** ((busy - _BUSY_WAKEUPS) // 16), _MAX_THROTTLE_S))
            if not self._wait():
                return None
            busy += 1

    def _wait(self) -> bool:
        """One poll of the pipes, reading what is ready; False when the deadline passed (the session then ended)."""
        check()  # the completion's CPU budget: OverBudget ends the session in call()
        left = self.deadline - time.monotonic()
        if left <= 0:
            self._timeout()
            return False
        with waiting():  # the trainer's garbage collector runs meanwhile (code/budget.py)
            events = self.streams.poller.poll(max(1, math.ceil(left * 1000)))
        for fd, _ in events:
            if fd in self.streams.names:
                self.streams.read(fd)
        if self.inner is None and b"\n" in self.streams.data.get("status", b""):
            self.inner = _open_program(bytes(self.streams.data["status"]))
        return True
