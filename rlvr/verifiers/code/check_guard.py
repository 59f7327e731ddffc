"""A `check(candidate)` program's own operations, bounded: the AST rewrite and the helpers it calls.

A check program is trusted reference code, run as Python in the parent; but the values it works on come from the
candidate, and the parent must stay within its CPU budget whatever they are (`2 ** candidate(x)`, `"a" *
candidate(x)`, `range(candidate(x))`, a loop over a 1 MiB result). So before it is compiled, the program is
rewritten so that the operations a candidate value can make costly go through the parent's bounds (code/values):
  * `a op b` and `a op= b` -> binary(): the bounds on powers, repetition, shifts and sizes, as in the asserts;
    `%`-formatting and f-string/format() specs with a width of 7 digits or more fail instead of allocating it;
  * every call -> call(): a budget check, then values.call_bounded (pow, sum, range, factorial, comb, set(),
    Fraction(), ...) and the width/replace bounds of str/bytes methods; `super()`, `locals()` and the like, which
    read their caller's frame, are left as they are;
  * every `for` and comprehension iterates through iterate(), `while` bodies start with tick(): budget checks.
A bound or the budget tripping raises Stop, a BaseException, so `except Exception:` in the program cannot turn it
into a pass, and the run records it (Guards.tripped): the test fails even if the program catches it anyway.
Library code the program calls (random, copy, ...) runs as it is: only the program's own operations are rewritten.
"""
from __future__ import annotations

import ast
import operator
import string
from typing import Any, Iterable, Iterator

from rlvr.verifiers.code.budget import CHECK_EVERY, Failed, check
from rlvr.verifiers.code.decimals import order_bound
from rlvr.verifiers.code.values import BINARY, MAX_ITEMS, binary, call_bounded, check_size, produced

PREFIX = "__rlvr_"  # names of the helpers in the program's namespace; a program may not use names starting so
_FRAME_BUILTINS = frozenset({"super", "locals", "vars", "dir", "globals", "eval", "exec", "breakpoint"})
_INPLACE = {"Add": operator.iadd, "Sub": operator.isub, "Mult": operator.imul, "Div": operator.itruediv,
            "FloorDiv": operator.ifloordiv, "Mod": operator.imod, "Pow": operator.ipow, "LShift": operator.ilshift,
            "RShift": operator.irshift, "BitAnd": operator.iand, "BitOr": operator.ior, "BitXor": operator.ixor,
            "MatMult": operator.imatmul}
_SEQUENCES = (str, bytes, bytearray, list, tuple)
_WIDTH_METHODS = frozenset({"ljust", "rjust", "center", "zfill", "expandtabs"})
_MAX_WIDTH_DIGITS = len(str(MAX_ITEMS))  # a width written with this many digits may be over MAX_ITEMS


class Stop(BaseException):  # noqa: N818 - a BaseException on purpose: `except Exception` in the program misses it
    """A bound or the CPU budget tripped inside a check program: the test fails."""


def _call(name: str, args: list[ast.expr], keywords: list[ast.keyword] | None = None) -> ast.Call:
    return ast.Call(ast.Name(PREFIX + name, ast.Load()), args, keywords or [])


class Rewrite(ast.NodeTransformer):
    """The program's AST with its costly operations routed through Guards (module docstring)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        self.generic_visit(node)
        return ast.copy_location(_call("binary", [ast.Constant(type(node.op).__name__), node.left, node.right]), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt:
        self.generic_visit(node)
        op, target = ast.Constant(type(node.op).__name__), node.target
        if isinstance(target, ast.Name):  # x op= v is x = x.__iop__(v): the same, bounded
            new: ast.stmt = ast.Assign([ast.Name(target.id, ast.Store())],
                                       _call("inplace", [op, ast.Name(target.id, ast.Load()), node.value]))
        elif isinstance(target, ast.Subscript):
            new = ast.Expr(_call("inplace_item", [target.value, target.slice, op, node.value]))
        else:
            new = ast.Expr(_call("inplace_attr", [target.value, ast.Constant(target.attr), op, node.value]))
        return ast.copy_location(new, node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _FRAME_BUILTINS:
            return node
        return ast.copy_location(_call("call", [node.func, *node.args], node.keywords), node)

    def visit_For(self, node: ast.For) -> ast.stmt:
        self.generic_visit(node)
        node.iter = _call("iterate", [node.iter])
        return node

    def visit_comprehension(self, node: ast.comprehension) -> ast.comprehension:
        self.generic_visit(node)
        if not node.is_async:
            node.iter = _call("iterate", [node.iter])
        return node

    def visit_While(self, node: ast.While) -> ast.stmt:
        self.generic_visit(node)
        node.body.insert(0, ast.Expr(_call("tick", [])))
        return node

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.FormattedValue:
        self.generic_visit(node)
        spec = node.format_spec if node.format_spec is not None else ast.Constant("")
        node.value = _call("format", [node.value, ast.Constant(node.conversion), spec])
        node.conversion, node.format_spec = -1, None
        return node


class Guards:
    """The helpers of one run of a check program; `tripped` says why a bound or the budget stopped it."""

    def __init__(self) -> None:
        self.tripped = ""
        self.ticks = 0

    def namespace(self) -> dict[str, Any]:
        return {PREFIX + name: getattr(self, name) for name in ("binary", "inplace", "inplace_item", "inplace_attr",
                                                                   "call", "iterate", "tick", "format")}

    def stop(self, err: Exception) -> Stop:
        self.tripped = self.tripped or str(err)
        return Stop(self.tripped)

    def tick(self) -> None:
        self.ticks += 1
        if self.ticks % 8 == 0:  # a clock read costs about half a microsecond
            try:
                check()
            except Failed as err:
                raise self.stop(err) from None

    def binary(self, op: str, left: Any, right: Any) -> Any:
        self.tick()
        try:
            if op == "Mod" and isinstance(left, (str, bytes, bytearray)):
                _format_bound(left, right if isinstance(right, tuple) else (right,))
                return check_size(left % right)
            if op not in BINARY:  # @: no built-in type defines it
                return operator.matmul(left, right)
            return binary(op, left, right)
        except Failed as err:
            raise self.stop(err) from None

    def inplace(self, op: str, left: Any, right: Any) -> Any:
        if op == "Mod" and isinstance(left, (str, bytes, bytearray)):
            return self.binary(op, left, right)  # immutable: s %= x is s = s % x
        self.tick()
        try:
            bound = BINARY[op][1] if op in BINARY else None
            if bound is not None:  # the bound alone, before the operation: x **= y is not computed twice
                bound(left, right)
            if op == "Add" and isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES) \
                    and len(left) + len(right) > MAX_ITEMS:
                raise Failed(f"concatenation is over the {MAX_ITEMS} bound")
            return produced(check_size(_INPLACE[op](left, right)))
        except Failed as err:
            raise self.stop(err) from None

    def inplace_item(self, container: Any, key: Any, op: str, value: Any) -> None:
        container[key] = self.inplace(op, container[key], value)

    def inplace_attr(self, obj: Any, name: str, op: str, value: Any) -> None:
        setattr(obj, name, self.inplace(op, getattr(obj, name), value))

    def call(self, func: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.tick()
        try:
            receiver = getattr(func, "__self__", None)
            if isinstance(receiver, (str, bytes, bytearray, int)):
                _method_bound(getattr(func, "__name__", ""), receiver, args, kwargs)
            elif getattr(func, "__objclass__", None) in (str, bytes, bytearray, int) and args:  # str.ljust(s, n)
                _method_bound(func.__name__, args[0], args[1:], kwargs)
            elif isinstance(receiver, list) and getattr(func, "__name__", "") == "sort":
                order_bound(receiver, sort=True)
            elif func is format and len(args) > 1:
                _width_bound(args[1])
            return call_bounded(func, list(args), kwargs)
        except Failed as err:
            raise self.stop(err) from None

    def iterate(self, items: Iterable[Any]) -> Iterator[Any]:
        for i, item in enumerate(items):
            if i % CHECK_EVERY == 0:
                try:
                    check()
                except Failed as err:
                    raise self.stop(err) from None
            yield item

    def format(self, value: Any, conversion: int, spec: str) -> str:
        try:
            _width_bound(spec)
        except Failed as err:
            raise self.stop(err) from None
        value = {-1: value, 115: str, 114: repr, 97: ascii}[conversion](value) if conversion != -1 else value
        return format(value, spec)


def _width_bound(spec: Any) -> None:
    """A format spec with a run of _MAX_WIDTH_DIGITS digits asks for a width or precision that may be huge."""
    if isinstance(spec, str) and any(run.isdigit() and len(run) >= _MAX_WIDTH_DIGITS
                                     for run in "".join(c if c.isdigit() else " " for c in spec).split()):
        raise Failed(f"a format width or precision of {_MAX_WIDTH_DIGITS}+ digits is over the bound")


def _format_bound(fmt: str | bytes | bytearray, args: tuple) -> None:
    """%-formatting: a literal width of many digits, or a `*` width taken from a big int argument."""
    _width_bound(fmt if isinstance(fmt, str) else bytes(fmt).decode("latin-1"))
    if any(type(a) is int and abs(a) > MAX_ITEMS for a in args) and "*" in str(fmt):
        raise Failed(f"a %-format width over the {MAX_ITEMS} bound")


def _method_bound(name: str, receiver: Any, args: tuple, kwargs: dict) -> None:
    """str/bytes (and int) methods whose result grows with an argument: widths (ljust, zfill, ...), replace,
    format and format_map, int.to_bytes. Keyword arguments and format_map are looked at too."""
    sizes = [a for a in (*args, *kwargs.values()) if type(a) is int]
    if name in _WIDTH_METHODS and any(a > MAX_ITEMS for a in sizes):
        raise Failed(f"{name}() to a width over the {MAX_ITEMS} bound")
    if name == "to_bytes" and any(a > MAX_ITEMS for a in sizes):
        raise Failed(f"to_bytes() of more than {MAX_ITEMS} bytes is over the bound")
    if name == "replace" and len(args) >= 2 and isinstance(args[1], type(receiver)):
        times = len(receiver) + 1 if not args[0] else receiver.count(args[0])
        if times * len(args[1]) > MAX_ITEMS:
            raise Failed(f"replace() result is over the {MAX_ITEMS} bound")
    if name in ("format", "format_map") and isinstance(receiver, str):
        mapping = args[0] if name == "format_map" and args else kwargs
        _Specs().vformat(receiver, args if name == "format" else (), mapping)


class _Specs(string.Formatter):
    """Formats as str.format does, checking each field's spec once its nested fields are filled in (`"{:>{w}}"
    .format("x", w=w)` built a 200 MB string); the program's own call then runs on specs known to be small."""

    def format_field(self, value: Any, format_spec: str) -> str:
        _width_bound(format_spec)
        return format(value, format_spec)
