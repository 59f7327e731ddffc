"""Sorted(), list.sort(), min() and max() of a long candidate value are one C
call each, so the parent pays for them before they run (code/decimals.order_bound): SORT_S per item and log2 of
the length for a sort, SCAN_S per item for min/max, nested elements counted as items (order_weight). An ordinary
anagram test on a 999,000-char result cost the parent 0.13 s of its 0.1 s budget; sorting 960,000 mixed ints and
floats 0.22 s. Checked by counting what is charged (a stand-in for `check`), never by timing; values come through
the wire as a result line would, without a sandbox.
"""
from __future__ import annotations

import json
import math
from decimal import Decimal

import pytest

from rlvr.verifiers.code import decimals
from rlvr.verifiers.code.budget import PARENT_CPU_S, Budget, OverBudget, produced
from rlvr.verifiers.code.check_guard import Guards, Stop
from rlvr.verifiers.code.decimals import FREE_WEIGHT, SCAN_S, SORT_S, order_bound, order_weight
from rlvr.verifiers.code.evaluate import CallResult
from rlvr.verifiers.code.reference import judge_asserts, parse_reference
from rlvr.verifiers.code.wire import decode, encode

LONG = "abcdefghij" * 99_900 + "\u0100"  # 999,001 chars; one non-Latin-1 char turns off the fast comparison
MIXED = [i if i % 2 else i + 0.5 for i in range(160_000)]  # ints and floats: the slowest scalars to sort


def charges(items: list, sort: bool, monkeypatch, with_decimals: bool = False) -> list[float]:
    """The costs order_bound asks `check` for."""
    asked: list[float] = []
    monkeypatch.setattr(decimals, "check", asked.append)
    with Budget(10.0):
        if with_decimals:
            produced(Decimal(0))
        order_bound(items, sort)
    return asked


@pytest.mark.parametrize("items", [
    list("silent"), list(range(FREE_WEIGHT)), [[1, 2], [3, 4]], [(i, -i) for i in range(1000)], ["a", "b"], [],
], ids=["anagram", "free_weight_ints", "two_pairs", "thousand_tuples", "strings", "empty"])
def test_ordinary_sizes_pay_nothing(items, monkeypatch):
    assert charges(items, True, monkeypatch) == [] and charges(items, False, monkeypatch) == []


@pytest.mark.parametrize("items", [list(LONG), MIXED * 6], ids=["long_string", "mixed_times_6"])
def test_a_long_sort_is_paid_first_and_more_than_the_budget(items, monkeypatch):
    n = len(items)
    assert charges(items, True, monkeypatch) == [pytest.approx(n * math.log2(n) * SORT_S)]
    assert n * math.log2(n) * SORT_S > PARENT_CPU_S  # so the sort is refused before it runs
    assert charges(items, False, monkeypatch) == [pytest.approx(n * SCAN_S)]  # min/max: one pass, affordable
    assert n * SCAN_S < PARENT_CPU_S


def test_nested_elements_count_as_items(monkeypatch):
    pairs = [[i + 0.5, -i] for i in range(3000)]  # 3000 items of 2 elements: weight 9000
    assert order_weight(pairs) == 9000
    assert charges(pairs, True, monkeypatch) == [pytest.approx(9000 * math.log2(3000) * SORT_S)]
    deep = [[[0.5] * 3000]] * 2  # two items, one list each, of 3000 floats (two levels down: counted twice)
    assert order_weight(deep) == 2 + 2 + 2 * 6000
    # Every item of a level counts, not only the first's kind (`[0, long_list]` pairs are one kind at
    # the top, mixed a level down, and comparing two of them walks the long lists)
    assert order_weight([1, [2]]) == 3 and order_weight([[1], 2]) == 3


def test_mixed_decimals_still_pay_their_own_higher_rate(monkeypatch):
    items = [Decimal(1), 2, Decimal(3), 4]
    assert charges(items, True, monkeypatch, with_decimals=True) == [pytest.approx(4 * 2 * 5e-7)]
    long = [Decimal(i) if i % 2 else float(i) for i in range(10_000)]  # the higher of the two charges is asked
    assert charges(long, True, monkeypatch, with_decimals=True) == [pytest.approx(10_000 * math.log2(10_000) * 5e-7)]


def judge(assertion: str, value: object) -> tuple[bool, str]:
    """The outcome of one assert when every call of f returns `value`, decoded from the wire inside a budget."""
    tests = parse_reference(json.dumps({"asserts": [assertion], "entry": "f"}))
    wire = encode(value)
    with Budget():
        return judge_asserts(tests, lambda call: CallResult(True, decode(wire), 1))[0]


@pytest.mark.parametrize("assertion, value", [
    ("assert sorted(f('listen')) == sorted('silent')", LONG),
    ("assert sorted(f(1) * 6) == [1]", MIXED),
    ("assert f(1) * 6 != [] and (f(1) * 6).sort() is None", MIXED),
], ids=["anagram_long_string", "sorted_mixed_times_6", "list_sort"])
def test_the_reported_sorts_fail_on_the_budget_before_sorting(assertion, value):
    passed, detail = judge(assertion, value)
    assert passed is False and "CPU budget" in detail, detail


@pytest.mark.parametrize("assertion, value", [
    ("assert sorted(f('listen')) == sorted('silent')", "silent"),
    ("assert sorted(f(10000)) == list(range(10000))", list(range(9999, -1, -1))),
    # 40,000 items: over FREE_WEIGHT, so min/max are charged (0.6 ms each), yet decoding them stays far under the
    # 0.1 s of real CPU the budget also counts (160,000 took 54 ms here and ran over on a slower CI machine)
    ("assert min(f(1)) == 1 and max(f(1)) == 40000", list(range(1, 40_001))),
    ("assert sorted(f(3))[0] == [0, 0]", [[i, i] for i in range(2999, -1, -1)]),
], ids=["anagram", "ten_thousand", "min_max_40k", "pairs"])
def test_honest_sorts_still_pass(assertion, value):
    assert judge(assertion, value) == (True, "")


def test_a_check_program_list_sort_is_paid_first():
    guards = Guards()
    items = list(LONG)
    with Budget(), pytest.raises(Stop):
        guards.call(items.sort)
    assert "CPU budget" in guards.tripped and items[0] == "a"  # refused before it ran: still unsorted
    with Budget():
        small = [3, 1, 2]
        guards.call(small.sort)
    assert small == [1, 2, 3]


def test_without_a_budget_nothing_is_refused():
    order_bound(list(LONG[:100_000]), True)  # unit use: no budget active, no limit
    with Budget(0.001), pytest.raises(OverBudget):
        order_bound(list(LONG[:100_000]), True)
