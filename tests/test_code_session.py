"""Attacks on the live session (code/session.py): what the candidate can reach from the
sandbox, what waiting for it costs the parent (M12) and the trainer's garbage collector while it
waits. All run the real sandbox.
"""
from __future__ import annotations

import gc
import json
import threading
import time

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.code.budget import Budget
from rlvr.verifiers.code.chains import CandidateCall
from rlvr.verifiers.code.sandbox import SandboxConfig, probe
from rlvr.verifiers.code.session import Session

_PROBE = probe()  # cached; the `sandbox` mark decides skip or fail
pytestmark = pytest.mark.sandbox


def verify(code: str, reference: dict, time_limit_s: float = 5.0):
    from rlvr.verifiers.code.verifier import CodeVerifier

    return CodeVerifier(sandbox=SandboxConfig(time_limit_s=time_limit_s)).verify(code, json.dumps(reference))


PIPES = ("import os, sys\ndef f():\n    fds = [int(n) for n in os.listdir('/proc/self/fd')]\n"
         "    links = [os.readlink(f'/proc/self/fd/{n}') if os.path.exists(f'/proc/self/fd/{n}') else ''\n"
         "             for n in fds]\n"
         "    return sorted(n for n, link in zip(fds, links) if link.startswith('pipe:'))\n"
         "def channel():\n    return int(sys.argv[1])\n")


def test_the_candidate_holds_no_pipe_but_the_protocols():
    # copies of the parent's stdout and stderr pipes stayed open (fds 4 and 6); a drip on one used the
    # parent's whole budget. Only two pipes are left: the requests (a dup of the harness's stdin) and the channel.
    with Session(PIPES, "f", SandboxConfig(time_limit_s=5.0)) as session, Budget(10.0):
        pipes = session.call(CandidateCall("f", [["call", [], []]]))
        channel = session.call(CandidateCall("channel", [["call", [], []]]))
    assert pipes.ok and channel.ok, (pipes, channel)
    assert len(pipes.value) == 2 and channel.value in pipes.value, pipes.value


def test_a_drip_on_the_channel_costs_the_parent_little():
    # a call that writes its line a byte every 0.5 ms for the whole limit: after 64 wakeups the parent reads it at
    # most every 5 ms, waiting twice as long every 16 wakeups up to 0.25 s (session._line): ~180 wakeups over
    # 10 s, where 5 ms each made 2,000 (and 6,000 over 30 s, the parent's whole 0.1 s budget)
    code = ("import os, sys, time\ndef f(n):\n    while True:\n        os.write(int(sys.argv[1]), b'1')\n"
            "        time.sleep(0.0005)")
    start = time.process_time()
    verdict = verify(code, {"asserts": ["assert f(1) == 1"]}, time_limit_s=10.0)
    cpu = time.process_time() - start
    assert verdict.outcome is Outcome.TIMEOUT, verdict.detail
    assert cpu < 0.05, cpu  # 18 ms here, 41 ms with 5 ms throttling (process CPU: not the sandbox's own)


def test_a_spent_budget_ends_the_session_without_waiting_for_the_limit():
    # M12: every wait checks the budget. With none left, the session ends at its first wait ("budget ... spent");
    # without the check the call below would wait for the candidate's 3 s sleep and end in a timeout
    with Session("import time\ndef f():\n    time.sleep(10)", "f", SandboxConfig(time_limit_s=3.0)) as session, \
            Budget(1e-9):
        result = session.call(CandidateCall("f", [["call", [], []]]))
    assert not result.ok and "budget" in result.value and "timed out" not in result.value, result


def test_the_trainers_collector_runs_while_the_candidate_sleeps():
    # the collector was paused for the whole session; a candidate sleeping 2 s kept it off (up to 60 s)
    was, seen = gc.isenabled(), []
    gc.enable()
    watcher = threading.Thread(target=lambda: (time.sleep(0.7), seen.append(gc.isenabled())))
    try:
        watcher.start()
        verdict = verify("import time\ndef f(x):\n    time.sleep(1.5)\n    return 1", {"asserts": ["assert f(1) == 1"]})
        watcher.join()
        assert verdict.outcome is Outcome.CORRECT and seen == [True] and gc.isenabled(), (verdict.detail, seen)
    finally:
        (gc.enable if was else gc.disable)()
