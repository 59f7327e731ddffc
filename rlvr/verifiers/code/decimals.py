"""Decimals against other numbers in the parent: the costs Python's Decimal hides inside single C calls.

Issue 43 (review): `Decimal == int` converts the int to a Decimal (5.4 ms for 65,536 bits here), `Decimal < float`
converts the float exactly (3 us for a subnormal), and a non-integral Decimal power is correctly rounded at the
base's full length (18,999 nines to the power 0.5: 8.2 s). Pairs of Decimals and big ints are paid for as they
arrive (budget.Budget.number); what is left here is bounded before the C call that would run it: powers, and
sorted(), min(), max() and list.sort() of mixed numbers.
"""
from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from rlvr.verifiers.code.budget import Failed, check, decimals_seen
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


def order_bound(items: list[Any], sort: bool) -> None:
    """Pay before sorting (`sort`) or scanning for min/max `items` when they mix Decimals with other numbers, or hold
    containers, in a completion that has Decimals at all (ordinary completions pay nothing)."""
    if len(items) < 2 or not decimals_seen():
        return
    types = set(map(type, items))
    decimals = [t for t in types if issubclass(t, Decimal)]
    if not (decimals and len(decimals) < len(types)) and not any(issubclass(t, (list, tuple)) for t in types):
        return
    n = len(items)
    check(n * math.log2(n) * MIXED_SORT_S if sort else n * MIXED_SCAN_S)
