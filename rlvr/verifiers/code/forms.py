"""Which assert forms the parent evaluates: checked when the reference is read.

A form outside this set makes the reference unscorable with a detail naming the form, so a pass is never
decided in the sandbox. docs/verifiers.md, "Assert forms the code verifier evaluates", lists the same set.

Each candidate name is also recorded as *tested* (in the first operand of a comparison that has one, or outside
comparisons) or *expected* (in a later operand: `Fraction` in `f(3) == Fraction(1, 3)`). Without an "entry",
parse_reference refuses a name that is only ever expected: the candidate could define it to match.
"""
from __future__ import annotations

import ast

from rlvr.verifiers.code.evaluate import BadReference, candidate_chain
from rlvr.verifiers.code.methods import METHOD_NAMES
from rlvr.verifiers.code.values import BINARY, LIBRARIES, MODULES, NAMES, UNARY, UNSUPPORTED_BUILTINS

_COMPARE_OPS = {"Eq", "NotEq", "Lt", "LtE", "Gt", "GtE", "Is", "IsNot", "In", "NotIn"}


def check_supported(test: ast.expr, source: str, entry: str | None) -> tuple[frozenset[str], frozenset[str]]:
    """(tested names, expected names) of `test`'s candidate calls; both empty when `test` never calls the candidate
    (a test of constants, such as HumanEval's `assert True, "..."`: the caller ignores it). Raises
    BadReference naming the first form the parent cannot evaluate."""
    checker = _Checker(entry)
    try:
        checker.visit(test, frozenset())
    except _Unsupported as err:
        raise BadReference(f"{source[:80]!r} uses {err}, which rlvr does not evaluate (docs/verifiers.md: assert "
                           "forms); the sample is unscorable") from None
    return (frozenset(root for root, expected in checker.roots if not expected),
            frozenset(root for root, expected in checker.roots if expected))


class _Unsupported(Exception):
    pass


_SIMPLE = (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.BoolOp, ast.IfExp, ast.Subscript, ast.Slice,
           ast.Starred)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class _Checker:
    def __init__(self, entry: str | None):
        self.entry, self.expected = entry, False  # expected: visiting an operand after the tested one
        self.roots: list[tuple[str, bool]] = []  # (candidate name, on the expected side?)

    def visit(self, node: ast.AST | None, bound: frozenset[str]) -> None:
        if node is None:
            return
        chain = candidate_chain(node, bound, self.entry) if isinstance(node, (ast.expr,)) else None
        if chain is not None:
            self._candidate_root(*chain)
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
            if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                    and isinstance(node.left.value, (str, bytes)):
                raise _Unsupported("%-formatting")
            self._children([node.left, node.right], bound)
        elif isinstance(node, ast.UnaryOp) and type(node.op).__name__ in UNARY:
            self.visit(node.operand, bound)
        elif isinstance(node, ast.Compare) and all(type(op).__name__ in _COMPARE_OPS for op in node.ops):
            self._compare(node, bound)
        elif isinstance(node, ast.keyword):
            self.visit(node.value, bound)
        elif isinstance(node, _COMPREHENSIONS):
            self._comprehension(node, bound)
        elif isinstance(node, _SIMPLE):
            self._children([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)], bound)
        else:
            raise _Unsupported(_FORM_NAMES.get(type(node).__name__, f"the form {type(node).__name__}"))

    def _candidate_root(self, root: str, ops: list) -> None:
        if not ops:
            raise _Unsupported(f"the candidate's {root!r} as a value (only calls of its functions are evaluated)")
        if self.entry is not None and root not in (self.entry, "candidate"):
            # With an entry, any other name would be looked up in the candidate's namespace: a helper the test
            # trusts (HumanEval/32's poly) would then be the candidate's own.
            raise _Unsupported(f"the name {root!r}, which is neither the entry {self.entry!r} nor a builtin rlvr "
                               "evaluates (a helper the test trusts would be the candidate's own)")
        self.roots.append((root, self.expected))

    def _compare(self, node: ast.Compare, bound: frozenset[str]) -> None:
        """The first operand holding a candidate call is the tested one; every later operand is expected."""
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:]):
            safe = _identity_safe(left, bound) or _identity_safe(right, bound)
            if isinstance(op, (ast.Is, ast.IsNot)) and not safe:
                raise _Unsupported("`is` between two values (results cross the sandbox as copies, so identity is "
                                   "not kept; use ==, or `is` with None/True/False or a type)")
        outer, tested = self.expected, False
        for operand in operands:
            before = len(self.roots)
            self.expected = outer or tested
            self.visit(operand, bound)
            tested = tested or len(self.roots) > before
        self.expected = outer

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


def _identity_safe(node: ast.expr, bound: frozenset[str]) -> bool:
    """None/True/False/Ellipsis, a builtin type or `type(x)`: objects whose identity the parent's copy keeps."""
    if isinstance(node, ast.Constant):
        return node.value is None or node.value is True or node.value is False or node.value is Ellipsis
    if isinstance(node, ast.Name):
        return node.id not in bound and isinstance(NAMES.get(node.id), type)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type" \
        and "type" not in bound


def _target_names(target: ast.expr) -> frozenset[str]:
    if isinstance(target, ast.Name):
        return frozenset([target.id])
    if isinstance(target, (ast.Tuple, ast.List)):
        return frozenset().union(*(_target_names(t) for t in target.elts))
    raise _Unsupported("a comprehension target other than names")
