"""The charges on the parent's budget, pinned where a mutation sample found them unchecked: a Counter's exact
weight, the budget's time left, and the charges reached through the assert evaluator's own comparison."""
from __future__ import annotations

import time
from collections import Counter

import pytest

from rlvr.verifiers.code import decimals, values
from rlvr.verifiers.code.budget import Budget, remaining
from rlvr.verifiers.code.decimals import order_weight


def test_a_counter_weighs_its_python_comparison_and_two_more_a_key():
    # A dict of k keys weighs 1 + 2k (the item, then its keys and values); a Counter COUNTER_CALL (32) and
    # COUNTER_KEY (2) a key more: k = 1 -> 3 and 37, k = 3 -> 7 and 45, k = 10 -> 21 and 73
    for keys, as_dict, as_counter in ((1, 3, 37), (3, 7, 45), (10, 21, 73)):
        plain = {i: 1 for i in range(keys)}
        assert (order_weight([plain]), order_weight([Counter(plain)])) == (as_dict, as_counter)


def test_remaining_is_the_active_budgets_time_left():
    assert remaining() is None  # no budget
    with Budget(5.0):
        first = remaining()
        spin = time.thread_time() + 0.02
        while time.thread_time() < spin:  # spend 20 ms of this thread's CPU
            pass
        second = remaining()
    assert 4.5 < first <= 5.0 and second <= first - 0.02


def test_the_assert_evaluators_comparisons_are_charged(monkeypatch):
    # values.compare is where an assert's `==`, `<` and `in` run: each container comparison asks its bound first;
    # `is` compares identities (no walk), so it asks none
    asked: list[tuple[str, object]] = []
    monkeypatch.setattr(decimals, "compare_bound", lambda op, left, right: asked.append(("compare", op)))
    monkeypatch.setattr(decimals, "member_bound", lambda item, items: asked.append(("member", item)))
    monkeypatch.setattr(values, "compare_bound", decimals.compare_bound, raising=False)
    monkeypatch.setattr(values, "member_bound", decimals.member_bound, raising=False)
    assert values.compare("Eq", [1], [1]) and values.compare("Lt", [1], [2]) and values.compare("In", 1, [1])
    assert values.compare("Is", None, None) and values.compare("NotIn", 2, [1])
    assert asked == [("compare", "Eq"), ("compare", "Lt"), ("member", 1), ("member", 2)]


def test_a_big_membership_test_is_refused_when_the_budget_cannot_pay():
    big = [Counter({k: 1 for k in range(24)}) for _ in range(4096)]
    with Budget(0.001), pytest.raises(Exception, match="budget"):
        values.compare("In", Counter("x"), big)
