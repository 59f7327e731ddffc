"""Mutation follow-up (batch g2): bounds and edges of code/decimals.py, evaluate.py, harness_main.py,
methods.py and session.py that no test told apart from a one-line change.

Charges are counted with a stand-in for `check` (as test_code_sort_budget does), never timed; the harness's encoder
runs in this process (test_code_wire_bounds); the session's pipe paths run against a real, full, non-blocking pipe
behind a stand-in for the sandboxed program, so no sandbox is needed.
"""
from __future__ import annotations

import json
import os
import select
from types import SimpleNamespace

import pytest

from rlvr.verifiers.code import decimals, harness_main
from rlvr.verifiers.code import session as session_module
from rlvr.verifiers.code.budget import Budget, Failed
from rlvr.verifiers.code.chains import CandidateCall
from rlvr.verifiers.code.decimals import FREE_WEIGHT, SORT_S, order_bound, order_weight
from rlvr.verifiers.code.evaluate import CallResult
from rlvr.verifiers.code.methods import attribute
from rlvr.verifiers.code.reference import judge_asserts, parse_reference
from rlvr.verifiers.code.sandbox import SandboxConfig
from rlvr.verifiers.code.session import Session
from rlvr.verifiers.code.values import MAX_ITEMS
from rlvr.verifiers.code.wire import decode, encode

HARNESS_ENCODE = harness_main._encoder()


# ---------------------------------------------------------------- decimals.order_weight: how deep, how far
def test_nested_lists_are_counted_four_levels_deep(monkeypatch):
    # 16 items of 4 lists of 4 lists of 4 lists of 4 ints. By hand: 16 + 16*4 + 64*4 + 256*4 + 1024*4, each level
    # counted as many times as it is deep (`<` on lists compares the differing pair with `==` first):
    # 16 + 64 + 256*2 + 1024*3 + 4096*4 = 20048, over FREE_WEIGHT, so sorting it pays 20048 * log2(16) * SORT_S.
    # Counted only three levels deep it would weigh 3664 and sort for free.
    leaf = [0] * 4
    items = [[[[leaf] * 4] * 4] * 4] * 16
    assert order_weight(items) == 20048 > FREE_WEIGHT
    asked: list[float] = []
    monkeypatch.setattr(decimals, "check", asked.append)
    order_bound(items, True)
    assert asked == [pytest.approx(20048 * 4 * SORT_S)]


def test_counting_stops_once_past_two_to_the_24():
    # 16 lists of 2**20 one-item lists, and one list of one: the first level adds 16 * 2**20 + 1, so the total is
    # 17 + 2**24 + 1, past _MAX_COUNTED (2**24): the next level (every [0], another 2**24 + 1) is not counted.
    # Counting on would flatten 2**24 items first (134 MB of references) only to ask for more than the budget.
    inner = [0]
    big = [inner] * (1 << 20)
    items = [big] * 16 + [[inner]]
    assert order_weight(items) == (1 << 24) + 18


# ---------------------------------------------------------------- evaluate.Evaluator._GeneratorExp
def test_a_generator_expressions_first_loop_is_its_first_for_clause():
    # `f(x) + y for x in [1] for y in [10, 20]`: Python loops x over [1], then y over [10, 20]: [11, 21] (f is the
    # identity). Had the first loop taken the last clause's iterable, x would run over [10, 20] too: four items.
    def resolve(call):
        args = [decode(a) for a in call.ops[0][1]]
        return CallResult(True, decode(encode(args[0])), 1)

    asserts = ["assert list(f(x) + y for x in [1] for y in [10, 20]) == [11, 21]",
               "assert sum(f(x) * y for x in (2, 3) for y in [1]) == 5"]  # 2*1 + 3*1
    with Budget(10.0):
        outcomes = judge_asserts(parse_reference(json.dumps({"asserts": asserts})), resolve)
    assert outcomes == [(True, ""), (True, "")]


# ---------------------------------------------------------------- harness_main._encoder: iterators
def test_the_harness_drains_an_iterator_result():
    # a generator (or map, or list iterator) returned by the candidate has __next__: it is drained into an "it"
    # value, its items encoded as a list's; a type without __next__ and not on the wire is refused
    assert HARNESS_ENCODE((n * n for n in range(3)), 0) == {"it": [0, 1, 4]}
    assert HARNESS_ENCODE(iter([1, "a"]), 0) == {"it": [1, "a"]}
    assert HARNESS_ENCODE(map(str, [1, 2]), 0) == {"it": ["1", "2"]}
    with pytest.raises(TypeError, match="unserialisable"):
        HARNESS_ENCODE(object(), 0)


# ---------------------------------------------------------------- methods._grown: the growth bound's edge
def test_a_list_may_grow_to_exactly_max_items():
    # 999,999 items extended by one: exactly MAX_ITEMS, allowed (the bound refuses more, `>`); by two: refused
    receiver = [0] * (MAX_ITEMS - 1)
    with Budget(10.0):
        assert attribute(receiver, "extend")([1]) is None
        assert len(receiver) == MAX_ITEMS and receiver[-1] == 1
        with pytest.raises(Failed, match=f"a container grown to {MAX_ITEMS + 1} items"):
            attribute([0] * (MAX_ITEMS - 1), "extend")([1, 2])
    grown = set(range(MAX_ITEMS - 1))
    with Budget(10.0):
        attribute(grown, "update")([-1])  # a keyed receiver: the same bound on its new keys
    assert len(grown) == MAX_ITEMS


# ---------------------------------------------------------------- session: a call whose request cannot be sent
@pytest.fixture
def stalled(monkeypatch):
    """A Session whose program never reads: its stdin is a real non-blocking pipe, already full, so every write
    raises BlockingIOError and _send must wait for room. Kills are recorded, not done (there is no process)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    with pytest.raises(BlockingIOError):
        for _ in range(64):  # a pipe holds 64 KiB by default (test_code_session_spawn)
            os.write(write_end, b"x" * 65536)
    kills: list[object] = []
    monkeypatch.setattr(session_module, "_kill_tree", lambda proc, cgroups, inner: kills.append(proc))
    live = Session("def f():\n    return 1", "f", SandboxConfig(time_limit_s=3.0))
    live.live = SimpleNamespace(stdin=write_end, proc="program", cgroups=None)
    live.streams = SimpleNamespace(poller=select.poll(), names={}, data={})
    yield live, kills
    live.live = None  # nothing to close: the stand-in is no process
    os.close(read_end)
    os.close(write_end)


CALL = CandidateCall("f", [["call", [], []]])


def test_a_spent_budget_while_sending_ends_the_session(stalled):
    # the budget is spent at the wait for room (its check raises OverBudget): the call fails with the budget's
    # reason, and the session ends with it (every later call fails the same way, the program is killed)
    live, kills = stalled
    with Budget(1e-9):
        result = live._call(CALL)
    assert isinstance(result, CallResult) and not result.ok and "budget" in result.value, result
    assert live.ended == result.value and kills == ["program"]
    assert live.call(CALL) == CallResult(False, live.ended) and live.sent == 0


def test_a_deadline_passed_while_sending_stops_the_send(stalled):
    # the wait for room finds the deadline passed (it is 0: long past): the session times out, and the send stops
    # there with that reason. Writing on after the wait said no would wait again and again (each a budget check
    # and a poll) on a program that was killed; the stand-in wait below allows a few only to catch that.
    live, kills = stalled
    real_wait, waits = live._wait, []

    def counted_wait() -> bool:
        waits.append(1)
        if len(waits) > 3:
            raise AssertionError("the send went on waiting after the deadline passed")
        return real_wait()

    live._wait = counted_wait
    with Budget(10.0):
        result = live._call(CALL)
    assert result == CallResult(False, "no result: timed out after 3s"), result
    assert waits == [1] and live.problem == "timeout" and kills == ["program"] and live.sent == 0


def test_the_harness_names_a_defaultdicts_factory_and_refuses_another():
    # a defaultdict's default_factory crosses the wire by name when the parent knows it: list goes as "list" (the
    # parent rebuilds defaultdict(list)); None as None (no default); any other factory by the immutable value it
    # makes (["=", 0]: the parent's default is that constant), else "?" (it raised, or made a mutable value)
    from collections import defaultdict

    assert HARNESS_ENCODE(defaultdict(list, {1: [2]}), 0) == {"dd": ["list", [[1, [2]]]]}
    assert HARNESS_ENCODE(defaultdict(None, {1: 2}), 0) == {"dd": [None, [[1, 2]]]}
    assert HARNESS_ENCODE(defaultdict(lambda: 0), 0) == {"dd": [["=", 0], []]}
    assert HARNESS_ENCODE(defaultdict(lambda: 1 // 0), 0) == {"dd": ["?", []]}
