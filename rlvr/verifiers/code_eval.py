"""Judge asserts in the parent; the sandbox only resolves the candidate's own calls (issue #8).

An assert such as `assert abs(hyp(3, 4) - 5.0) < 1e-9` is split by *name*: `hyp` is the candidate's (any name
that is not an allow-listed builtin, `math`, a comprehension variable, an unsupported builtin or a known
library), everything else is the parent's (code_values). A candidate *call chain* (`hyp(3, 4)`,
`Stack().push(1).pop()`, `candidate(xs)`) is sent to the sandbox with arguments the parent computed and comes
back as a plain value; `abs`, `-`, `<` and `1e-9` are then evaluated here, where the candidate's namespace,
builtins and modules do not exist. Nested calls (`f(g(3))`, `f(3) == f(2) + 1`) take rounds: each round
collects every call whose arguments are known, the sandbox runs them in one batch, and the asserts are
evaluated again. Forms the parent cannot evaluate are refused when the reference is read (`check_supported`,
naming the form): the sample is unscorable, never a pass decided in the sandbox.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from rlvr.verifiers.code_values import (BINARY, LIBRARIES, METHOD_NAMES, MODULES, NAMES, UNARY, UNSUPPORTED_BUILTINS,
                                        Failed, attribute, binary, call_allowed, check_size, compare, encode, fresh)

MAX_STEPS = 500_000  # expression nodes evaluated per assert (comprehensions over big ranges)
MAX_ROUNDS = 4  # depth of candidate calls nested in candidate calls' arguments
MISSING = "no result (the program exited, hung or was killed before this call)"
_COMPARE_OPS = {"Eq", "NotEq", "Lt", "LtE", "Gt", "GtE", "Is", "IsNot", "In", "NotIn"}
RUNTIME_ERRORS = (TypeError, ValueError, ArithmeticError, LookupError, AttributeError, RecursionError, MemoryError,
                   StopIteration, UnicodeError)


class BadReference(ValueError):
    """The reference tests cannot be read or evaluated safely: the sample is unscorable."""


class Pending(Exception):
    """A candidate call whose result is not known yet."""


@dataclass(frozen=True)
class CandidateCall:
    """One request to the sandbox: start at the candidate's name `root`, apply `ops` while the value is not plain
    data. ops: ["attr", name] | ["call", [wire args], [[name, wire value], ...]]."""

    root: str
    ops: list
    key: str  # canonical JSON of (root, ops): identical calls are made once


@dataclass(frozen=True)
class CallResult:
    ok: bool
    value: Any  # the decoded plain value, or why the call failed
    done: int = 0  # ops the sandbox applied; the parent applies the rest (methods on plain data)


def is_candidate_name(name: str, entry: str | None) -> bool:
    if name in ("candidate", entry):
        return True
    return name not in NAMES and name not in MODULES and name not in UNSUPPORTED_BUILTINS and name not in LIBRARIES


def candidate_chain(node: ast.expr, bound: frozenset[str] | set[str], entry: str | None) -> tuple[str, list] | None:
    """(root name, [("attr", name) | ("call", ast.Call)]) when `node` is a call/attribute chain on a candidate name."""
    ops: list = []
    while isinstance(node, (ast.Call, ast.Attribute)):
        ops.append(("call", node) if isinstance(node, ast.Call) else ("attr", node.attr))
        node = node.func if isinstance(node, ast.Call) else node.value
    if isinstance(node, ast.Name) and node.id not in bound and is_candidate_name(node.id, entry):
        return node.id, ops[::-1]
    return None


# ---------------------------------------------------------------- static check, when the reference is read
def check_supported(test: ast.expr, source: str, entry: str | None) -> None:
    """Raise BadReference naming the first form of `test` the parent cannot evaluate, or when it never calls
    the candidate (a test of constants)."""
    checker = _Checker(entry)
    try:
        checker.visit(test, frozenset())
    except _Unsupported as err:
        raise BadReference(f"{source[:80]!r} uses {err}, which rlvr does not evaluate (README: supported assert "
                           "forms); the sample is unscorable") from None
    if not checker.uses_candidate:
        raise BadReference(f"{source[:80]!r} tests only constants")


class _Unsupported(Exception):
    pass


_SIMPLE = (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.BoolOp, ast.IfExp, ast.Subscript, ast.Slice,
           ast.Starred)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class _Checker:
    def __init__(self, entry: str | None):
        self.entry, self.uses_candidate = entry, False

    def visit(self, node: ast.AST | None, bound: frozenset[str]) -> None:
        if node is None:
            return
        chain = candidate_chain(node, bound, self.entry) if isinstance(node, (ast.expr,)) else None
        if chain is not None:
            self.uses_candidate = True
            for kind, call in chain[1]:
                if kind == "call":
                    self._children([*call.args, *call.keywords], bound)
        elif isinstance(node, ast.Name):
            self._name(node.id, bound)
        elif isinstance(node, ast.Attribute):
            self._attribute(node, bound)
        elif isinstance(node, ast.Call):
            self._children([node.func, *node.args, *node.keywords], bound)
        elif isinstance(node, ast.BinOp) and type(node.op).__name__ in BINARY:
            self._children([node.left, node.right], bound)
        elif isinstance(node, ast.UnaryOp) and type(node.op).__name__ in UNARY:
            self.visit(node.operand, bound)
        elif isinstance(node, ast.Compare) and all(type(op).__name__ in _COMPARE_OPS for op in node.ops):
            self._children([node.left, *node.comparators], bound)
        elif isinstance(node, ast.keyword):
            self.visit(node.value, bound)
        elif isinstance(node, _COMPREHENSIONS):
            self._comprehension(node, bound)
        elif isinstance(node, _SIMPLE):
            self._children([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)], bound)
        else:
            raise _Unsupported(_FORM_NAMES.get(type(node).__name__, f"the form {type(node).__name__}"))

    def _children(self, nodes: list, bound: frozenset[str]) -> None:
        for child in nodes:
            self.visit(child, bound)

    def _name(self, name: str, bound: frozenset[str]) -> None:
        if name in bound or name in NAMES:
            return
        if name in MODULES:
            raise _Unsupported(f"the module {name!r} as a value (use its functions: {name}.sqrt(...))")
        if name in UNSUPPORTED_BUILTINS:
            raise _Unsupported(f"the builtin {name!r}")
        raise _Unsupported(f"the library {name!r}")  # LIBRARIES; candidate names were chains

    def _attribute(self, node: ast.Attribute, bound: frozenset[str]) -> None:
        value = node.value
        if isinstance(value, ast.Name) and value.id in MODULES and value.id not in bound:
            if node.attr not in MODULES[value.id]:
                raise _Unsupported(f"{value.id}.{node.attr} (not in rlvr's {value.id} allow-list)")
            return
        if isinstance(value, ast.Name) and value.id in LIBRARIES and value.id not in bound:
            raise _Unsupported(f"the library call {value.id}.{node.attr}")
        if node.attr not in METHOD_NAMES:
            raise _Unsupported(f"the method or attribute .{node.attr} on a value")
        self.visit(value, bound)

    def _comprehension(self, node: ast.expr, bound: frozenset[str]) -> None:
        for comp in node.generators:
            if comp.is_async:
                raise _Unsupported("an async comprehension")
            self.visit(comp.iter, bound)
            bound = bound | _target_names(comp.target)
            self._children(comp.ifs, bound)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._children(parts, bound)


_FORM_NAMES = {"Lambda": "a lambda", "NamedExpr": "the walrus operator", "JoinedStr": "an f-string",
               "Await": "await", "Yield": "yield", "YieldFrom": "yield from", "MatMult": "the @ operator"}


def _target_names(target: ast.expr) -> frozenset[str]:
    if isinstance(target, ast.Name):
        return frozenset([target.id])
    if isinstance(target, (ast.Tuple, ast.List)):
        return frozenset().union(*(_target_names(t) for t in target.elts))
    raise _Unsupported("a comprehension target other than names")


# ---------------------------------------------------------------- evaluation, each round
class Evaluator:
    """Evaluates one assert's expression on plain data. `collect=False`: Python's semantics, raising Pending at
    the first unknown candidate call. `collect=True`: walks every branch (both sides of `and`, every element of
    a generator) to gather all calls whose arguments are known, so one sandbox run answers them together."""

    def __init__(self, known: dict[str, CallResult], requests: dict[str, CandidateCall], entry: str | None,
                 collect: bool = False):
        self.known, self.requests, self.entry, self.collect = known, requests, entry, collect
        self.steps, self.first_value = 0, None

    def eval(self, node: ast.expr, scope: dict[str, Any]) -> Any:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Failed(f"the assert took more than {MAX_STEPS} evaluation steps")
        chain = candidate_chain(node, scope.keys(), self.entry)
        if chain is not None:
            return self._candidate(*chain, scope)
        return getattr(self, "_" + type(node).__name__)(node, scope)

    def _all(self, nodes: list[ast.expr], scope: dict[str, Any]) -> list[Any]:
        """Every value in order; in collect mode, evaluate them all even when one is unknown."""
        if not self.collect:
            return [self.eval(n, scope) for n in nodes]
        values, unknown = [], False
        for n in nodes:
            try:
                values.append(self.eval(n, scope))
            except Exception:
                unknown = True
        if unknown:
            raise Pending
        return values

    def _candidate(self, root: str, ops: list, scope: dict[str, Any]) -> Any:
        evaluated, wire = [], []  # per op: (kind, name or (args, kwargs)); its wire form
        for kind, item in ops:
            if kind == "attr":
                evaluated.append((kind, item))
                wire.append(["attr", item])
                continue
            args, kwargs = self._arguments(item, scope)
            evaluated.append((kind, (args, kwargs)))
            wire.append(["call", [encode(a) for a in args], [[k, encode(v)] for k, v in kwargs.items()]])
        key = json.dumps([root, wire])
        result = self.known.get(key)
        if result is None:
            self.requests.setdefault(key, CandidateCall(root, wire, key))
            raise Pending
        if not result.ok:
            raise Failed(f"{root}: {result.value}")
        value = fresh(result.value)
        if self.first_value is None:
            self.first_value = (value,)
        for kind, item in evaluated[result.done:]:  # the rest of the chain acts on plain data, here
            value = attribute(value, item) if kind == "attr" else self._apply(value, *item)
        return value

    def _arguments(self, call: ast.Call, scope: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        values = self._all([*call.args, *(k.value for k in call.keywords)], scope)
        args: list[Any] = []
        for node, value in zip(call.args, values):
            args.extend(value) if isinstance(node, ast.Starred) else args.append(value)
        kwargs: dict[str, Any] = {}
        for kw, value in zip(call.keywords, values[len(call.args):]):
            kwargs.update(value) if kw.arg is None else kwargs.__setitem__(kw.arg, value)
        return args, kwargs

    def _apply(self, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return call_allowed(func, args, kwargs, self._wrap)

    def _wrap(self, func: Any) -> Callable[..., Any]:
        return lambda *args: call_allowed(func, list(args), {}, self._wrap)

    # one method per supported node type (check_supported refused the rest)
    def _Constant(self, node: ast.Constant, scope: dict) -> Any:
        return node.value

    def _Name(self, node: ast.Name, scope: dict) -> Any:
        if node.id in scope:
            return scope[node.id]
        return NAMES[node.id]

    def _Starred(self, node: ast.Starred, scope: dict) -> Any:
        return list(self.eval(node.value, scope))

    def _Attribute(self, node: ast.Attribute, scope: dict) -> Any:
        if isinstance(node.value, ast.Name) and node.value.id in MODULES and node.value.id not in scope:
            return MODULES[node.value.id][node.attr]
        return attribute(self.eval(node.value, scope), node.attr)

    def _Call(self, node: ast.Call, scope: dict) -> Any:
        func, (args, kwargs) = self._all([node.func], scope)[0], self._arguments(node, scope)
        return self._apply(func, args, kwargs)

    def _BinOp(self, node: ast.BinOp, scope: dict) -> Any:
        left, right = self._all([node.left, node.right], scope)
        return binary(type(node.op).__name__, left, right)

    def _UnaryOp(self, node: ast.UnaryOp, scope: dict) -> Any:
        return check_size(UNARY[type(node.op).__name__](self.eval(node.operand, scope)))

    def _BoolOp(self, node: ast.BoolOp, scope: dict) -> Any:
        if self.collect:
            self._all(node.values, scope)
        value = None
        for child in node.values:  # short-circuit as Python does
            value = self.eval(child, scope)
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def _Compare(self, node: ast.Compare, scope: dict) -> bool:
        if self.collect:
            self._all([node.left, *node.comparators], scope)
        left = self.eval(node.left, scope)
        for op, comparator in zip(node.ops, node.comparators):
            right = self.eval(comparator, scope)
            if not compare(type(op).__name__, left, right):
                return False
            left = right
        return True

    def _IfExp(self, node: ast.IfExp, scope: dict) -> Any:
        if self.collect:
            self._all([node.test, node.body, node.orelse], scope)
        return self.eval(node.body if self.eval(node.test, scope) else node.orelse, scope)

    def _Subscript(self, node: ast.Subscript, scope: dict) -> Any:
        value, index = self._all([node.value, node.slice], scope)
        return check_size(value[index])

    def _Slice(self, node: ast.Slice, scope: dict) -> slice:
        parts = [node.lower, node.upper, node.step]
        values = iter(self._all([p for p in parts if p is not None], scope))
        return slice(*(None if p is None else next(values) for p in parts))

    def _Tuple(self, node: ast.Tuple, scope: dict) -> tuple:
        return tuple(self._elements(node.elts, scope))

    def _List(self, node: ast.List, scope: dict) -> list:
        return self._elements(node.elts, scope)

    def _Set(self, node: ast.Set, scope: dict) -> set:
        return set(self._elements(node.elts, scope))

    def _Dict(self, node: ast.Dict, scope: dict) -> dict:
        keys = self._all([k for k in node.keys if k is not None], scope)
        values, out, key_iter = self._all(node.values, scope), {}, iter(keys)
        for key, value in zip(node.keys, values):
            out.update(value) if key is None else out.__setitem__(next(key_iter), value)
        return check_size(out)

    def _elements(self, elts: list[ast.expr], scope: dict) -> list:
        out: list = []
        for node, value in zip(elts, self._all(elts, scope)):
            out.extend(value) if isinstance(node, ast.Starred) else out.append(value)
        return check_size(out)

    def _ListComp(self, node: ast.ListComp, scope: dict) -> list:
        return check_size(list(self._generate(lambda s: self.eval(node.elt, s), node.generators, scope)))

    def _SetComp(self, node: ast.SetComp, scope: dict) -> set:
        return check_size(set(self._generate(lambda s: self.eval(node.elt, s), node.generators, scope)))

    def _DictComp(self, node: ast.DictComp, scope: dict) -> dict:
        pairs = self._generate(lambda s: (self.eval(node.key, s), self.eval(node.value, s)), node.generators, scope)
        return check_size(dict(pairs))

    def _GeneratorExp(self, node: ast.GeneratorExp, scope: dict) -> Iterator:
        items = self._generate(lambda s: self.eval(node.elt, s), node.generators, scope)
        return iter(list(items)) if self.collect else items  # lazy in Python's semantics: any() stops early

    def _generate(self, element: Callable[[dict], Any], generators: list[ast.comprehension],
                  scope: dict) -> Iterator:
        if self.collect:
            return iter(self._collect_all(element, generators, scope))
        return self._lazy(element, generators, scope)

    def _lazy(self, element: Callable[[dict], Any], generators: list, scope: dict) -> Iterator:
        if not generators:
            yield element(scope)
            return
        comp = generators[0]
        for item in self.eval(comp.iter, scope):
            inner = dict(scope)
            _bind(comp.target, item, inner)
            if all(self.eval(cond, inner) for cond in comp.ifs):
                yield from self._lazy(element, generators[1:], inner)

    def _collect_all(self, element: Callable[[dict], Any], generators: list, scope: dict) -> list:
        """Every element that can be computed; Pending at the end if any could not (collect mode)."""
        out, unknown = [], False
        if not generators:
            return [element(scope)]
        comp = generators[0]
        for item in self.eval(comp.iter, scope):  # an unknown iterable: Pending, nothing to walk
            inner = dict(scope)
            _bind(comp.target, item, inner)
            try:
                keep = all(self._all(comp.ifs, inner))
            except Exception:
                keep, unknown = True, True  # walk the element anyway, to gather its calls
            try:
                out.extend(self._collect_all(element, generators[1:], inner) if keep else [])
            except Exception:
                unknown = True
        if unknown:
            raise Pending
        return out


def _bind(target: ast.expr, value: Any, scope: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
        return
    items = list(value)
    if len(items) != len(target.elts):
        raise ValueError(f"cannot unpack {len(items)} values into {len(target.elts)} names")
    for sub, item in zip(target.elts, items):
        _bind(sub, item, scope)
