"""Decimals against other numbers in the parent: the costs Python's Decimal hides inside single C calls.

Issue 43 (review): `Decimal == int` converts the int to a Decimal (5.4 ms for 65,536 bits here), `Decimal < float`
converts the float exactly (3 us for a subnormal), and a non-integral Decimal power is correctly rounded at the
base's full length (18,999 nines to the power 0.5: 8.2 s). Pairs of Decimals and big ints are paid for as they
arrive (budget.Budget.number); what is left here is bounded before the C call that would run it: powers, and
sorted(), min(), max() and list.sort() of mixed numbers.

Issue 43 (red team, finding 8): sorting any long sequence is one C call too. sorted() of a candidate's 999,000-char
string (`sorted(f('listen')) == sorted('silent')`, an ordinary anagram test) cost the parent 0.13 s, sorting 960,000
mixed ints and floats 0.22 s, against the 0.1 s budget. So sorted(), list.sort(), min() and max() of more than
FREE_WEIGHT items (nested items counted: order_weight) ask the budget for room first: SORT_S per item and log2 of
the length, SCAN_S per item for min()/max(). Honest asserts on ordinary sizes stay free.
"""
from __future__ import annotations

import math
from decimal import Decimal
from itertools import chain
from typing import Any

from rlvr.verifiers.code.budget import Failed, check, decimals_seen
from rlvr.verifiers.code.budget import check as check_between_levels  # not a charge: tests record `check` alone
from rlvr.verifiers.code.stdtypes import kind

# Issue 43 (review): a non-integral Decimal power is correctly rounded at its base's length: Decimal('9' * 3000)
# ** Decimal('0.5') took 0.35 s here, 18,999 nines 8.2 s; 400 digits 0.8 ms.
MAX_DECIMAL_POW_DIGITS = 400
# Comparing a Decimal with a float or int converts it (a subnormal float: 3 us). sorted() of 64,000 Decimals and
# subnormal floats took 0.2 s here, max() 0.1 s: one C call each, paid before it runs (order_bound).
MIXED_SORT_S = 5e-7  # per n * log2(n)
MIXED_SCAN_S = 3e-6  # per item of min() / max()


def decimal_pow_bound(base: Any, exp: Any) -> None:
    """A non-integral Decimal exponent: the base's digits stay under MAX_DECIMAL_POW_DIGITS (an int base is
    converted to a Decimal exactly). Integral exponents round at the context's precision: fast."""
    if kind(exp) is Decimal and exp.is_finite() and exp != exp.to_integral_value():
        if kind(base) is Decimal and base.is_finite():
            digits = len(base.as_tuple().digits)
        else:
            digits = abs(base).bit_length() * 0.302 if kind(base) in (int, bool) else 0
        if digits > MAX_DECIMAL_POW_DIGITS:
            raise Failed(f"a Decimal power of a {int(digits)}-digit base is over the {MAX_DECIMAL_POW_DIGITS}-digit "
                         "bound")


# Any long sequence (issue 43's red team, finding 8), per item * log2(n) for a sort, per item for min/max; measured
# here, worst of ints, big ints, floats, strings and mixed ints and floats: 34 ns per n * log2(n) sorting (mixed
# ints and floats), 12 ns an item scanning. Nested items count once per element (order_weight): comparing two lists
# compares their elements (pairs of floats: 61 ns per n * log2(n) against 3 items of weight each).
SORT_S = 4e-8
SCAN_S = 1.5e-8
FREE_WEIGHT = 4096  # at most 4096 * 12 * 40 ns = 2 ms: not worth a charge (so small honest sorts pay nothing)
_NESTED = (list, tuple, set, frozenset)
_MAX_LEVELS = 4  # nested lists are counted this deep; deeper ones are compared element by element too, but the
# wire's 1 MiB line caps what they hold
_MAX_COUNTED = 1 << 24  # counted this far, a sort asks for 0.67 s or more: no need to count on


def order_weight(items: list[Any]) -> int:
    """The items plus the elements of nested lists, tuples and sets, level by level while the first item of a level
    is one: only items of one kind are ordered against each other (a list against an int is a TypeError), so the
    first item says what the sort compares. Each level is counted by C loops (map(len), chain), with a budget check
    between levels."""
    total, level = len(items), items
    for _ in range(_MAX_LEVELS):
        if not level or not isinstance(level[0], _NESTED):
            break
        try:
            total += sum(map(len, level))
        except TypeError:  # an unsized item among them: the sort fails at it, having compared what came before
            break
        check_between_levels()
        level = list(chain.from_iterable(level)) if total <= _MAX_COUNTED else []
    return total


def order_bound(items: list[Any], sort: bool) -> None:
    """Pay before sorting (`sort`) or scanning for min/max `items`: the time it costs (long sequences: SORT_S, SCAN_S),
    or more when they mix Decimals with other numbers, or hold containers, in a completion that has Decimals at all.
    Ordinary sizes pay nothing."""
    n = len(items)
    if n < 2:
        return
    cost = 0.0
    weight = order_weight(items) if isinstance(items[0], _NESTED) else n
    if weight > FREE_WEIGHT:  # issue 43's red team, finding 8: a long string or list sorted in one C call
        cost = weight * math.log2(n) * SORT_S if sort else weight * SCAN_S
    if decimals_seen():
        types = set(map(type, items))
        decimals = [t for t in types if issubclass(t, Decimal)]
        if (decimals and len(decimals) < len(types)) or any(issubclass(t, (list, tuple)) for t in types):
            cost = max(cost, n * math.log2(n) * MIXED_SORT_S if sort else n * MIXED_SCAN_S)
    if cost:
        check(cost)
