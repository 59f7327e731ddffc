"""Plain data in the parent: the wire format, equality, and the fixed allow-list the parent evaluates asserts with.

Issue #8: a pass must never depend on anything the candidate can define or patch. So everything in an assert
except the candidate's own calls runs here, in the trusted parent, on *plain* values: exactly None, bool,
int, float, str, bytes, list, tuple, dict, set, frozenset (decoded from the sandbox's wire format, so they
carry no overridden methods), combined only by the functions below. Each function is a real builtin or
`math` function, called through `call_allowed`, which refuses anything else and bounds the ones that could
blow up the trainer's memory or time (`2 ** f(x)`, `"a" * f(x)`, `range(10**12)`, `math.factorial(10**9)`).
A bound that trips fails the test (the value came from the candidate); it never crashes or stalls a step.
"""
from __future__ import annotations

import builtins
import math
import operator
from collections import Counter, OrderedDict
from fractions import Fraction
from typing import Any, Callable, Iterable

MAX_ITEMS = 1_000_000  # longest str/list/range the parent builds from a reference expression
MAX_INT_BITS = 1 << 18  # ~79,000 decimal digits: 1000! has 2,568; a gcd of two such ints takes milliseconds
MAX_HASH_COLLISIONS = 32  # distinct values sharing one hash, in a set or dict built from candidate data
MAX_FACTORIAL_ARG = 20_000
MAX_COMB_ARG = 100_000
MAX_ROUND_DIGITS = 10_000
FLOAT_REL_TOL = 1e-9


class Failed(ValueError):
    """The test fails; the message says why (a candidate value the parent cannot use, or a bound hit). A
    ValueError, so a result line whose decoding trips a bound is dropped like any unreadable line."""


NUMBERS = (bool, int, float, complex, Fraction)


def hash_bound(items: Iterable[Any]) -> list[Any]:
    """The items as a list, refused when many *different* values share one hash: ints k * (2**61 - 1) all hash
    to 0 and make building a set or dict of them quadratic (a 43,000-item set took 21 s in review). Equal
    values sharing a hash are fine: Python finds them at the first probe."""
    items = list(items)
    groups: dict[int, list[Any]] = {}  # keyed by the hash value itself: an int, which hashes to itself
    for item in items:
        group = groups.setdefault(hash(item), [])
        if len(group) <= MAX_HASH_COLLISIONS and not any(item == seen for seen in group):
            group.append(item)
            if len(group) > MAX_HASH_COLLISIONS:
                raise Failed(f"more than {MAX_HASH_COLLISIONS} different values share one hash")
    return items


class Materialized(list):
    """An iterator the candidate returned, drained in the sandbox. Each use of the value gets a fresh iterator,
    so `list(gen(3))` works and `gen(3) == [1]` is False, as in Python."""


# ---------------------------------------------------------------- the wire (both directions, tagged JSON)
def decode(x: Any) -> Any:
    """Wire value -> plain value: lists; {"t": items} tuple; {"i": hex} big int; {"d": pairs}; {"s": items};
    {"f": items} frozenset; {"b": hex} bytes; {"it": items} a drained iterator (Materialized)."""
    if type(x) is list:
        return [decode(v) for v in x]
    if type(x) is not dict:
        if x is None or type(x) in (bool, int, float, str):
            return x
        raise ValueError(f"bad wire value of type {type(x).__name__}")
    if len(x) != 1:
        raise ValueError("bad tagged value")
    (tag, v), = x.items()
    if tag == "i" and type(v) is str:
        return _bounded_int(int(v, 16))
    if tag == "b" and type(v) is str:
        return bytes.fromhex(v)
    if type(v) is not list:
        raise ValueError(f"bad tagged value {tag!r}")
    if tag == "d" and all(type(p) is list and len(p) == 2 for p in v):
        keys = hash_bound(decode(k) for k, _ in v)
        return dict(zip(keys, (decode(val) for _, val in v)))
    if tag in ("c", "q") and len(v) == 2:
        parts = [decode(p) for p in v]
        if tag == "c" and all(type(p) is float for p in parts):
            return complex(*parts)
        if tag == "q" and all(type(p) is int for p in parts) and parts[1] > 0:
            return Fraction(*parts)
        raise ValueError(f"bad tagged value {tag!r}")
    decoders = {"t": tuple, "s": set, "f": frozenset, "it": Materialized}
    if tag not in decoders:
        raise ValueError(f"bad tagged value {tag!r}")
    items = [decode(e) for e in v]
    return decoders[tag](hash_bound(items) if tag in ("s", "f") else items)


def _bounded_int(x: int) -> int:
    if x.bit_length() > MAX_INT_BITS:
        raise ValueError(f"integer of {x.bit_length()} bits is over the {MAX_INT_BITS}-bit bound")
    return x


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
    if isinstance(x, dict) and t in (dict, Counter, OrderedDict):
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in x.items()]}
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


def fresh(x: Any) -> Any:
    """A stored call result as the assert sees it: a drained iterator becomes a new iterator each time."""
    return iter(list(x)) if type(x) is Materialized else x


# ---------------------------------------------------------------- equality and comparisons
def same(got: Any, want: Any) -> bool:
    """`==` of the asserts: Python's, except that tuples equal lists (references written for JSON-minded
    harnesses mix them) and two floats compare within FLOAT_REL_TOL, so 0.1 + 0.2 == 0.3 passes. An int or
    bool against a float is Python's exact `==`: a tolerance there would let `return 1e12` pass
    `f(3) == 1000000000999` (issue #8 review)."""
    if type(got) is float and type(want) is float:
        return got == want or math.isclose(got, want, rel_tol=FLOAT_REL_TOL)
    if isinstance(got, NUMBERS) and isinstance(want, NUMBERS):
        return got == want
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in got)
    if isinstance(got, (set, frozenset)) and isinstance(want, (set, frozenset)):
        return got == want
    return type(got) is type(want) and got == want


def _as_lists(x: Any) -> Any:
    return [_as_lists(v) for v in x] if isinstance(x, (list, tuple)) else x


_ORDER = {"Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt, "GtE": operator.ge}


def compare(op: str, left: Any, right: Any) -> bool:
    """One comparison of an assert (ast operator class name). Errors (1 < "a") propagate: the test fails,
    and `not (f(x) < 5)` cannot pass by making the comparison raise."""
    if op in ("Eq", "NotEq"):
        return same(left, right) == (op == "Eq")
    if op in ("Is", "IsNot"):
        return (left is right) == (op == "Is")
    if op in _ORDER:
        return bool(_ORDER[op](_as_lists(left), _as_lists(right)))
    if isinstance(right, (list, tuple, set, frozenset, dict)) or hasattr(right, "__next__"):
        found = any(same(left, v) for v in right)
    elif isinstance(right, (str, bytes)):
        found = left in right
    else:
        raise Failed(f"'in' needs a container, got {type(right).__name__}")
    return found == (op == "In")


# ---------------------------------------------------------------- size bounds
def check_size(x: Any) -> Any:
    if type(x) is int and x.bit_length() > MAX_INT_BITS:
        raise Failed(f"integer of {x.bit_length()} bits is over the {MAX_INT_BITS}-bit bound")
    if isinstance(x, (str, bytes, list, tuple, dict, set, frozenset)) and len(x) > MAX_ITEMS:
        raise Failed(f"value of length {len(x)} is over the {MAX_ITEMS} bound")
    return x


def _pow_bound(base: Any, exp: Any) -> None:
    if type(base) in (int, bool) and type(exp) in (int, bool) and exp > 0 and abs(base) > 1:
        if exp * base.bit_length() > MAX_INT_BITS:
            raise Failed(f"{base} ** {exp} is over the {MAX_INT_BITS}-bit bound")


def _repeat_bound(a: Any, b: Any) -> None:
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, bytes, list, tuple)) and type(n) in (int, bool) and len(seq) * n > MAX_ITEMS:
            raise Failed(f"repetition to {len(seq) * n} items is over the {MAX_ITEMS} bound")


def _mod_bound(a: Any, b: Any) -> None:
    if isinstance(a, (str, bytes)):
        raise Failed("%-formatting is not evaluated (widths are unbounded)")


def _shift_bound(a: Any, b: Any) -> None:
    if type(b) in (int, bool) and b > MAX_INT_BITS:
        raise Failed(f"shift by {b} is over the {MAX_INT_BITS}-bit bound")


BINARY = {"Add": (operator.add, None), "Sub": (operator.sub, None), "Mult": (operator.mul, _repeat_bound),
          "Div": (operator.truediv, None), "FloorDiv": (operator.floordiv, None), "Mod": (operator.mod, _mod_bound),
          "Pow": (operator.pow, _pow_bound), "LShift": (operator.lshift, _shift_bound),
          "RShift": (operator.rshift, None), "BitAnd": (operator.and_, None), "BitOr": (operator.or_, None),
          "BitXor": (operator.xor, None)}
UNARY = {"USub": operator.neg, "UAdd": operator.pos, "Invert": operator.invert, "Not": operator.not_}


def binary(op: str, left: Any, right: Any) -> Any:
    func, bound = BINARY[op]
    if bound is not None:
        bound(left, right)
    if isinstance(left, (str, bytes, list, tuple)) and isinstance(right, (str, bytes, list, tuple)) \
            and len(left) + len(right) > MAX_ITEMS:
        raise Failed(f"concatenation is over the {MAX_ITEMS} bound")
    return check_size(func(left, right))


# ---------------------------------------------------------------- the allow-list of callables and names
def _bounded_range(*args: Any) -> range:
    r = range(*args)
    if len(r) > MAX_ITEMS:
        raise Failed(f"range of {len(r)} items is over the {MAX_ITEMS} bound")
    return r


def _bounded_pow(base: Any, exp: Any, mod: Any = None) -> Any:
    if mod is None:
        _pow_bound(base, exp)
    return pow(base, exp, mod)


def _arg_bound(limit: int, what: str) -> Callable[..., None]:
    def check(*args: Any, **kwargs: Any) -> None:
        if args and type(args[0]) in (int, bool) and abs(args[0]) > limit:
            raise Failed(f"{what} argument {args[0]} is over the bound {limit}")
    return check


def _round_bound(x: Any, ndigits: Any = None) -> None:
    if type(ndigits) is int and abs(ndigits) > MAX_ROUND_DIGITS:
        raise Failed(f"round to {ndigits} digits is over the bound {MAX_ROUND_DIGITS}")


def _total_bits_bound(*args: Any, **kwargs: Any) -> None:
    """lcm/prod grow with their inputs: their inputs' bits together stay under the int bound."""
    values = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple, set, frozenset)) else args
    if sum(v.bit_length() for v in values if type(v) is int) > MAX_INT_BITS:
        raise Failed(f"arguments of more than {MAX_INT_BITS} bits together")


def _bytes_bound(*args: Any, **kwargs: Any) -> None:
    if args and type(args[0]) is int and args[0] > MAX_ITEMS:
        raise Failed(f"bytes({args[0]}) is over the {MAX_ITEMS} bound")


BUILTINS = {f.__name__: f for f in (
    abs, all, any, ascii, bin, bool, bytes, chr, dict, divmod, enumerate, filter, float, frozenset, hex, int,
    isinstance, iter, len, list, map, max, min, next, oct, ord, pow, range, repr, reversed, round, set, sorted, str,
    sum, tuple, type, zip)}
_MATH_NAMES = ("pi e tau inf nan sqrt isqrt cbrt isclose fabs floor ceil trunc gcd lcm log log2 log10 log1p exp "
               "expm1 sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh hypot dist degrees radians "
               "factorial comb perm prod fsum isfinite isinf isnan copysign fmod remainder modf frexp").split()
MODULES = {"math": {n: getattr(math, n) for n in _MATH_NAMES if hasattr(math, n)},
           "collections": {"Counter": Counter, "OrderedDict": OrderedDict}}
NAMES: dict[str, Any] = {**BUILTINS, "Counter": Counter, "OrderedDict": OrderedDict}
# Called through a substitute (same result, bounded) or after a bound check.
_SUBSTITUTES = {range: _bounded_range, pow: _bounded_pow}
_BOUNDS = {round: _round_bound, bytes: _bytes_bound, math.factorial: _arg_bound(MAX_FACTORIAL_ARG, "factorial"),
           math.comb: _arg_bound(MAX_COMB_ARG, "comb"), math.perm: _arg_bound(MAX_COMB_ARG, "perm"),
           math.lcm: _total_bits_bound, math.prod: _total_bits_bound}
_HASHED = (set, frozenset, dict, Counter, OrderedDict)  # built from candidate data: hash_bound first
_ALLOWED_IDS = {id(f) for f in (*NAMES.values(), *(v for m in MODULES.values() for v in m.values())) if callable(f)}
# Names a reference may use that are Python builtins we do not evaluate: refused up front, never sent to the
# sandbox (where the candidate could have replaced them).
UNSUPPORTED_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_")) - set(NAMES)
# Libraries a reference might call through the candidate's namespace (np.allclose(f(x), want)): the sandbox
# would then decide the pass with the expected value in hand. Refused up front with the form named.
LIBRARIES = frozenset("np numpy pd pandas scipy sympy torch re itertools functools operator random sys os json "
                      "string heapq bisect statistics decimal fractions cmath datetime time copy typing unittest "
                      "pytest builtins inspect ast types".split())

_DICT_METHODS = {"keys", "values", "items", "get", "copy"}
_SET_METHODS = {"union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
                "isdisjoint", "copy"}
METHODS: dict[type, frozenset[str]] = {k: frozenset(v) for k, v in {
    str: {"lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "join", "replace",
          "startswith", "endswith", "count", "find", "rfind", "index", "rindex", "isdigit", "isalpha", "isalnum",
          "isspace", "islower", "isupper", "isnumeric", "isdecimal", "istitle", "title", "capitalize",
          "swapcase", "casefold", "encode", "partition", "rpartition"},
    bytes: {"decode", "hex", "count", "startswith", "endswith", "split", "strip"},
    list: {"count", "index", "copy"}, tuple: {"count", "index"},
    dict: _DICT_METHODS, OrderedDict: _DICT_METHODS, Counter: _DICT_METHODS | {"most_common", "total"},
    set: _SET_METHODS, frozenset: _SET_METHODS,
    int: {"bit_length", "bit_count"}, bool: {"bit_length", "bit_count"}, float: {"is_integer"}}.items()}
METHOD_NAMES = frozenset().union(*METHODS.values())


class BoundMethod:
    """`receiver.name`, where the receiver is plain data and the method is allow-listed for its exact type."""

    def __init__(self, receiver: Any, name: str):
        if name not in METHODS.get(type(receiver), ()):
            raise Failed(f"method .{name}() is not evaluated on a {type(receiver).__name__}")
        self.receiver, self.name = receiver, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.name == "replace" and len(args) >= 2 and isinstance(args[1], str):
            times = len(self.receiver) + 1 if not args[0] else self.receiver.count(args[0])
            if times * len(args[1]) > MAX_ITEMS:
                raise Failed(f"replace() result is over the {MAX_ITEMS} bound")
        return check_size(getattr(self.receiver, self.name)(*args, **kwargs))


def attribute(value: Any, name: str) -> Any:
    """`value.name` in the parent: a module attribute from the allow-list, or a method of plain data."""
    return BoundMethod(value, name)


def call_allowed(func: Any, args: list[Any], kwargs: dict[str, Any], wrap: Callable[[Any], Any]) -> Any:
    """Call an allow-listed function. `wrap` turns a callable argument (map's function, sorted's key) into
    one that goes through this check too, so `map(pow, ...)` cannot dodge the bound on pow."""
    if isinstance(func, BoundMethod):
        return func(*args, **kwargs)
    if id(func) not in _ALLOWED_IDS:
        raise Failed(f"{getattr(func, '__name__', type(func).__name__)} is not callable here")
    if func in (map, filter) and args and callable(args[0]):
        args = [wrap(args[0]), *args[1:]]
    if "key" in kwargs and callable(kwargs["key"]):
        kwargs = {**kwargs, "key": wrap(kwargs["key"])}
    if func is math.prod and args:
        args = [list(args[0]), *args[1:]]  # materialised once, for the bound and the call
    if func in _HASHED and args and not isinstance(args[0], dict):
        items = hash_bound(args[0])
        if func not in (set, frozenset, Counter):
            hash_bound(pair[0] for pair in items if isinstance(pair, (list, tuple)) and len(pair) == 2)
        args = [items, *args[1:]]
    bound = _BOUNDS.get(func)
    if bound is not None:
        bound(*args, **kwargs)
    return check_size(_SUBSTITUTES.get(func, func)(*args, **kwargs))
