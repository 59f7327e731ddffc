"""The wire between the parent and the sandbox's harness: tagged JSON, one value per candidate call.

Plain JSON carries None, bool, int (|x| < 2**53), float (NaN and infinities as JSON's NaN/Infinity), str
and list. Everything else is a one-key object whose key says the type: {"i": hex} big int, {"b": hex} bytes,
{"t": items} tuple, {"s": items} set, {"f": items} frozenset, {"d": pairs} dict, {"o": pairs} OrderedDict,
{"k": pairs} Counter, {"c": [re, im]} complex, {"q": [numerator, denominator]} Fraction, {"it": items} a
drained iterator (decoded as an iterator over its items, at any depth; a nested one once
compared as a list). OrderedDict and Counter keep their own tags because Python compares them
differently from a dict: OrderedDicts by order, Counters with missing keys as zero.
More types (code/stdtypes.py): {"r": [start, stop, step]} range, {"ba": hex} bytearray, {"dq": [items, maxlen]}
deque, {"dec": text} Decimal, {"dd": [factory, pairs]} defaultdict, {"vk"|"vv"|"vi": items} dict views and
{"ovk"|"ovv"|"ovi": items} OrderedDict views, and {"sub": value} an instance of a subclass of the value's type.

Results are decoded by json's C parser with a hook per tagged object, so a 1 MiB line of plain lists costs
milliseconds, and each decoded NaN is a new object: Python's container equality takes identity first
(`[x] == [x]` is True for one NaN object), and the candidate's NaNs are never the parent's objects.
"""
from __future__ import annotations

import json
from collections import Counter, OrderedDict, defaultdict, deque
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable

from rlvr.verifiers.code import stdtypes
from rlvr.verifiers.code.budget import CHECK_EVERY, Failed, check, produced
from rlvr.verifiers.code.values import MAX_INT_BITS, MAX_ITEMS, check_range, hash_bound, materialized

DUMPS_S_PER_VALUE = 1e-7  # json.dumps of encoded arguments: 0.07 us a small int, 0.3 us a tagged big int (3 values)


def encode(x: Any) -> Any:
    """Plain value -> wire value, for the arguments the parent sends to the candidate's functions. An instance of
    the parent's subclass of a type (a result of another call) is sent as its base type's content. Budgeted (red
    team: a 1,000,000-item list sent back took 0.86 s to encode and 0.3 s to dump): a budget check every
    CHECK_EVERY values, and json.dumps of the whole, one C call, charged before it runs (DUMPS_S_PER_VALUE)."""
    counter = [0]
    value = _encode(x, 0, counter)
    check(counter[0] * DUMPS_S_PER_VALUE)
    return value


def _encode(x: Any, depth: int, counter: list[int]) -> Any:
    counter[0] += 1
    if counter[0] % CHECK_EVERY == 0:  # and the dump of what is encoded so far: fail as soon as it cannot be paid
        check(counter[0] * DUMPS_S_PER_VALUE)
    t = stdtypes.kind(x)
    if x is None or t in (bool, str, float):
        return x
    if t is int:
        return x if -(1 << 53) < x < (1 << 53) else {"i": hex(x)}
    if depth > 100:
        raise Failed("argument nested too deeply")
    counter[0] += 2  # a tagged value: three JSON values to dump
    items = lambda values: [_encode(v, depth + 1, counter) for v in values]  # noqa: E731
    if t is list:
        return items(x)
    if t is tuple:
        return {"t": items(x)}
    if t in _DICT_TAGS:
        return {_DICT_TAGS[t]: [items(pair) for pair in x.items()]}
    if t in (set, frozenset):
        return {"s" if t is set else "f": items(x)}
    if t is bytes:
        return {"b": x.hex()}
    if t is complex:
        return {"c": [x.real, x.imag]}
    if t is Fraction:
        return {"q": items((x.numerator, x.denominator))}
    new = _encode_new(x, t, items)
    if new is not None:
        return new
    if hasattr(x, "__next__"):  # iterators travel as their items
        return {"it": items(materialized(x))}
    raise Failed(f"cannot pass a {t.__name__} to the candidate")


def _encode_new(x: Any, t: type, items: Callable[[Any], list]) -> Any:
    """The types of code/stdtypes.py, or None."""
    if t is range:
        return {"r": items((x.start, x.stop, x.step))}
    if t is bytearray:
        return {"ba": x.hex()}
    if t is deque:
        return {"dq": [items(x), x.maxlen]}
    if t is Decimal:
        return {"dec": str(x)}
    if t is defaultdict:
        spec = stdtypes.factory_spec(x.default_factory)
        spec = ["=", items([spec[1]])[0]] if type(spec) is list else spec
        return {"dd": [spec, [items(pair) for pair in x.items()]]}
    tag = stdtypes.VIEW_TAGS.get(t)
    if tag is not None:
        return {tag: [items(pair) for pair in x] if tag.endswith("i") else items(x)}
    return None


_DICT_TAGS = {dict: "d", OrderedDict: "o", Counter: "k"}


# ---------------------------------------------------------------- sandbox -> parent (results)
def _int(v: Any) -> int:
    if type(v) is not str:
        raise ValueError("bad tagged value 'i'")
    x = int(v, 16)
    if x.bit_length() > MAX_INT_BITS:
        raise ValueError(f"integer of {x.bit_length()} bits is over the {MAX_INT_BITS}-bit bound")
    return produced(x)  # counted against the completion's Decimals (budget.Budget.number)


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


def _range(v: Any) -> range:
    if type(v) is not list or len(v) != 3 or not all(type(p) is int for p in v) or v[2] == 0:
        raise ValueError("bad tagged value 'r'")
    r = range(*v)
    check_range(r, result=True)  # iterating it (list(), sum()) is one C call the budget cannot interrupt
    return r


def _deque(v: Any) -> deque:
    if type(v) is not list or len(v) != 2 or type(v[0]) is not list \
            or not (v[1] is None or (type(v[1]) is int and 0 <= v[1] <= MAX_ITEMS)):
        raise ValueError("bad tagged value 'dq'")
    return deque(v[0], v[1])


def _defaultdict(v: Any) -> defaultdict:
    if type(v) is not list or len(v) != 2:
        raise ValueError("bad tagged value 'dd'")
    return defaultdict(stdtypes.factory(v[0]), _pairs(dict)(v[1]))


def _view(tag: str) -> Any:
    def build(v: Any) -> Any:
        if type(v) is not list:
            raise ValueError(f"bad tagged value {tag!r}")
        if tag.endswith("k"):
            hash_bound(v)
        elif tag.endswith("i"):
            hash_bound(p[0] for p in v if type(p) is list and p)
        return stdtypes.view(tag, v)
    return build


_DECODERS = {"i": _int, "b": _bytes, "ba": lambda v: bytearray(_bytes(v)),
             "d": _pairs(dict), "o": _pairs(OrderedDict), "k": _pairs(Counter), "dd": _defaultdict,
             "c": lambda v: _number(v, "c"), "q": lambda v: _number(v, "q"),
             "dec": lambda v: produced(stdtypes.decimal(v)),
             "t": _items(tuple), "s": _items(set), "f": _items(frozenset), "it": _items(iter),
             "r": _range, "dq": _deque, "sub": stdtypes.as_subclass,
             **{tag: _view(tag) for tag in ("vk", "vv", "vi", "ovk", "ovv", "ovi")}}
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
