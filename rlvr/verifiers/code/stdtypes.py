"""The parent's copies of results whose type is not one of the original plain ones.

Honest results the wire could not carry (`range`, dict views, `deque`, `Decimal`, `bytearray`) scored 0,
a `defaultdict` lost its default, and a list subclass arrived as a list, so `type(f(x)) is list` passed. Now:
  * range, deque, Decimal, bytearray, defaultdict and the six dict/OrderedDict views are rebuilt here as the real
    standard-library objects, so they compare as Python compares them (`range(3) == range(3)`, a deque is not a
    list, `{}.values() != {}.values()`, `bytearray(b"a") == b"a"`).
  * An instance of a subclass of a carried type arrives as an instance of the parent's own subclass of that base
    (SUBCLASSES): `type(x) is list` is False and `isinstance(x, list)` True, as in Python, while every method is
    the base type's (the candidate's overrides never run here). `kind(x)` gives the base, so the parent's size
    bounds (code/values) treat an int subclass as an int: without it `2 ** f(x)` with an int subclass exponent
    would have skipped the bound on powers.
  * A defaultdict's default_factory comes back by name when it is one of the parent's own types (int, list, ...),
    as the one immutable value it returned once in the sandbox (`lambda: 0`), or as UnknownFactory, which fails
    the test that reads a missing key rather than guess.
Every value is bounded as it is decoded (code/wire.py): ranges over MAX_ITEMS items, Decimals over
MAX_DECIMAL_DIGITS digits and exponent, maxlen over MAX_ITEMS, a factory name the parent does not know.
"""
from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict, deque
from decimal import Decimal
from fractions import Fraction
from typing import Any

from rlvr.verifiers.code.budget import Failed, trip

MAX_DECIMAL_DIGITS = 19_000  # digits + |exponent|: int(Decimal) stays under 63,200 bits (values.MAX_INT_BITS)

_BASES = (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset, OrderedDict, Counter,
          defaultdict, deque, Fraction, Decimal)


def _subclass(base: type) -> type:
    return type(f"{base.__name__}_subclass", (base,), {"__slots__": (), "_rlvr_base": base, "__module__": __name__})


SUBCLASSES: dict[type, type] = {base: _subclass(base) for base in _BASES}


def kind(x: Any) -> type:
    """The carried type `x` stands for: its own type, or the base of one of SUBCLASSES."""
    t = type(x)
    return t._rlvr_base if t in _SUBCLASS_SET else t


_SUBCLASS_SET = frozenset(SUBCLASSES.values())


def as_subclass(value: Any) -> Any:
    """The decoded base-type content of a subclass instance, as an instance of the parent's subclass of its type."""
    t = type(value)
    if t not in SUBCLASSES:
        raise ValueError(f"a subclass of {t.__name__} is not carried")
    cls = SUBCLASSES[t]
    if t is defaultdict:
        return cls(value.default_factory, value)
    if t is deque:
        return cls(value, value.maxlen)
    if t is complex:
        return cls(value.real, value.imag)
    return cls(value)


# ---------------------------------------------------------------- defaultdict factories
FACTORIES: dict[str, Any] = {f.__name__: f for f in (int, float, complex, str, bytes, bytearray, list, tuple, dict,
                                                      set, frozenset, bool, Counter, OrderedDict, deque, Fraction,
                                                      Decimal)}
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, Fraction, Decimal)


class Constant:
    """A default_factory that returns one immutable value (the candidate's `lambda: 0`, as made in the sandbox)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        if type(value) not in _IMMUTABLE:
            raise ValueError("a default factory's value must be immutable")
        self.value = value

    def __call__(self) -> Any:
        return self.value

    def __repr__(self) -> str:
        return f"(lambda: {self.value!r})"


class UnknownFactory:
    """A default_factory the parent cannot rebuild: reading a missing key fails the test, never guesses."""

    __slots__ = ()

    def __call__(self) -> Any:
        trip()  # a check program that catches the Failed still fails
        raise Failed("the defaultdict's default_factory is the candidate's own callable, which the parent does not "
                     "run (a built-in type or a function returning one immutable value is rebuilt)")

    def __repr__(self) -> str:
        return "<the candidate's factory>"


def factory(spec: Any) -> Any:
    """A wire factory spec -> the parent's default_factory: None, a FACTORIES name, ["=", value] or "?"."""
    if spec is None:
        return None
    if type(spec) is str:
        if spec == "?":
            return UnknownFactory()
        if spec in FACTORIES:
            return FACTORIES[spec]
    if type(spec) is list and len(spec) == 2 and spec[0] == "=":
        return Constant(spec[1])
    raise ValueError("bad default factory")


def factory_spec(f: Any) -> Any:
    """The parent's default_factory -> its wire spec (arguments sent to the candidate); Failed when not carried."""
    if f is None or (type(f) is type and FACTORIES.get(f.__name__) is f):
        return None if f is None else f.__name__
    if type(f) is Constant:
        return ["=", f.value]  # the caller encodes the value
    raise Failed("cannot pass a defaultdict with this default_factory to the candidate")


# ---------------------------------------------------------------- decoding the new types (code/wire.py)
def decimal(text: Any) -> Decimal:
    if type(text) is not str or len(text) > 2 * MAX_DECIMAL_DIGITS:
        raise ValueError("bad tagged value 'dec'")
    try:
        value = Decimal(text)
    except ArithmeticError:  # decimal.InvalidOperation: not a number
        raise ValueError("bad tagged value 'dec'") from None
    check_decimal(value)
    return value


def check_decimal(value: Decimal) -> None:
    """Failed when int(value) or exact arithmetic on it would be too big (Decimal('1e999999999') is 9 bytes)."""
    if value.is_finite():
        sign, digits, exponent = value.as_tuple()
        if len(digits) + abs(exponent) > MAX_DECIMAL_DIGITS:
            raise Failed(f"Decimal with more than {MAX_DECIMAL_DIGITS} digits and exponent is over the bound")


def view(tag: str, items: list) -> Any:
    """dict_keys / dict_values / dict_items (or OrderedDict's) of a fresh mapping, as Python would compare them."""
    mapping = OrderedDict if tag.startswith("o") else dict
    if tag.endswith("k"):
        return mapping.fromkeys(items).keys()
    if tag.endswith("v"):
        return mapping(enumerate(items)).values()
    if not all(type(pair) is list and len(pair) == 2 for pair in items):
        raise ValueError("bad tagged view")
    return mapping(map(tuple, items)).items()


VIEW_TAGS = {type({}.keys()): "vk", type({}.values()): "vv", type({}.items()): "vi",
             type(OrderedDict().keys()): "ovk", type(OrderedDict().values()): "ovv",
             type(OrderedDict().items()): "ovi"}
