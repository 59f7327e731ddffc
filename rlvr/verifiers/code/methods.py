"""Methods of plain data the parent evaluates, and the one gate every call of an assert goes through.

A method runs on the parent's own values: a decoded result is the parent's copy, so its built-in methods run here,
never the candidate's. The mutating ones too (`make_stack([1, 2]).pop()`, `f().pop("a")`),
bounded as the rest: a container may not grow past MAX_ITEMS, and keys added to a set or dict from an iterable go
through hash_bound first, as set() and dict() do.
"""
from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict, deque
from decimal import Decimal
from fractions import Fraction
from itertools import chain
from typing import Any, Callable

from rlvr.verifiers.code.budget import Failed, check, produced
from rlvr.verifiers.code.decimals import order_bound
from rlvr.verifiers.code.stdtypes import kind
from rlvr.verifiers.code.values import ALLOWED_IDS, MAX_ITEMS, call_bounded, check_size, hash_bound, materialized

_DICT_METHODS = {"keys", "values", "items", "get", "copy", "pop", "popitem", "setdefault", "update", "clear"}
_BYTES_METHODS = {"decode", "hex", "count", "startswith", "endswith", "split", "strip"}
_SET_METHODS = {"union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
                "isdisjoint", "copy"}
_LIST_METHODS = {"count", "index", "copy", "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"}
METHODS: dict[type, frozenset[str]] = {k: frozenset(v) for k, v in {
    str: {"lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "join", "replace",
          "startswith", "endswith", "count", "find", "rfind", "index", "rindex", "isdigit", "isalpha", "isalnum",
          "isspace", "islower", "isupper", "isnumeric", "isdecimal", "istitle", "title", "capitalize",
          "swapcase", "casefold", "encode", "partition", "rpartition"},
    bytes: _BYTES_METHODS, bytearray: _BYTES_METHODS | {"append", "extend", "pop", "clear", "reverse"},
    list: _LIST_METHODS, tuple: {"count", "index"},
    deque: {"count", "index", "copy", "append", "appendleft", "extend", "extendleft", "pop", "popleft", "remove",
            "reverse", "rotate", "clear"},
    range: {"count", "index"}, dict: _DICT_METHODS, OrderedDict: _DICT_METHODS, defaultdict: _DICT_METHODS,
    Counter: _DICT_METHODS | {"most_common", "total", "subtract"},
    set: _SET_METHODS | {"add", "discard", "remove", "pop", "clear", "update"}, frozenset: _SET_METHODS,
    int: {"bit_length", "bit_count"}, bool: {"bit_length", "bit_count"}, float: {"is_integer"},
    Fraction: {"limit_denominator", "as_integer_ratio"},
    Decimal: {"is_nan", "is_finite", "is_infinite", "is_signed", "normalize", "as_integer_ratio"}}.items()}
METHOD_NAMES = frozenset().union(*METHODS.values())
_GROWING = frozenset({"extend", "extendleft", "update", "subtract"})  # take an iterable: bounded before the call
_KEYED = (set, dict, OrderedDict, defaultdict, Counter)


class BoundMethod:
    """`receiver.name`, where the receiver is plain data and the method is allow-listed for its type."""

    def __init__(self, receiver: Any, name: str):
        if name not in METHODS.get(kind(receiver), ()):
            raise Failed(f"method .{name}() is not evaluated on a {type(receiver).__name__}")
        self.receiver, self.name = receiver, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        receiver, name = self.receiver, self.name
        if name == "replace" and len(args) >= 2 and isinstance(args[1], str):
            times = len(receiver) + 1 if not args[0] else receiver.count(args[0])
            if times * len(args[1]) > MAX_ITEMS:
                raise Failed(f"replace() result is over the {MAX_ITEMS} bound")
        if name == "sort" and kind(receiver) is list:
            order_bound(receiver, sort=True)
        if name in _GROWING and args:
            args = (_grown(receiver, args[0]), *args[1:])
        result = check_size(getattr(receiver, name)(*args, **kwargs))
        check_size(receiver)  # append, insert, add, setdefault: one item at a time, each an evaluation step
        return result


def _grown(receiver: Any, items: Any) -> Any:
    """`items` for extend/update, materialised once; refused when the receiver would grow past MAX_ITEMS, and
    for keyed containers when the keys together would collide (hash_bound)."""
    keyed = kind(receiver) in _KEYED
    if not (keyed and isinstance(items, dict)):
        items = materialized(items)
    keys = list(items) if not keyed or kind(receiver) in (set, Counter) or isinstance(items, dict) \
        else [p[0] for p in items if isinstance(p, (list, tuple)) and len(p) == 2]
    if len(receiver) + len(keys) > MAX_ITEMS:
        raise Failed(f"a container grown to {len(receiver) + len(keys)} items is over the {MAX_ITEMS} bound")
    if keyed:
        hash_bound(chain(receiver, keys))
    return items


def attribute(value: Any, name: str) -> Any:
    """`value.name` in the parent: a method of plain data."""
    return BoundMethod(value, name)


def call_allowed(func: Any, args: list[Any], kwargs: dict[str, Any], wrap: Callable[[Any], Any]) -> Any:
    """Call an allow-listed function or method. `wrap` turns a callable argument (map's function, sorted's and
    list.sort's key) into one that goes through this check too, so `map(pow, ...)` cannot dodge the bound on pow."""
    check()
    if "key" in kwargs and callable(kwargs["key"]):
        kwargs = {**kwargs, "key": wrap(kwargs["key"])}
    if isinstance(func, BoundMethod):
        return produced(func(*args, **kwargs))
    if id(func) not in ALLOWED_IDS:
        raise Failed(f"{getattr(func, '__name__', type(func).__name__)} is not callable here")
    if func in (map, filter) and args and callable(args[0]):
        args = [wrap(args[0]), *args[1:]]
    return produced(check_size(call_bounded(func, args, kwargs)))
