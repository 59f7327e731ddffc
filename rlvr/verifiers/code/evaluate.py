"""Judge asserts in the parent; the sandbox only resolves the candidate's own calls (issue #8).

An assert such as `assert abs(hyp(3, 4) - 5.0) < 1e-9` is split by *name*: `hyp` is the candidate's (any name
that is not an allow-listed builtin, `math`, a comprehension variable, an unsupported builtin or a known
library), everything else is the parent's (code/values). A candidate *call chain* (`hyp(3, 4)`,
`Stack().push(1).pop()`, `candidate(xs)`) is sent to the sandbox with arguments the parent computed and comes
back as a plain value; `abs`, `-`, `<` and `1e-9` are then evaluated here, where the candidate's namespace,
builtins and modules do not exist. Each call is resolved when Python's own evaluation reaches it, through a live
sandbox session (code/session.py), so the candidate sees its calls in the order the asserts make them, and a
branch Python does not take makes no call (issue 43: before, calls ran in rounds, batched by nesting depth, which
reordered them for functions that keep state). Forms the parent cannot evaluate are refused when the reference is
read (code/forms.check_supported, naming the form): the sample is unscorable, never a pass decided in the sandbox.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from rlvr.verifiers.code.budget import check
from rlvr.verifiers.code.values import (
    LIBRARIES,
    MODULES,
    NAMES,
    UNSUPPORTED_BUILTINS,
    Failed,
    attribute,
    binary,
    call_allowed,
    check_size,
    compare,
    hash_bound,
    unary,
)
from rlvr.verifiers.code.wire import encode, fresh

MAX_STEPS = 500_000  # expression nodes evaluated per assert (comprehensions over big ranges)
MISSING = "no result (the program exited, hung or was killed before this call)"


class BadReference(ValueError):
    """The reference tests cannot be read or evaluated safely: the sample is unscorable."""


@dataclass(frozen=True)
class CandidateCall:
    """One request to the sandbox: start at the candidate's name `root`, apply `ops` while the value is not plain
    data. ops: ["attr", name] | ["call", [wire args], [[name, wire value], ...]]."""

    root: str
    ops: list


@dataclass(frozen=True)
class CallResult:
    ok: bool
    value: Any  # the decoded plain value, or why the call failed
    done: int = 0  # ops the sandbox applied; the parent applies the rest (methods on plain data)
    raised: str = ""  # the candidate raised: the first built-in class of its exception (a check program re-raises it)


Resolve = Callable[[CandidateCall], CallResult]  # one call answered by the sandbox, in order (code/session.py)


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


# ---------------------------------------------------------------- evaluation
class Evaluator:
    """Evaluates one assert's expression on plain data with Python's semantics; each candidate call is resolved
    by `resolve` when the evaluation reaches it (each evaluation of a call site is its own call: no dedup)."""

    def __init__(self, resolve: Resolve, entry: str | None, rel_tol: float | None = None):
        self.resolve, self.entry, self.rel_tol = resolve, entry, rel_tol
        self.steps, self.first_value = 0, None

    def eval(self, node: ast.expr, scope: dict[str, Any]) -> Any:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Failed(f"the assert took more than {MAX_STEPS} evaluation steps")
        if self.steps % 8 == 0:  # a clock read costs about a quarter of a step
            check()
        chain = candidate_chain(node, scope.keys(), self.entry)
        if chain is not None:
            return self._candidate(*chain, scope, node)
        return getattr(self, "_" + type(node).__name__)(node, scope)

    def _all(self, nodes: list[ast.expr], scope: dict[str, Any]) -> list[Any]:
        return [self.eval(n, scope) for n in nodes]

    def _candidate(self, root: str, ops: list, scope: dict[str, Any], node: ast.expr | None = None) -> Any:
        evaluated, wire = self._chain(root, ops, scope)
        result = self.resolve(CandidateCall(root, wire))
        if not result.ok:
            raise Failed(f"{root}: {result.value}")
        value = fresh(result.value)
        if self.first_value is None:
            self.first_value = (value,)
        for kind, item in evaluated[result.done:]:  # the rest of the chain acts on plain data, here
            value = attribute(value, item) if kind == "attr" else self._apply(value, *self._resolve(item, scope))
        return value

    def _chain(self, root: str, ops: list, scope: dict[str, Any]) -> tuple[list, list]:
        """(per op: ("attr", name) | ("call", (args, kwargs)); the wire form). An argument that is itself a
        candidate chain (`f(g(3))`, `to_list(reverse(xs))`) travels whole, so the sandbox passes the inner
        value on as it is (objects and state included); here it stays a _Deferred node."""
        evaluated, wire = [], []
        for kind, item in ops:
            if kind == "attr":
                evaluated.append((kind, item))
                wire.append(["attr", item])
                continue
            nodes = [*item.args, *(k.value for k in item.keywords)]
            spread = [isinstance(n, ast.Starred) for n in item.args] + [k.arg is None for k in item.keywords]
            direct = [None if s else candidate_chain(n, scope.keys(), self.entry) for n, s in zip(nodes, spread)]
            values = self._all([n for n, d in zip(nodes, direct) if d is None], scope)
            values_iter, py, sent = iter(values), [], []
            for n, d in zip(nodes, direct):
                if d is None:
                    value = next(values_iter)
                    py.append(value)
                    sent.append([encode(v) for v in value] if isinstance(n, ast.Starred) else encode(value))
                else:
                    py.append(_Deferred(n))
                    sent.append({"call": {"root": d[0], "ops": self._chain(*d, scope)[1]}})
            positional, keywords = len(item.args), item.keywords
            args, kwargs, wire_args = [], {}, []
            for n, value, w in zip(item.args, py, sent):
                args.extend(value) if isinstance(n, ast.Starred) else args.append(value)
                wire_args.extend(w) if isinstance(n, ast.Starred) else wire_args.append(w)
            wire_kwargs = []
            for kw, value, w in zip(keywords, py[positional:], sent[positional:]):
                if kw.arg is None:
                    kwargs.update(value)
                    wire_kwargs.extend([k, encode(v)] for k, v in value.items())
                else:
                    kwargs[kw.arg] = value
                    wire_kwargs.append([kw.arg, w])
            evaluated.append((kind, (args, kwargs)))
            wire.append(["call", wire_args, wire_kwargs])
        return evaluated, wire

    def _resolve(self, item: tuple[list, dict], scope: dict[str, Any]) -> tuple[list, dict]:
        """A call's arguments for the parent: deferred candidate chains evaluated now (another request)."""
        args, kwargs = item
        value = lambda v: self.eval(v.node, scope) if isinstance(v, _Deferred) else v  # noqa: E731
        return [value(a) for a in args], {k: value(v) for k, v in kwargs.items()}

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
        return unary(type(node.op).__name__, self.eval(node.operand, scope))

    def _operands(self, nodes: list[ast.expr], scope: dict) -> Callable[[int], Any]:
        """Operand i of a short-circuiting form, evaluated when (and only if) Python evaluates it."""
        return lambda i: self.eval(nodes[i], scope)

    def _BoolOp(self, node: ast.BoolOp, scope: dict) -> Any:
        operand, value = self._operands(node.values, scope), None
        for i in range(len(node.values)):  # short-circuit as Python does
            value = operand(i)
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def _Compare(self, node: ast.Compare, scope: dict) -> bool:
        operand = self._operands([node.left, *node.comparators], scope)
        left = operand(0)
        for i, op in enumerate(node.ops, 1):
            right = operand(i)
            if not compare(type(op).__name__, left, right, self.rel_tol):
                return False
            left = right
        return True

    def _IfExp(self, node: ast.IfExp, scope: dict) -> Any:
        operand = self._operands([node.test, node.body, node.orelse], scope)
        return operand(1) if operand(0) else operand(2)

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
        return set(hash_bound(self._elements(node.elts, scope)))

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
        return check_size(set(hash_bound(self._generate(lambda s: self.eval(node.elt, s), node.generators, scope))))

    def _DictComp(self, node: ast.DictComp, scope: dict) -> dict:
        pairs = list(self._generate(lambda s: (self.eval(node.key, s), self.eval(node.value, s)), node.generators,
                                    scope))
        hash_bound(key for key, _ in pairs)
        return check_size(dict(pairs))

    def _GeneratorExp(self, node: ast.GeneratorExp, scope: dict) -> Iterator:
        """Lazy, so any() stops early; its first iterable is evaluated now, as Python does (the order of calls)."""
        first = iter(self.eval(node.generators[0].iter, scope))
        return self._generate(lambda s: self.eval(node.elt, s), node.generators, scope, first)

    def _generate(self, element: Callable[[dict], Any], generators: list, scope: dict,
                  first: Iterator | None = None) -> Iterator:
        if not generators:
            yield element(scope)
            return
        comp = generators[0]
        for item in self.eval(comp.iter, scope) if first is None else first:
            inner = dict(scope)
            _bind(comp.target, item, inner)
            if all(self.eval(cond, inner) for cond in comp.ifs):
                yield from self._generate(element, generators[1:], inner)


class _Deferred:
    """An argument that is a candidate chain sent whole inside another call; evaluated here only if the parent
    itself needs it (a method applied to a plain result: `f(x).count(g(y))`)."""

    def __init__(self, node: ast.expr):
        self.node = node


def _bind(target: ast.expr, value: Any, scope: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
        return
    items = list(value)
    if len(items) != len(target.elts):
        raise ValueError(f"cannot unpack {len(items)} values into {len(target.elts)} names")
    for sub, item in zip(target.elts, items):
        _bind(sub, item, scope)
