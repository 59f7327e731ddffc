"""Mutation testing: what the parent's budget counts, checked by counting rather than by timing.

code/budget.py charges a (Decimal, big int) pair once, as TO_DECIMAL_S * (bits / 65,536) ** 2, and answers
`trips()`, `spent()` and `decimals_seen()` for the active budget; code/decimals.py bounds Decimal powers by the
base's digits and charges sorting or scanning only for lists that mix Decimals with other numbers or hold
containers. The charges are read off the budget's deadline (which only arithmetic moves) or recorded by standing in
for `check`, so a noisy machine cannot change them.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from rlvr.verifiers.code import decimals
from rlvr.verifiers.code.budget import Budget, Failed, OverBudget, decimals_seen, produced, spent, trip, trips
from rlvr.verifiers.code.decimals import MAX_DECIMAL_POW_DIGITS, decimal_pow_bound, order_bound


def charged(*values: object) -> float:
    """Seconds taken off a roomy budget's deadline by producing `values` in order."""
    with Budget(100.0) as budget:
        start = budget.deadline
        for value in values:
            produced(value)
        return start - budget.deadline


@pytest.mark.parametrize("first_decimal", [True, False], ids=["decimal_first", "int_first"])
def test_a_decimal_and_big_int_pair_costs_the_square_of_the_bits(first_decimal):
    # 1 << 32767 has 32,768 bits: 6e-3 * (32768 / 65536) ** 2 = 6e-3 / 4 = 1.5e-3 s for the one pair, whichever
    # arrives first (a cube would charge 0.75e-3). 1 << 16383 (16,384 bits) alone: 6e-3 / 16 = 3.75e-4 s.
    pair = [Decimal(1), 1 << 32767] if first_decimal else [1 << 32767, Decimal(1)]
    assert charged(*pair) == pytest.approx(1.5e-3)
    assert charged(1 << 16383, Decimal(1)) == pytest.approx(3.75e-4)
    # two Decimals and one such int are two pairs; two ints and one Decimal as well
    assert charged(Decimal(1), Decimal(2), 1 << 32767) == pytest.approx(3e-3)
    assert charged(1 << 32767, -(1 << 32767), Decimal(1)) == pytest.approx(3e-3)


def test_only_numbers_over_costly_bits_are_charged():
    # COSTLY_BITS is 1,024: 1 << 1023 has 1,024 bits (free), 1 << 1024 has 1,025: 6e-3 * (1025 / 65536) ** 2.
    # A Fraction counts numerator plus denominator bits: 2**1023 / 3 is in lowest terms, 1,024 + 2 bits = 1,026
    assert charged(Decimal(1), 1 << 1023) == 0
    assert charged(Decimal(1), 1 << 1024) == pytest.approx(6e-3 * (1025 / 65536) ** 2)
    assert charged(Decimal(1), Fraction(1 << 1023, 3)) == pytest.approx(6e-3 * (1026 / 65536) ** 2)
    assert charged(1 << 40000, 1 << 40000) == 0  # no Decimal held: nothing to convert


def test_an_unaffordable_pair_fails_at_once():
    # a 65,536-bit int costs 6e-3 s per Decimal: 100 Decimals held make 0.6 s, over a 0.1 s budget
    with Budget(0.1), pytest.raises(OverBudget, match="CPU budget"):
        for k in range(100):
            produced(Decimal(k))
        produced((1 << 65535) + 1)


def test_trips_count_on_the_active_budget_and_are_zero_without_one():
    # no budget active (unit tests, a plain evaluation): nothing was tripped, and trip() is a no-op
    assert trips() == 0
    trip()
    assert trips() == 0
    with Budget(10.0):
        assert trips() == 0
        trip()
        trip()
        assert trips() == 2
    assert trips() == 0


def test_spent_by_fractions_as_soon_as_the_bits_go_below_zero():
    # a Fraction counts max(64, bits): 64 of 63 leaves -1, one bit over: spent, though the clock is far from it
    with Budget(10.0, fraction_bits=63) as budget:
        assert not spent()
        with pytest.raises(OverBudget, match="Fractions"):
            budget.fraction(Fraction(1, 2))
        assert budget.fraction_bits == -1
        assert spent()
    with Budget(10.0, fraction_bits=64) as budget:
        budget.fraction(Fraction(1, 2))  # exactly used up: 0 left is not over
        assert budget.fraction_bits == 0 and not spent()
    assert not spent()  # no budget active


def test_spent_by_time():
    with Budget(10.0) as budget:
        budget.deadline -= 20.0  # as if 20 s of pairs had been charged: the clock is past the deadline
        assert spent()


def test_one_decimal_is_enough_to_have_seen_decimals():
    assert not decimals_seen()  # no budget active
    with Budget(10.0):
        assert not decimals_seen()
        produced(Fraction(1, 3))
        produced(1 << 5000)
        assert not decimals_seen()
        produced(Decimal("1.5"))
        assert decimals_seen()


def test_a_decimal_power_bounds_an_int_base_by_its_digits():
    # an int base counts 0.302 digits per bit: 1,324 bits are 399.8 digits (evaluated), 1,325 bits 400.15 (refused)
    half = Decimal("0.5")
    decimal_pow_bound((1 << 1323) + 1, half)
    decimal_pow_bound(-(1 << 1323) - 1, half)
    decimal_pow_bound(True, half)
    with pytest.raises(Failed, match="400-digit"):
        decimal_pow_bound(1 << 1324, half)
    with pytest.raises(Failed, match="400-digit"):
        decimal_pow_bound(-(1 << 1324), half)
    # a Decimal base counts its own digits; an integral exponent, or an exponent that is not a Decimal, is not bounded
    decimal_pow_bound(Decimal("9" * MAX_DECIMAL_POW_DIGITS), half)
    with pytest.raises(Failed, match="401-digit"):
        decimal_pow_bound(Decimal("9" * (MAX_DECIMAL_POW_DIGITS + 1)), half)
    decimal_pow_bound(1 << 5000, Decimal(2))
    decimal_pow_bound(Decimal("9" * 1000), 0.5)
    # other bases (a float, a Fraction, an infinite Decimal) have no digits to bound
    for base in (1e300, Fraction(1 << 5000, 3), Decimal("Infinity")):
        decimal_pow_bound(base, half)


def order_charges(items: list, sort: bool, monkeypatch) -> list[float]:
    """The costs order_bound asks `check` for, in a completion that has produced a Decimal."""
    asked: list[float] = []
    monkeypatch.setattr(decimals, "check", asked.append)
    with Budget(10.0):
        produced(Decimal(0))
        order_bound(items, sort)
    return asked


@pytest.mark.parametrize("items", [
    [1, 2.5, Fraction(1, 3), True], [Decimal(1), Decimal(2), Decimal(3)], ["a", "b"], [Decimal(1)],
], ids=["numbers_without_decimals", "only_decimals", "strings", "one_item"])
def test_sorting_without_mixing_is_free(items, monkeypatch):
    # only Decimals mixed with another type, or containers, make Python convert or recurse inside one C call
    assert order_charges(items, True, monkeypatch) == []
    assert order_charges(items, False, monkeypatch) == []


@pytest.mark.parametrize("items", [
    [Decimal(1), 2, Decimal(3), 4], [Decimal(1), 2.5, 3.5, 4.5], [[1], [2], [3], [4]], [(1,), (2,), (3,), (4,)],
], ids=["decimals_and_ints", "decimals_and_floats", "lists", "tuples"])
def test_sorting_mixed_decimals_or_containers_is_paid_first(items, monkeypatch):
    # 4 items: sorting costs 4 * log2(4) * 5e-7 = 4e-6 s, a min/max scan 4 * 3e-6 = 1.2e-5 s
    assert order_charges(items, True, monkeypatch) == [pytest.approx(4e-6)]
    assert order_charges(items, False, monkeypatch) == [pytest.approx(1.2e-5)]


def test_without_decimals_in_the_completion_nothing_is_paid(monkeypatch):
    asked: list[float] = []
    monkeypatch.setattr(decimals, "check", asked.append)
    with Budget(10.0):
        order_bound([[1], [2], Decimal(1), 3], True)  # a Decimal in a list, but never produced: not counted
    assert asked == []
