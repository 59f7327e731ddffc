"""A candidate call chain of an assert, evaluated in Python's own order.

Python evaluates `f(a, g(b), c).m(d)` as: f's arguments left to right (g(b) is called when it is reached), then f,
then `.m`, then d, then m. Before, `f(g(1), 1 + h(2))` ran h before g (the parent evaluated its
arguments before it sent the chain) and `{nxt(): nxt(), ...}` all keys first. The parent now keeps Python's order
exactly while sending as few requests as it can:
  * an argument that is *quiet* (a constant, a name, a display of those, `-1`, or a candidate chain whose own
    arguments are quiet) neither raises nor calls anything the order could show: it is evaluated when the chain is
    built, and a quiet candidate chain travels nested, run by the sandbox as it decodes the call's arguments, in
    their order; so `f(g(3))` and `Stack().push(1).pop()` are still one request each;
  * before any other argument is evaluated here, what Python has already run is sent first: the chain up to this
    call (a *prefix*; the sandbox keeps its value unless it is plain data, which the parent then carries on with),
    and each candidate chain among the same call's earlier arguments (a *handle*: run now, kept in the sandbox,
    passed on by reference, `{"ref": n}`), so that value and object identity reach the call as in Python.
Once a value is plain data the parent applies the rest of the chain itself, one argument at a time, in order.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable

from rlvr.verifiers.code.budget import Failed
from rlvr.verifiers.code.methods import attribute
from rlvr.verifiers.code.stdtypes import kind
from rlvr.verifiers.code.values import LIBRARIES, MODULES, NAMES, UNSUPPORTED_BUILTINS
from rlvr.verifiers.code.wire import encode

MISSING = "no result (the program exited, hung or was killed before this call)"
PREFIX, HANDLE = "prefix", "handle"  # CandidateCall.keep: keep a value that is not plain data / keep it whatever


@dataclass(frozen=True)
class CandidateCall:
    """One request to the sandbox: start at the candidate's name `root` (or at the value request `ref` kept), apply
    `ops` while the value is not plain data. ops: ["attr", name] | ["call", [wire args], [[name, wire value], ...]].
    `keep`: "" (send the value back), PREFIX or HANDLE (code/harness_main.py's answer)."""

    root: str
    ops: list
    ref: int | None = None
    keep: str = ""


@dataclass(frozen=True)
class CallResult:
    ok: bool
    value: Any  # the decoded plain value, or why the call failed
    done: int = 0  # ops the sandbox applied; the parent applies the rest (methods on plain data)
    raised: str = ""  # the candidate raised: the first built-in class of its exception (a check program re-raises it)
    after: tuple = ()  # (op, argument position or keyword, value): a container argument the call changed
    kept: int | None = None  # the sandbox kept the value as this request's: pass it on as {"ref": kept}


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


def write_back(target: Any, new: Any) -> None:
    """Python's in-place change of a caller's argument, on the parent's own object (before, `a = [3, 1,
    2]; candidate(a); assert a == [1, 2, 3]` failed): its content becomes what the candidate left. Objects nested
    in it are replaced by the parent's copies of theirs (their identity is not kept)."""
    t = kind(target)
    if kind(new) is not t:
        raise Failed("the call changed the type of an argument")
    if t in (list, bytearray):
        target[:] = new
    elif hasattr(target, "appendleft"):  # a deque: its maxlen stays
        target.clear()
        target.extend(new)
    else:  # dict, OrderedDict, Counter, defaultdict, set: their own update keeps their own rules (order)
        target.clear()
        target.update(new)


def inert(node: ast.expr) -> bool:
    """Evaluating `node` here can neither raise nor call the candidate: a constant, a name, `-1`, a display of
    those (dict keys and set items constants, so hashing cannot fail)."""
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(inert(e) and not isinstance(e, ast.Starred) for e in node.elts)
    if isinstance(node, ast.Set):
        return all(isinstance(e, ast.Constant) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(isinstance(k, ast.Constant) for k in node.keys) and all(inert(v) for v in node.values)
    return False


class Handle:
    """A candidate chain's value kept in the sandbox (request `ref`), passed on to another call by reference."""

    def __init__(self, ref: int):
        self.ref = ref


class _Deferred:
    """An argument that is a quiet candidate chain sent whole inside another call; evaluated here only if the
    parent itself needs it (a method applied to a plain result: `f(x).count(g(y))`)."""

    def __init__(self, node: ast.expr):
        self.node = node


class ChainEvaluation:
    """The candidate chains of code/evaluate.Evaluator (module docstring): `eval`, `_apply` and `_arguments` are
    the Evaluator's."""

    resolve: Resolve
    entry: str | None
    first_value: tuple | None

    def eval(self, node: ast.expr, scope: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _apply(self, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _arguments(self, call: ast.Call, scope: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        raise NotImplementedError

    def _candidate(self, root: str, ops: list, scope: dict[str, Any], handle: bool = False) -> Any:
        """The chain's value (plain data), or with `handle` a Handle to it, kept in the sandbox."""
        root = self.entry if root == "candidate" and self.entry else root  # the entry, never a name of its own
        ref, wire, evaluated = None, [], []
        for index, (kind_, item) in enumerate(ops):
            if kind_ == "attr":
                wire.append(["attr", item])
                evaluated.append((kind_, item))
                continue
            if wire and not self._quiet_arguments(item, scope):  # run what Python has run before these arguments
                result = self._send(CandidateCall(root, wire, ref, HANDLE if handle else PREFIX), evaluated)
                if result.kept is None:  # plain data: the parent applies the rest
                    value = self._plain(result, evaluated, scope)
                    for kind_, item in ops[index:]:
                        value = attribute(value, item) if kind_ == "attr" else \
                            self._apply(value, *self._arguments(item, scope))
                    return value
                ref, wire, evaluated = result.kept, [], []
            arguments, wire_arguments = self._call_arguments(item, scope)
            wire.append(["call", *wire_arguments])
            evaluated.append((kind_, arguments))
        result = self._send(CandidateCall(root, wire, ref, HANDLE if handle else ""), evaluated)
        return Handle(result.kept) if handle else self._plain(result, evaluated, scope)

    def _send(self, call: CandidateCall, evaluated: list) -> CallResult:
        """One request; the arguments it changed are written back into the parent's objects, even if it raised."""
        result = self.resolve(call)
        for index, key, value in result.after:
            _, (args, kwargs) = evaluated[index]
            target = args[key] if type(key) is int else kwargs[key]
            if not isinstance(target, (Handle, _Deferred)):
                write_back(target, value)
        if not result.ok:
            raise Failed(f"{call.root}: {result.value}")
        return result

    def _plain(self, result: CallResult, evaluated: list, scope: dict[str, Any]) -> Any:
        """A result that is plain data, with the rest of its chain (ops the sandbox did not apply) applied here."""
        value = result.value
        if self.first_value is None:
            self.first_value = (value,)
        for kind_, item in evaluated[result.done:]:
            value = attribute(value, item) if kind_ == "attr" else self._apply(value, *self._resolve(item, scope))
        return value

    def _quiet(self, node: ast.expr, scope: dict[str, Any]) -> bool:
        """`node` can be evaluated when the chain is built (inert) or run by the sandbox when it decodes the call's
        arguments (a candidate chain whose own arguments are quiet): either way nobody can tell when."""
        chain = candidate_chain(node, scope.keys(), self.entry)
        if chain is None:
            return inert(node)
        return all(self._quiet_arguments(item, scope) for kind_, item in chain[1] if kind_ == "call")

    def _quiet_arguments(self, call: ast.Call, scope: dict[str, Any]) -> bool:
        return all(not isinstance(n, ast.Starred) and self._quiet(n, scope) for n in call.args) \
            and all(k.arg is not None and self._quiet(k.value, scope) for k in call.keywords)

    def _call_arguments(self, call: ast.Call, scope: dict[str, Any]) -> tuple[tuple[list, dict], tuple[list, list]]:
        """((args, kwargs) for the parent, (wire args, wire kwargs)), in Python's order: a candidate chain goes
        nested when it and every argument after it are quiet, else it runs now and is passed as a handle."""
        nodes = [*call.args, *(k.value for k in call.keywords)]
        spread = [isinstance(n, ast.Starred) for n in call.args] + [k.arg is None for k in call.keywords]
        quiet = [not s and self._quiet(n, scope) for n, s in zip(nodes, spread)]
        values, sent = [], []
        for i, (node, star) in enumerate(zip(nodes, spread)):
            chain = None if star else candidate_chain(node, scope.keys(), self.entry)
            if chain is not None and all(quiet[i:]):
                values.append(_Deferred(node))
                sent.append({"call": self._nested(*chain, scope)})
            elif chain is not None:
                values.append(self._candidate(*chain, scope, handle=True))
                sent.append({"ref": values[-1].ref})
            else:
                values.append(self.eval(node, scope))
                sent.append([encode(v) for v in values[-1]] if i < len(call.args) and star else
                            [[k, encode(v)] for k, v in values[-1].items()] if star else encode(values[-1]))
        args, kwargs, wire_args, wire_kwargs = [], {}, [], []
        for node, value, wire in zip(call.args, values, sent):
            args.extend(value) if isinstance(node, ast.Starred) else args.append(value)
            wire_args.extend(wire) if isinstance(node, ast.Starred) else wire_args.append(wire)
        for keyword, value, wire in zip(call.keywords, values[len(call.args):], sent[len(call.args):]):
            kwargs.update(value) if keyword.arg is None else kwargs.__setitem__(keyword.arg, value)
            wire_kwargs.extend(wire) if keyword.arg is None else wire_kwargs.append([keyword.arg, wire])
        return (args, kwargs), (wire_args, wire_kwargs)

    def _nested(self, root: str, ops: list, scope: dict[str, Any]) -> dict:
        """The wire form of a quiet candidate chain, run by the sandbox where it stands."""
        wire = [["attr", item] if kind_ == "attr" else ["call", *self._call_arguments(item, scope)[1]]
                for kind_, item in ops]
        return {"root": self.entry if root == "candidate" and self.entry else root, "ops": wire}

    def _resolve(self, item: tuple[list, dict], scope: dict[str, Any]) -> tuple[list, dict]:
        """A call's arguments for the parent: deferred candidate chains evaluated now (another request)."""
        def value(v: Any) -> Any:
            if isinstance(v, Handle):
                raise Failed("a value kept in the sandbox is not plain data the parent can use")
            return self.eval(v.node, scope) if isinstance(v, _Deferred) else v
        args, kwargs = item
        return [value(a) for a in args], {k: value(v) for k, v in kwargs.items()}
