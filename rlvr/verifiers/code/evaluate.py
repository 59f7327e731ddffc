"""Judge asserts in the parent; the sandbox only resolves the candidate's own calls.

An assert such as `assert abs(hyp(3, 4) - 5.0) < 1e-9` is split by *name*: `hyp` is the candidate's (any name
that is not an allow-listed builtin, `math`, a comprehension variable, an unsupported builtin or a known
library), everything else is the parent's (code/values). A candidate *call chain* (`hyp(3, 4)`,
`Stack().push(1).pop()`, `candidate(xs)`) is sent to the sandbox with arguments the parent computed and comes
back as a plain value; `abs`, `-`, `<` and `1e-9` are then evaluated here, where the candidate's namespace,
builtins and modules do not exist. Each call is resolved when Python's own evaluation reaches it, through a live
sandbox session (code/session.py), so the candidate sees its calls in the order the asserts make them, and a
branch Python does not take makes no call (before, calls ran in rounds, batched by nesting depth, which
reordered them for functions that keep state). Forms the parent cannot evaluate are refused when the reference is
read (code/forms.check_supported, naming the form): the sample is unscorable, never a pass decided in the sandbox.
"""
from __future__ import annotations

import ast
from typing import Any, Callable, Iterator

from rlvr.verifiers.code.budget import check
from rlvr.verifiers.code.chains import (
    MISSING,
    CallResult,
    CandidateCall,
    ChainEvaluation,
    Resolve,
    candidate_chain,
    is_candidate_name,
)
from rlvr.verifiers.code.methods import attribute, call_allowed
from rlvr.verifiers.code.values import MODULES, NAMES, Failed, binary, check_size, compare, hash_bound, unary

__all__ = ["MISSING", "BadReference", "CallResult", "CandidateCall", "Evaluator", "Resolve", "candidate_chain",
           "is_candidate_name"]

MAX_STEPS = 500_000  # expression nodes evaluated per assert (comprehensions over big ranges)


class BadReference(ValueError):
    """The reference tests cannot be read or evaluated safely: the sample is unscorable."""


# ---------------------------------------------------------------- evaluation
class Evaluator(ChainEvaluation):
    """Evaluates one assert's expression on plain data with Python's semantics; each candidate call is resolved
    by `resolve` when the evaluation reaches it (each evaluation of a call site is its own call: no dedup), its
    chain in Python's order (code/chains.py)."""

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
            return self._candidate(*chain, scope)
        return getattr(self, "_" + type(node).__name__)(node, scope)

    def _all(self, nodes: list[ast.expr], scope: dict[str, Any]) -> list[Any]:
        return [self.eval(n, scope) for n in nodes]

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
        """Key, then its value, pair by pair, as Python evaluates a display (all keys went first)."""
        out: dict = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                out.update(self.eval(value, scope))
            else:
                k = self.eval(key, scope)
                out[k] = self.eval(value, scope)
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


def _bind(target: ast.expr, value: Any, scope: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
        return
    items = list(value)
    if len(items) != len(target.elts):
        raise ValueError(f"cannot unpack {len(items)} values into {len(target.elts)} names")
    for sub, item in zip(target.elts, items):
        _bind(sub, item, scope)
