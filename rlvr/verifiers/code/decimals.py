"""Decimals against other numbers in the parent: the costs Python's Decimal hides inside single C calls.

`Decimal == int` converts the int to a Decimal (5.4 ms for 65,536 bits here), `Decimal < float`
converts the float exactly (3 us for a subnormal), and a non-integral Decimal power is correctly rounded at the
base's full length (18,999 nines to the power 0.5: 8.2 s). Pairs of Decimals and big ints are paid for as they
arrive (budget.Budget.number); what is left here is bounded before the C call that would run it: powers, and
sorted(), min(), max() and list.sort() of mixed numbers.

Sorting any long sequence is one C call too. sorted() of a candidate's 999,000-char
string (`sorted(f('listen')) == sorted('silent')`, an ordinary anagram test) cost the parent 0.13 s, sorting 960,000
mixed ints and floats 0.22 s, against the 0.1 s budget. So sorted(), list.sort(), min() and max() of more than
FREE_WEIGHT items (nested items counted: order_weight) ask the budget for room first: SORT_S per item and log2 of
the length, SCAN_S per item for min()/max(). Honest asserts on ordinary sizes stay free.

Before, the weight missed what the comparisons walk. A list of 4,096 Counters of 24 keys weighed
4,096 (free), but Counter's comparisons are pure Python inside the one sorted() call: 0.18-0.22 s of parent CPU;
`[0, long_list]` pairs weighed 3 each (a level whose first item was a scalar was not walked). Now every item of
each level is walked, mappings count keys and values, Counters more (COUNTER_CALL, COUNTER_KEY), and `==`, `<`
and `in` of two containers pay for both sides too (compare_bound, member_bound). The walk stops as soon as the
weight is more than the budget has left, and checks the budget between chunks, so it costs less than what it
refuses.
"""
from __future__ import annotations

import math
from collections import Counter, deque
from decimal import Decimal
from itertools import chain, compress, count
from typing import Any

from rlvr.verifiers.code.budget import Failed, check, decimals_seen, remaining
from rlvr.verifiers.code.budget import check as check_between_levels  # not a charge: tests record `check` alone
from rlvr.verifiers.code.stdtypes import kind

# A non-integral Decimal power is correctly rounded at its base's length: Decimal('9' * 3000)
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


# Any long sequence, per item * log2(n) for a sort, per item for min/max; measured
# here, worst of ints, big ints, floats, strings and mixed ints and floats: 34 ns per n * log2(n) sorting (mixed
# ints and floats), 12 ns an item scanning. Nested items count once per element (order_weight): comparing two lists
# compares their elements (pairs of floats: 61 ns per n * log2(n) against 3 items of weight each).
SORT_S = 4e-8
SCAN_S = 1.5e-8
FREE_WEIGHT = 4096  # at most 4096 * 12 * 40 ns = 2 ms: not worth a charge (so small honest sorts pay nothing)
_NESTED = (list, tuple, set, frozenset, deque)  # compared element by element, in C
_MAPPINGS = (dict,)  # OrderedDict, defaultdict, Counter: compared key by key, values too
# Counter's `<`, `<=` and `==` are pure-Python code in collections, run inside the one
# sorted() call: about 0.6 us a comparison plus 70 ns a key here (4,096 Counters of 24 keys sorted in 0.15 s, 512
# of 200 keys in 65 ms). So a Counter weighs COUNTER_CALL more, and COUNTER_KEY more per key, than a dict of its
# size (keys and values, 2 a key): about twice what was measured, in units of SORT_S.
COUNTER_CALL = 32
COUNTER_KEY = 2
# Levels walked: all of them. Capped at 4, Counters wrapped in four lists were counted as one item each, and
# comparing two wrappers compares the Counters (the harness's encoder stops at 100 levels, but a line the candidate
# writes itself is decoded as deep as json goes). No cap is needed: a level's containers were counted at the level
# above, and what lies `depth` levels down counts `depth` times, so the work stays in proportion to the weight,
# which stops at `limit`, and the budget is checked at every level.
_MAX_COUNTED = 1 << 24  # counted this far, a sort asks for 0.67 s or more: no need to count on
_CHUNK = 4096  # containers expanded between two budget checks


def order_weight(items: list[Any], limit: int = _MAX_COUNTED) -> int:
    """The items plus every element of the lists, tuples, sets, deques and mappings among them (a mapping's keys and
    values; a Counter more: COUNTER_CALL, COUNTER_KEY), level by level, all the way down. Every item of a level is
    looked at, not only the first (before, `[0, long_list]` pairs weighed 3 however long the lists, and
    comparing two of them walks the lists). What lies `depth` levels down counts `depth` times: `a < b` on lists
    first compares items with `==` to find where they differ, then that pair with `<`, which does the same a level
    down (4,096 Counters wrapped in four lists sorted in 0.55 s, each compared four times with `==`
    and once with `<`). Each level is sorted by type and counted by C loops (map, compress, chain), with a budget
    check every _CHUNK containers; counting stops once past `limit`."""
    total, level = len(items), items
    for depth in count(1):
        if total > limit:
            break
        grouped = _containers(level)
        if not grouped:
            break
        level = []
        for cls, nested in grouped:
            for at in range(0, len(nested), _CHUNK):
                check_between_levels()
                added, elements = _expand(cls, nested[at:at + _CHUNK])
                total += added * depth
                if total > limit:
                    return total
                level.extend(elements)
    return total


def _containers(level: list[Any]) -> list[tuple[type, list[Any]]]:
    """The containers of `level`, grouped by the rule that counts them (_NESTED, _MAPPINGS, Counter). Typed in C:
    map(type) over the level once, then compress() for each group present."""
    types = list(map(type, level))
    present = set(types)
    out = []
    for cls in (_NESTED, Counter, _MAPPINGS):
        members = {t for t in present if issubclass(t, cls) and not (cls is _MAPPINGS and issubclass(t, Counter))}
        if members:
            chosen = level if members == present else list(compress(level, map(members.__contains__, types)))
            out.append((cls, chosen))
    return out


def _expand(cls: Any, nested: list[Any]) -> tuple[int, Any]:
    """The weight `nested` (containers of one group) adds, and their elements to count next (a mapping's values:
    its keys are found by hash, not walked)."""
    size = sum(map(len, nested))
    if cls is _NESTED:
        return size, chain.from_iterable(nested)
    values = chain.from_iterable(map(dict.values, nested))
    if cls is Counter:
        return 2 * size + COUNTER_CALL * len(nested) + COUNTER_KEY * size, values
    return 2 * size, values


def _limit(cost_each: float) -> int:
    """The weight past which the charge, at `cost_each` a unit, is more than the budget has left: counting further
    would only make a refusal more certain."""
    left = remaining()
    return _MAX_COUNTED if left is None else min(_MAX_COUNTED, int(max(left, 0.0) / cost_each) + 1)


def order_bound(items: list[Any], sort: bool) -> None:
    """Pay before sorting (`sort`) or scanning for min/max `items`: the time it costs (long sequences: SORT_S, SCAN_S),
    or more when they mix Decimals with other numbers, or hold containers, in a completion that has Decimals at all.
    Ordinary sizes pay nothing. A scan pays SCAN_S an item and SORT_S for each element of a container item."""
    n = len(items)
    if n < 2:
        return
    cost = 0.0
    weight = order_weight(items, _limit(math.log2(n) * SORT_S if sort else SCAN_S))
    if weight > FREE_WEIGHT:  # a long string or list sorted in one C call
        cost = weight * math.log2(n) * SORT_S if sort else n * SCAN_S + (weight - n) * SORT_S
    if decimals_seen():
        types = set(map(type, items))
        decimals = [t for t in types if issubclass(t, Decimal)]
        if (decimals and len(decimals) < len(types)) or any(issubclass(t, (list, tuple)) for t in types):
            cost = max(cost, n * math.log2(n) * MIXED_SORT_S if sort else n * MIXED_SCAN_S)
    if cost:
        check(cost)


def compare_bound(op: str, left: Any, right: Any) -> None:
    """Pay before comparing two containers (one C call, which may run Counter's Python comparisons throughout): both
    sides' weights at SCAN_S, when over FREE_WEIGHT. Equality of sequences, sets or dicts of different lengths is
    decided at once in C, free; a Counter's `==` has no such shortcut."""
    if not (isinstance(left, _CONTAINERS) and isinstance(right, _CONTAINERS)):
        return
    if op in ("Eq", "NotEq") and len(left) != len(right) and not isinstance(left, Counter) \
            and not isinstance(right, Counter):
        return
    weight = order_weight([left, right], _limit(SCAN_S)) - 2
    if weight > FREE_WEIGHT:
        check(weight * SCAN_S)


def member_bound(item: Any, items: Any) -> None:
    """Pay before `item in items` compares a container with each item of a list, tuple or deque: their weight, and
    the item's once for each of them, at SCAN_S, when over FREE_WEIGHT (sets and dicts find it by hash)."""
    if not (isinstance(item, _CONTAINERS) and isinstance(items, (list, tuple, deque))):
        return
    limit = _limit(SCAN_S)
    weight = order_weight(items, limit) + len(items) * (order_weight([item], limit) - 1)
    if weight > FREE_WEIGHT:
        check(weight * SCAN_S)


_CONTAINERS = (*_NESTED, dict)
