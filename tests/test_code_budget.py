"""Without a sandbox: the parent's CPU budget, the bounds it relies on, the wire's Python types and the
assert forms refused for not being exactly evaluable.

Candidate results are answered straight from a value (no fake run in this thread), so the CPU measured is the
parent's judging alone.
"""
from __future__ import annotations

import gc
import json
import math
import time
from collections import Counter, OrderedDict
from fractions import Fraction

import pytest

from rlvr.verifiers.code.budget import Budget, OverBudget
from rlvr.verifiers.code.evaluate import CallResult, CandidateCall
from rlvr.verifiers.code.harness import read_reply
from rlvr.verifiers.code.reference import BadReference, judge_asserts, parse_reference
from rlvr.verifiers.code.values import compare, same
from rlvr.verifiers.code.wire import decode, encode


def refs(*asserts: str, **extra) -> str:
    return json.dumps({"asserts": list(asserts), **extra})


def judge_values(reference: str, value: object, budget_s: float = 0.1) -> tuple[list[tuple[bool, str]], float]:
    """(outcomes, parent CPU s) when every candidate call returns `value`."""
    tests = parse_reference(reference)
    start = time.process_time()
    with Budget(budget_s):
        outcomes = judge_asserts(tests, lambda call: CallResult(True, value, 1))
    return outcomes, time.process_time() - start


@pytest.mark.parametrize("assertion,value", [
    ("assert not all(x >= 0 for x in f(1))", list(range(300_000))),  # ~900k steps at ~2 us: ~2 s unbudgeted
    ("assert sum(f(1), []) == []", [[k] for k in range(20_000)]),  # quadratic: 2e8 item copies in one C call
    ("assert len({x for x in f(1)}) == 0", list(range(300_000))),
], ids=["evaluation_steps", "sum_of_lists", "set_comprehension"])
def test_the_budget_stops_the_parent(assertion, value):
    outcomes, cpu = judge_values(refs(assertion), value)
    assert outcomes[0][0] is False and "CPU budget" in outcomes[0][1], outcomes
    assert cpu < 0.2


def test_fractions_are_counted_while_decoding():
    # 2,000 Fractions 1/k: each counts max(64, bits) >= 64, so 2,000 * 64 = 128,000 bits fit in the 131,072;
    # 3,000 * 64 = 192,000 do not, and reading the line stops saying so instead of summing them (18 s)
    def line(n: int) -> bytes:
        return json.dumps({"n": 0, "ok": True, "value": encode([Fraction(1, k) for k in range(2, n + 2)]),
                           "done": 1}).encode()
    call = CandidateCall("f", [["call", [1], []]])
    with Budget(10.0):
        assert read_reply(line(2000), 0, call).ok
    with Budget(10.0), pytest.raises(OverBudget, match="Fractions"):  # the session then fails the call with it
        read_reply(line(3000), 0, call)


@pytest.mark.parametrize("assertion,value", [
    ("assert 3 ** f(1) > 0", Fraction(10 ** 7)),  # an int power in Python: 3 ** 10**7 took seconds
    ("assert f(1) ** 200000 > 0", Fraction(3, 2)),  # 2-bit parts * 200,000 > 65,536 bits
    ("assert pow(3, f(1), f(1) + 2) == 1", (1 << 20000) - 1),  # 20,000 * 20,000**2 > 2**32 (took minutes at 65k)
    ("assert math.comb(f(1), 2) > 0", 100_000),  # over MAX_COMB_ARG 20,000: comb(100000, 50000) took 208 ms
], ids=["fraction_exponent", "fraction_base", "modular", "comb"])
def test_costly_powers_are_refused_before_computing(assertion, value):
    outcomes, cpu = judge_values(refs(assertion), value)
    assert outcomes[0][0] is False and "bound" in outcomes[0][1], outcomes
    assert cpu < 0.05


def test_small_powers_still_evaluate():
    # 2 ** Fraction(10) = 1024; Fraction(3, 2) ** 3 = 27/8; pow(3, 5, 7) = 243 % 7 = 5 (hand)
    for assertion, value in (("assert 2 ** f(1) == 1024", Fraction(10)), ("assert f(1) ** 3 == Fraction(27, 8)",
                             Fraction(3, 2)), ("assert pow(3, f(1), 7) == 5", 5)):
        assert judge_values(refs(assertion), value)[0][0] == (True, "")


def test_wire_keeps_python_types():
    ordered, counter = OrderedDict([("b", 1), ("a", 2)]), Counter({"a": 1, "b": 0})
    back = decode(encode([ordered, counter, {"x": (1, [2])}]))
    assert type(back[0]) is OrderedDict and list(back[0]) == ["b", "a"]
    assert type(back[1]) is Counter and back[1] == Counter({"a": 1}) and back[2] == {"x": (1, [2])}
    nans = decode([math.nan, math.nan])
    assert nans[0] is not nans[1]  # else [x] == [x] by identity: NaNs from the candidate are new objects
    with pytest.raises(ValueError):
        decode([{"a": 1, "b": 2}])  # an untagged object inside a value


def test_comparisons_follow_python():
    with pytest.raises(TypeError):
        compare("Lt", [1, 2], (1, 3))  # Python: '<' not supported between list and tuple
    assert compare("In", 0.1 + 0.2, [0.3], 1e-9) and not compare("In", 0.1 + 0.2, {0.3}, 1e-9)  # hashed: exact
    assert same(Counter(a=0.1 + 0.2), Counter(a=0.3, b=0), 1e-9)  # Counter: missing is zero, values within tol
    assert not same(OrderedDict(a=0.3, b=1.0), OrderedDict(b=1.0, a=0.3), 1e-9)  # two OrderedDicts: order counts
    assert same(OrderedDict(a=0.3, b=1.0), {"b": 1.0, "a": 0.1 + 0.2}, 1e-9)  # with a dict: like dicts


@pytest.mark.parametrize("reference,name", [
    (refs("assert f(1) is not f(2)"), "`is` between two values"),
    (refs("assert f(1) == g(1)"), "'g'"),  # g only on the expected side, no entry
    (refs("assert f(namedtuple('P', 'x')) == 1"), "library 'namedtuple'"),  # deque is the parent's own type
])
def test_forms_not_exactly_evaluable_are_refused(reference, name):
    with pytest.raises(BadReference, match="unscorable") as err:
        parse_reference(reference)
    assert name in str(err.value)


@pytest.mark.parametrize("reference", [
    refs("assert f(1) is None", "assert type(f(1)) is int", "assert f(2) is not True"),
    refs("assert f(1) == g(1)", "assert g(2) == 4"),  # g is tested by the second assert
    refs("assert 5 == add(2, 3)", "assert f(3) == f(2) + 1"),  # the first operand with a call is the tested one
    refs("assert f(1) == g(1)", entry="f"),  # with an entry, g is refused by the entry rule instead
])
def test_exactly_evaluable_forms_parse(reference):
    if '"entry"' in reference:
        with pytest.raises(BadReference, match="neither the entry"):
            parse_reference(reference)
    else:
        assert parse_reference(reference).asserts


def test_collector_is_paused_while_judging_and_resumed_after():
    # a full collection of the trainer's heap, triggered by decoding a big result, cost 0.135 s (code/budget.py)
    assert gc.isenabled()
    first, second = Budget(), Budget()
    with first:
        assert not gc.isenabled()
        with second:  # another completion judged meanwhile (verifier threads)
            assert not gc.isenabled()
        assert not gc.isenabled()  # still judging the first one
    assert gc.isenabled()


# ---------------------------------------------------------------- single C calls, the collector
@pytest.mark.parametrize("assertion", [
    "assert len(set(range(f(1)))) == 2",  # a set of 1,000,000 ints: 0.2-0.4 s in C (hash_bound, then set())
    "assert Counter(range(f(1))) == Counter()",
    "assert f(list(range(f(1)))) == 1",  # encoding 1,000,000 ints to send back: 0.1 s, dumping them 0.07 s more
])
def test_single_c_calls_over_a_million_items_are_charged_before_they_run(assertion):
    # values.hash_bound charges HASH_S_PER_ITEM per item before its C calls run (0.2 s for 1,000,000:
    # more than the budget, so it fails at once), wire.encode checks the budget as it goes, the JSON dump of what it
    # encoded so far included. Here: 25 ms, 25 ms and 80 ms of this thread's CPU; without the charges 0.18-0.23 s
    # for the first two, and the third was never stopped ("got 1000000": not the budget's message)
    tests = parse_reference(refs(assertion))
    start = time.thread_time()
    with Budget(0.1):
        outcomes = judge_asserts(tests, lambda call: CallResult(True, 10 ** 6, 1))
    assert outcomes[0][0] is False and "CPU budget" in outcomes[0][1], outcomes
    assert time.thread_time() - start < 0.15


def test_a_defaultdict_built_from_colliding_pairs_is_refused():
    # M38: defaultdict(int, pairs) hash-bounds the pairs' keys as dict() does (20,000 colliding keys: 1.55 s)
    modulus = (1 << 61) - 1
    pairs = [[k * modulus, 0] for k in range(1, 20_001)]
    outcomes, _ = judge_values(refs("assert defaultdict(int, f(1)) == {}"), pairs, budget_s=10.0)
    assert outcomes[0][0] is False and "share one hash" in outcomes[0][1], outcomes


def test_the_collector_runs_while_waiting_and_a_full_collection_is_not_charged():
    # Budget paused the collector for the whole session, so a candidate that slept kept it off; now
    # waiting() resumes it, and gives back the CPU of a wait during which a full collection ran
    was = gc.isenabled()
    gc.enable()
    try:
        with Budget(0.05) as budget:
            assert not gc.isenabled()  # judging: paused
            with budget.waiting():
                assert gc.isenabled()  # waiting for the sandbox: the trainer's collector runs
                end = time.thread_time() + 0.1
                while time.thread_time() < end:
                    gc.collect()  # full collections: 0.1 s of this thread's CPU, more than the budget
            assert not gc.isenabled()
            budget.check()  # not charged: no OverBudget
            with budget.waiting():
                end = time.thread_time() + 0.1
                while time.thread_time() < end:
                    pass  # the wait's own CPU (a drip) is charged
            with pytest.raises(OverBudget):
                budget.check()
    finally:
        (gc.enable if was else gc.disable)()
