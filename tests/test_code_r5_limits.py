"""Where the code verifier's sort weight stops counting (rlvr/verifiers/code/decimals.py, _limit and order_bound),
pinned where a wider mutation draw over an earlier change's lines found it unchecked. Counting stops once
the weight's charge would be more than the budget has left: past that a refusal is certain, so counting on only
costs the parent CPU. Each test fixes the budget's time left (`remaining`) so the numbers can be derived by hand."""
from __future__ import annotations

import math

import pytest

from rlvr.verifiers.code import decimals
from rlvr.verifiers.code.decimals import SCAN_S, SORT_S, _limit, order_bound


@pytest.mark.parametrize("cost_each", [1.0, 0.3, 2.5, 0.7])
def test_a_weight_past_the_limit_costs_more_than_is_left(monkeypatch, cost_each):
    # 10 s left: one unit past the limit costs more than 10 s; one unit below it, no more than 10 s.
    # cost 1.0 -> limit 11 (12 > 10, 10 <= 10); 0.3 -> 34 (10.5 > 10, 9.9 <= 10); 2.5 -> 5; 0.7 -> 15
    monkeypatch.setattr(decimals, "remaining", lambda: 10.0)
    limit = _limit(cost_each)
    assert (limit + 1) * cost_each > 10.0 and (limit - 1) * cost_each <= 10.0


def test_a_spent_budget_counts_one_unit_and_no_budget_counts_to_the_cap(monkeypatch):
    monkeypatch.setattr(decimals, "remaining", lambda: -5.0)  # spent 5 s ago: nothing is left to pay with
    assert _limit(0.001) == 1
    monkeypatch.setattr(decimals, "remaining", lambda: None)  # no budget (unit tests): counted to 2 ** 24
    assert _limit(0.001) == 1 << 24
    monkeypatch.setattr(decimals, "remaining", lambda: 1e9)
    assert _limit(0.001) == 1 << 24


def test_a_scan_counts_as_far_as_a_scans_charge_reaches(monkeypatch):
    # 8 lists, each of 8,192 one-item lists, scanned for min with 5 ms left. A scan's unit is SCAN_S (15 ns):
    # limit 333,334, so every level is counted: 8 + 65,536 (depth 1) + 2 * 65,536 (depth 2) = 196,616, charged
    # 8 * SCAN_S + 196,608 * SORT_S = 7.865 ms. Counted with a sort's unit (3 * SORT_S = 120 ns, limit 41,667),
    # counting would stop after depth 1 (65,544) and charge 2.62 ms: less than the budget has left.
    charged: list[float] = []
    monkeypatch.setattr(decimals, "remaining", lambda: 0.005)
    monkeypatch.setattr(decimals, "check", charged.append)
    items = [[[0] for _ in range(8192)] for _ in range(8)]
    order_bound(items, sort=False)
    assert charged == [pytest.approx(8 * SCAN_S + 196_608 * SORT_S)]
    # sorted, the unit is log2(8) * SORT_S: limit 41,667, counting stops at 65,544 and that is charged
    charged.clear()
    order_bound(items, sort=True)
    assert charged == [pytest.approx(65_544 * math.log2(8) * SORT_S)]
