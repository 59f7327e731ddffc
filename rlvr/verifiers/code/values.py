"""Plain data in the parent: equality, size bounds, and the fixed allow-list the parent evaluates asserts with.

A pass must never depend on anything the candidate can define or patch. So everything in an assert
except the candidate's own calls runs here, in the trusted parent, on *plain* values: exactly None, bool,
int, float, complex, Fraction, str, bytes, list, tuple, dict, OrderedDict, Counter, set, frozenset, and also
range, bytearray, deque, defaultdict, Decimal, dict views and subclasses of these (code/stdtypes; decoded
from the sandbox's wire format, verifiers/code/wire.py, so they carry no overridden methods), combined only by the
functions below. Each function is a real builtin or `math` function, called through `call_allowed`, which
refuses anything else and bounds the ones that could blow up the trainer's memory or time (`2 ** f(x)`,
`"a" * f(x)`, `range(10**12)`, `math.factorial(10**9)`, `pow(a, f(x), m)`). A bound that trips fails the test
(the value came from the candidate); it never crashes or stalls a step. What no single bound covers (loops
over candidate data) is covered by the parent's CPU budget (verifiers/code/budget.py).
"""
from __future__ import annotations

import builtins
import math
import operator
from collections import Counter, OrderedDict, defaultdict, deque
from decimal import Decimal
from fractions import Fraction
from itertools import islice
from typing import Any, Callable, Iterable

from rlvr.verifiers.code.budget import CHECK_EVERY, Failed, check, guarded, produced
from rlvr.verifiers.code.decimals import compare_bound, decimal_pow_bound, member_bound, order_bound
from rlvr.verifiers.code.stdtypes import check_decimal, kind

MAX_ITEMS = 1_000_000  # longest str/list/range the parent builds from a reference expression
# ~19,700 decimal digits (1000! has 2,568). Measured: at 2**18 bits one division took 56 ms and one gcd ~100 ms
# here; at 2**16 they take 2 ms and 7 ms, so a few of them stay within the parent's budget.
MAX_INT_BITS = 1 << 16
MAX_HASH_COLLISIONS = 32  # distinct values sharing one hash, in a set or dict built from candidate data
MAX_FACTORIAL_ARG = 5_000  # 5000! has ~54,000 bits (1.2 ms); 20000! took 15 ms and is over MAX_INT_BITS anyway
MAX_COMB_ARG = 20_000  # comb(20000, 10000): 12 ms here; comb(100000, 50000) took 208 ms
MAX_ROUND_DIGITS = 10_000
MAX_MODPOW_WORK = 1 << 32  # pow(b, e, m): bits(e) * bits(m)**2; pow with a 20,000-bit e and 65,536-bit m took 211 s
# A range result may stand for no more than the list the wire would carry in its place: a result line is capped
# at 1 MiB (SandboxConfig.max_output_bytes' default), and a list item takes at least 3 bytes there ("1, "), an int
# of 53 bits or more 13 + its hex digits ('{"i": "0x..."}, '). Unbounded, range(2 ** 126, 2 ** 126 + 10 ** 6)
# is 30 bytes on the wire, and set() of it cost the parent 0.2-0.9 s.
RESULT_RANGE_BYTES = 1 << 20
HASH_S_PER_ITEM = 2e-7  # hash_bound plus the set/dict built after it: 0.15-0.4 us an item here, under load
_CHUNK = 4096

NUMBERS = (bool, int, float, complex, Fraction)


def materialized(items: Iterable[Any]) -> list[Any]:
    """list(items), built _CHUNK items at a time with a budget check between chunks: one C call over a
    1,000,000-item range took up to 0.1 s here. A list is returned as it is."""
    if type(items) is list:
        return items
    out: list[Any] = []
    iterator = iter(items)
    while True:
        check()
        before = len(out)
        out.extend(islice(iterator, _CHUNK))
        if len(out) - before < _CHUNK:
            return out


def hash_bound(items: Iterable[Any]) -> list[Any]:
    """The items as a list, refused when many *different* values share one hash: ints k * (2**61 - 1) all hash
    to 0 and make building a set or dict of them quadratic (a 43,000-item set took 21 s). Equal
    values sharing a hash are fine: Python finds them at the first probe. Hashes are counted in C; only a hash
    shared by more than MAX_HASH_COLLISIONS items is looked at item by item. Hashing, counting and the set or
    dict the caller then builds are single C calls: their cost is charged to the budget before they start
    (HASH_S_PER_ITEM), so a set of a 1,000,000-item range fails at once instead of costing 0.2-0.4 s."""
    items = materialized(items)
    check(len(items) * HASH_S_PER_ITEM)
    hashes = list(map(hash, items))  # raises TypeError on an unhashable item, as set() would
    if len(items) <= MAX_HASH_COLLISIONS or Counter(hashes).most_common(1)[0][1] <= MAX_HASH_COLLISIONS:
        return items
    groups: dict[int, list[Any]] = {}  # keyed by the hash value itself: an int, which hashes to itself
    for i, (item, h) in enumerate(zip(items, hashes)):
        if i % CHECK_EVERY == 0:
            check()
        group = groups.setdefault(h, [])
        if len(group) <= MAX_HASH_COLLISIONS and not any(item == seen for seen in group):
            group.append(item)
            if len(group) > MAX_HASH_COLLISIONS:
                raise Failed(f"more than {MAX_HASH_COLLISIONS} different values share one hash")
    return items


# ---------------------------------------------------------------- equality and comparisons
def same(got: Any, want: Any, rel_tol: float | None = None) -> bool:
    """`==` of the asserts: Python's own on plain data (Python's comparison is the specification, so
    `[1, 2] != (1, 2)`, OrderedDicts compare by order, `0.1 + 0.2 != 0.3`, `1 == 1.0 == True`). With the
    reference's "rel_tol", two floats at the same place of the compared values (lists and tuples item by item,
    mappings key by key) also match within math.isclose(rel_tol=rel_tol); an int or bool against a float stays
    exact (`return 1e12` must not pass `f(3) == 1000000000999`) and set members and dict keys
    stay Python's hashed lookups."""
    if rel_tol is None:
        return bool(got == want)
    return _close(got, want, rel_tol, [0])


_MAPPINGS = (dict, OrderedDict, Counter, defaultdict)


def _close(a: Any, b: Any, rel_tol: float, seen: list[int]) -> bool:
    """Python's `==` with float tolerance, following its rules per type (`x is y` first, as containers do)."""
    seen[0] += 1
    if seen[0] % CHECK_EVERY == 0:
        check()
    if a is b:
        return True
    ka, kb = kind(a), kind(b)  # a subclass compares as its base: the parent's subclasses override nothing
    if ka is float and kb is float:
        return a == b or math.isclose(a, b, rel_tol=rel_tol)
    if ka is kb and ka in (list, tuple):
        return len(a) == len(b) and all(_close(x, y, rel_tol, seen) for x, y in zip(a, b))
    if ka in _MAPPINGS and kb in _MAPPINGS:
        if ka is Counter and kb is Counter:  # Python 3.10+: a missing key counts as zero
            return all(_close(a[k], b[k], rel_tol, seen) for c in (a, b) for k in c)
        if ka is OrderedDict and kb is OrderedDict and list(a) != list(b):
            return False  # two OrderedDicts compare by order too; with a dict, like dicts
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel_tol, seen) for k in a)
    return bool(a == b)


_ORDER = {"Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt, "GtE": operator.ge}


def compare(op: str, left: Any, right: Any, rel_tol: float | None = None) -> bool:
    """One comparison of an assert (ast operator class name), as Python does it. Errors (1 < "a", 1 in 5)
    propagate: the test fails, and `not (f(x) < 5)` cannot pass by making the comparison raise."""
    if op in ("In", "NotIn"):  # one C call each, which may run Counter's Python comparisons throughout
        member_bound(left, right)
    elif op not in ("Is", "IsNot"):
        compare_bound(op, left, right)
    if op in ("Eq", "NotEq"):
        return same(left, right, rel_tol) == (op == "Eq")
    if op in ("Is", "IsNot"):  # code/forms allows `is` only against None/True/False/Ellipsis or a type
        return (left is right) == (op == "Is")
    if op in _ORDER:
        return bool(_ORDER[op](left, right))
    if rel_tol is not None and (kind(right) in (list, tuple) or hasattr(right, "__next__")):
        found = any(left is v or same(left, v, rel_tol) for v in right)  # Python's `in`: item by item
    else:
        found = left in right
    return found == (op == "In")


# ---------------------------------------------------------------- size bounds
_SIZED = (str, bytes, bytearray, list, tuple, dict, set, frozenset, deque)


def check_size(x: Any) -> Any:
    t = kind(x)
    if t is int and x.bit_length() > MAX_INT_BITS:
        raise Failed(f"integer of {x.bit_length()} bits is over the {MAX_INT_BITS}-bit bound")
    if t is Fraction and max(x.numerator.bit_length(), x.denominator.bit_length()) > MAX_INT_BITS:
        raise Failed(f"Fraction with a part over the {MAX_INT_BITS}-bit bound")
    if t is Decimal:
        check_decimal(x)
    if isinstance(x, _SIZED) and len(x) > MAX_ITEMS:
        raise Failed(f"value of length {len(x)} is over the {MAX_ITEMS} bound")
    return x


def _bits(x: Any) -> int | None:
    """Bits of an exact number's largest part (int, bool, Fraction); None for floats and complex (fast)."""
    if kind(x) in (int, bool):
        return abs(x).bit_length()
    if kind(x) is Fraction:
        return max(abs(x.numerator).bit_length(), x.denominator.bit_length())
    return None


def _pow_bound(base: Any, exp: Any, mod: Any = None) -> None:
    """Refuse powers whose exact result or work is too big, before computing them. A Fraction
    exponent (2 ** Fraction(10**7)) is an int power in Python, and so is Fraction(3, 2) ** 10**6."""
    if mod is not None:
        if all(kind(v) in (int, bool) for v in (base, exp, mod)) \
                and abs(exp).bit_length() * abs(mod).bit_length() ** 2 > MAX_MODPOW_WORK:
            raise Failed(f"pow() with a {abs(exp).bit_length()}-bit exponent modulo a {abs(mod).bit_length()}-bit "
                         "number is over the bound")
        return
    if Decimal in (kind(base), kind(exp)):
        decimal_pow_bound(base, exp)
    n = exp.numerator if kind(exp) is Fraction and exp.denominator == 1 else exp if kind(exp) in (int, bool) else None
    bits = _bits(base)
    if n is None or bits is None or bits <= 1 or (n < 0 and kind(base) is not Fraction):
        return  # trivial bases, and negative or fractional exponents of ints/floats: float results, fast
    if abs(n) * bits > MAX_INT_BITS:
        raise Failed(f"a {bits}-bit number to the power {n} is over the {MAX_INT_BITS}-bit bound")


def _bounded_sorted(iterable: Iterable[Any], /, **kwargs: Any) -> list[Any]:
    items = materialized(iterable)
    order_bound(items, sort=True)
    return sorted(items, **kwargs)


def _bounded_extreme(func: Callable[..., Any]) -> Callable[..., Any]:
    def extreme(*args: Any, **kwargs: Any) -> Any:
        if len(args) != 1:
            order_bound(list(args), sort=False)
            return func(*args, **kwargs)
        items = materialized(args[0])
        order_bound(items, sort=False)
        return func(items, **kwargs)
    return extreme


_SEQUENCES = (str, bytes, bytearray, list, tuple, deque)


def _repeat_bound(a: Any, b: Any) -> None:
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, _SEQUENCES) and kind(n) in (int, bool) and len(seq) * n > MAX_ITEMS:
            raise Failed(f"repetition to {len(seq) * n} items is over the {MAX_ITEMS} bound")


def _mod_bound(a: Any, b: Any) -> None:
    if isinstance(a, (str, bytes)):
        raise Failed("%-formatting is not evaluated (widths are unbounded)")


def _shift_bound(a: Any, b: Any) -> None:
    if kind(b) in (int, bool) and b > MAX_INT_BITS:
        raise Failed(f"shift by {b} is over the {MAX_INT_BITS}-bit bound")


BINARY = {"Add": (operator.add, None), "Sub": (operator.sub, None), "Mult": (operator.mul, _repeat_bound),
          "Div": (operator.truediv, None), "FloorDiv": (operator.floordiv, None), "Mod": (operator.mod, _mod_bound),
          "Pow": (operator.pow, _pow_bound), "LShift": (operator.lshift, _shift_bound),
          "RShift": (operator.rshift, None), "BitAnd": (operator.and_, None), "BitOr": (operator.or_, None),
          "BitXor": (operator.xor, None)}
UNARY = {"USub": operator.neg, "UAdd": operator.pos, "Invert": operator.invert, "Not": operator.not_}


def _heavy(x: Any) -> bool:
    return kind(x) is Fraction or (kind(x) is int and x.bit_length() > 4096)


def binary(op: str, left: Any, right: Any) -> Any:
    func, bound = BINARY[op]
    if bound is not None:
        bound(left, right)
    if isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES) \
            and len(left) + len(right) > MAX_ITEMS:
        raise Failed(f"concatenation is over the {MAX_ITEMS} bound")
    if _heavy(left) or _heavy(right):  # milliseconds each at the size bounds: checked one by one
        check()
    return produced(check_size(func(left, right)))


def unary(op: str, operand: Any) -> Any:
    return produced(check_size(UNARY[op](operand)))


# ---------------------------------------------------------------- the allow-list of callables and names
def _bounded_range(*args: Any) -> range:
    r = range(*args)
    check_range(r)
    return r


def check_range(r: range, result: bool = False) -> None:
    """A range is a few ints however long it is; list(r) or sum(r) is one C call. The items' size counts
    too (range(0, 2 ** 65000, 2 ** 64980) has only 2 ** 20 items, of 8 KB each), in 64-bit words rounded up (a
    127-bit item is two). A range the candidate returned (`result`) also stands for no more items than the list
    the wire would carry in its place (RESULT_RANGE_BYTES)."""
    try:
        size = len(r)
    except OverflowError:  # more items than sys.maxsize
        size = MAX_ITEMS + 1
    bits = max(abs(r.start).bit_length(), abs(r.stop).bit_length(), 1)
    if size * -(-bits // 64) > MAX_ITEMS:
        raise Failed(f"range of {size} items of up to {bits} bits is over the {MAX_ITEMS}-word bound")
    item_bytes = 3 if bits < 53 else 13 + -(-bits // 4)
    if result and size * item_bytes > RESULT_RANGE_BYTES:
        raise Failed(f"a range result of {size} items of up to {bits} bits stands for a list of {size * item_bytes} "
                     f"bytes or more, over the {RESULT_RANGE_BYTES} a result line carries")


def _bounded_pow(base: Any, exp: Any, mod: Any = None) -> Any:
    _pow_bound(base, exp, mod)
    return pow(base, exp, mod)


def _bounded_sum(iterable: Iterable[Any], /, start: Any = 0) -> Any:
    """Python's sum, with budget checks between items: summing 30,000 Fractions, or lists (quadratic), ran for
    seconds inside one C call."""
    return sum(guarded(iterable), start)


def _bounded_prod(iterable: Iterable[Any], /, *, start: Any = 1) -> Any:
    return math.prod(guarded(iterable), start=start)


def _fraction_bound(*args: Any, **kwargs: Any) -> None:
    """Fraction('1e99999999') computes 10 ** 99999999: the exponent of a string stays under MAX_ROUND_DIGITS."""
    for arg in args:
        if isinstance(arg, str) and "e" in arg.lower():
            exponent = arg.lower().rsplit("e", 1)[1].strip().lstrip("+-").replace("_", "")
            if len(exponent) > len(str(MAX_ROUND_DIGITS)):
                raise Failed(f"Fraction({arg[:40]!r}) has an exponent over the bound {MAX_ROUND_DIGITS}")


def _arg_bound(limit: int, what: str) -> Callable[..., None]:
    def bound(*args: Any, **kwargs: Any) -> None:
        if args and kind(args[0]) in (int, bool) and abs(args[0]) > limit:
            raise Failed(f"{what} argument {args[0]} is over the bound {limit}")
    return bound


def _round_bound(x: Any, ndigits: Any = None) -> None:
    if kind(ndigits) is int and abs(ndigits) > MAX_ROUND_DIGITS:
        raise Failed(f"round to {ndigits} digits is over the bound {MAX_ROUND_DIGITS}")


def _total_bits_bound(*args: Any, **kwargs: Any) -> None:
    """lcm/prod grow with their inputs: their inputs' bits together stay under the int bound."""
    values = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple, set, frozenset)) else args
    if sum(_bits(v) or 0 for v in values) > MAX_INT_BITS:
        raise Failed(f"arguments of more than {MAX_INT_BITS} bits together")


def _bytes_bound(*args: Any, **kwargs: Any) -> None:
    if args and kind(args[0]) is int and args[0] > MAX_ITEMS:
        raise Failed(f"bytes({args[0]}) is over the {MAX_ITEMS} bound")


def _defaultdict_bound(*args: Any, **kwargs: Any) -> None:
    if len(args) > 1 and not isinstance(args[1], dict):
        hash_bound(pair[0] for pair in args[1] if isinstance(pair, (list, tuple)) and len(pair) == 2)


BUILTINS = {f.__name__: f for f in (
    abs, all, any, ascii, bin, bool, bytearray, bytes, chr, dict, divmod, enumerate, filter, float, frozenset, hex, int,
    isinstance, iter, len, list, map, max, min, next, oct, ord, pow, range, repr, reversed, round, set, sorted, str,
    sum, tuple, type, zip)}
_MATH_NAMES = ("pi e tau inf nan sqrt isqrt cbrt isclose fabs floor ceil trunc gcd lcm log log2 log10 log1p exp "
               "expm1 sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh hypot dist degrees radians "
               "factorial comb perm prod fsum isfinite isinf isnan copysign fmod remainder modf frexp").split()
MODULES = {"math": {n: getattr(math, n) for n in _MATH_NAMES if hasattr(math, n)},
           "collections": {"Counter": Counter, "OrderedDict": OrderedDict, "deque": deque, "defaultdict": defaultdict},
           "fractions": {"Fraction": Fraction}, "decimal": {"Decimal": Decimal}}
# Fraction is the parent's too: as a candidate name on the expected side, `f(3) == Fraction(1, 3)`
# compared with the candidate's own Fraction class.
# Deque, defaultdict and Decimal too, which results now carry (`f(x) == deque([1, 2])`).
NAMES: dict[str, Any] = {**BUILTINS, "Counter": Counter, "OrderedDict": OrderedDict, "Fraction": Fraction,
                         "deque": deque, "defaultdict": defaultdict, "Decimal": Decimal}
# Called through a substitute (same result, bounded) or after a bound check.
_SUBSTITUTES = {range: _bounded_range, pow: _bounded_pow, sum: _bounded_sum, math.prod: _bounded_prod,
                sorted: _bounded_sorted, min: _bounded_extreme(min), max: _bounded_extreme(max)}
_BOUNDS = {round: _round_bound, bytes: _bytes_bound, bytearray: _bytes_bound, Fraction: _fraction_bound,
           defaultdict: _defaultdict_bound,
           math.factorial: _arg_bound(MAX_FACTORIAL_ARG, "factorial"),
           math.comb: _arg_bound(MAX_COMB_ARG, "comb"), math.perm: _arg_bound(MAX_COMB_ARG, "perm"),
           math.lcm: _total_bits_bound, math.prod: _total_bits_bound}
_HASHED = (set, frozenset, dict, Counter, OrderedDict)  # built from candidate data: hash_bound first
ALLOWED_IDS = {id(f) for f in (*NAMES.values(), *(v for m in MODULES.values() for v in m.values())) if callable(f)}
_BOUNDED_IDS = {id(f) for f in (*_SUBSTITUTES, *_BOUNDS, *_HASHED)}
# Names a reference may use that are Python builtins we do not evaluate: refused up front, never sent to the
# sandbox (where the candidate could have replaced them).
UNSUPPORTED_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_")) - set(NAMES)
# Libraries a reference might call through the candidate's namespace (np.allclose(f(x), want)): the sandbox
# would then decide the pass with the expected value in hand. Refused up front with the form named.
# Common `from ... import` names (deque, Decimal) too: as the candidate's, they would be whatever it defines.
LIBRARIES = frozenset("np numpy pd pandas scipy sympy torch re itertools functools operator random sys os json "
                      "string heapq bisect statistics cmath datetime time copy typing unittest "
                      "pytest builtins inspect ast types namedtuple".split())

def call_bounded(func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """func(*args, **kwargs), through the bound or substitute of the callables that have one (pow, sum, range,
    factorial, set, ...); any other callable is called as it is (a check program's own functions)."""
    if id(func) not in _BOUNDED_IDS:
        return func(*args, **kwargs)
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
    return produced(check_size(_SUBSTITUTES.get(func, func)(*args, **kwargs)))
