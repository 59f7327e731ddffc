"""The wire between the parent and the sandbox's harness: tagged JSON, one value per candidate call.

Plain JSON carries None, bool, int (|x| < 2**53), float (NaN and infinities as JSON's NaN/Infinity), str
and list. Everything else is a one-key object whose key says the type: {"i": hex} big int, {"b": hex} bytes,
{"t": items} tuple, {"s": items} set, {"f": items} frozenset, {"d": pairs} dict, {"o": pairs} OrderedDict,
{"k": pairs} Counter, {"c": [re, im]} complex, {"q": [numerator, denominator]} Fraction, {"it": items} a
drained iterator (Materialized). OrderedDict and Counter keep their own tags because Python compares them
differently from a dict: OrderedDicts by order, Counters with missing keys as zero (issue #24).

Results are decoded by json's C parser with a hook per tagged object, so a 1 MiB line of plain lists costs
milliseconds, and each decoded NaN is a new object: Python's container equality takes identity first
(`[x] == [x]` is True for one NaN object), and the candidate's NaNs are never the parent's objects.
"""
from __future__ import annotations

import json
from collections import Counter, OrderedDict
from fractions import Fraction
from typing import Any

from rlvr.verifiers.code.budget import CHECK_EVERY, Failed, check, produced
from rlvr.verifiers.code.values import MAX_INT_BITS, hash_bound


class Materialized(list):
    """An iterator the candidate returned, drained in the sandbox. Each use of the value gets a fresh iterator,
    so `list(gen(3))` works and `gen(3) == [1]` is False, as in Python."""


def fresh(x: Any) -> Any:
    """A stored call result as the assert sees it: a drained iterator becomes a new iterator each time."""
    return iter(list(x)) if type(x) is Materialized else x


# ---------------------------------------------------------------- parent -> sandbox (arguments)
def encode(x: Any, depth: int = 0) -> Any:
    """Plain value -> wire value, for the arguments the parent sends to the candidate's functions."""
    t = type(x)
    if x is None or t in (bool, str, float):
        return x
    if t is int:
        return x if -(1 << 53) < x < (1 << 53) else {"i": hex(x)}
    if depth > 100:
        raise Failed("argument nested too deeply")
    if t is list:
        return [encode(v, depth + 1) for v in x]
    if t is tuple:
        return {"t": [encode(v, depth + 1) for v in x]}
    if t in _DICT_TAGS:
        return {_DICT_TAGS[t]: [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in x.items()]}
    if t in (set, frozenset):
        return {"s" if t is set else "f": [encode(v, depth + 1) for v in x]}
    if t is bytes:
        return {"b": x.hex()}
    if t is complex:
        return {"c": [x.real, x.imag]}
    if t is Fraction:
        return {"q": [encode(x.numerator), encode(x.denominator)]}
    if t is range or t is Materialized or hasattr(x, "__next__"):  # ranges and iterators travel as their items
        items = list(x)
        return {"it": [encode(v, depth + 1) for v in items]} if t is not range else [encode(v) for v in items]
    raise Failed(f"cannot pass a {t.__name__} to the candidate")


_DICT_TAGS = {dict: "d", OrderedDict: "o", Counter: "k"}


# ---------------------------------------------------------------- sandbox -> parent (results)
def _int(v: Any) -> int:
    if type(v) is not str:
        raise ValueError("bad tagged value 'i'")
    x = int(v, 16)
    if x.bit_length() > MAX_INT_BITS:
        raise ValueError(f"integer of {x.bit_length()} bits is over the {MAX_INT_BITS}-bit bound")
    return x


def _pairs(kind: type) -> Any:
    def build(v: Any) -> Any:
        if type(v) is not list or not all(type(p) is list and len(p) == 2 for p in v):
            raise ValueError("bad tagged mapping")
        keys = hash_bound([k for k, _ in v])
        return kind(dict(zip(keys, (val for _, val in v)))) if kind is Counter else kind(zip(keys, (w for _, w in v)))
    return build


def _bytes(v: Any) -> bytes:
    if type(v) is not str:
        raise ValueError("bad tagged value 'b'")
    return bytes.fromhex(v)


def _number(v: Any, tag: str) -> Any:
    if type(v) is list and len(v) == 2:
        if tag == "c" and all(type(p) is float for p in v):
            return complex(*v)
        if tag == "q" and all(type(p) is int for p in v) and v[1] > 0:
            return produced(Fraction(*v))
    raise ValueError(f"bad tagged value {tag!r}")


def _items(kind: type) -> Any:
    def build(v: Any) -> Any:
        if type(v) is not list:
            raise ValueError("bad tagged sequence")
        return kind(hash_bound(v)) if kind in (set, frozenset) else kind(v)
    return build


_DECODERS = {"i": _int, "b": _bytes,
             "d": _pairs(dict), "o": _pairs(OrderedDict), "k": _pairs(Counter),
             "c": lambda v: _number(v, "c"), "q": lambda v: _number(v, "q"),
             "t": _items(tuple), "s": _items(set), "f": _items(frozenset), "it": _items(Materialized)}
_CONSTANTS = {"NaN": lambda: float("nan"), "Infinity": lambda: float("inf"), "-Infinity": lambda: float("-inf")}


class Reader:
    """Parses wire JSON strictly: every object in a value must be a known tag (an untagged object, an unknown
    tag or a bound hit raises ValueError, so the line is dropped), and the budget is checked as it goes."""

    def __init__(self) -> None:
        self.untagged = self.objects = 0

    def loads(self, text: str | bytes, untagged: int = 0) -> Any:
        """The decoded JSON document; `untagged` objects are allowed (1 for a result line's own envelope)."""
        self.untagged = 0
        value = json.loads(text, object_hook=self._object, parse_constant=lambda name: _CONSTANTS[name]())
        if self.untagged != untagged:
            raise ValueError("an untagged object inside a value")
        return value

    def _object(self, obj: dict) -> Any:
        self.objects += 1
        if self.objects % CHECK_EVERY == 0:
            check()
        if len(obj) == 1:
            (tag, v), = obj.items()
            if tag in _DECODERS:
                return _DECODERS[tag](v)
        self.untagged += 1
        return obj


def decode(x: Any) -> Any:
    """A wire value already parsed by json (a list, a tagged dict, ...) -> the plain value; ValueError if bad."""
    return Reader().loads(json.dumps(x))
