"""The mutation operators bench/mutate_change.py applies: cosmic-ray's own, trimmed to one or two
replacements a site, plus four of ours written against cosmic-ray's Operator interface (parso trees).

Why trimmed: cosmic-ray replaces each binary operator by all eleven others and each comparison by all seven
others. Most of those are killed by the same test as the nearest one, and each costs a test run (seconds on this
machine), so a site gets the replacements a careless edit would make: `+` -> `-`, `<` -> `<=` (the boundary) and
`<` -> `>=` (the negation). Why four more: cosmic-ray has no `in` / `not in` swap, no statement deletion, no
`return None` and no dropped keyword argument, and those are the slips the issue's reviewers found (a setting that
never reaches its consumer, a guard that never raises, a record that is never appended).
"""
from __future__ import annotations

from typing import Iterator

import parso.python.tree as tree
from cosmic_ray.exceptions import CosmicRayTestingException
from cosmic_ray.operators.exception_replacer import ExceptionReplacer
from cosmic_ray.operators.operator import Example, Operator
from cosmic_ray.plugins import get_operator

_BINARY = {"Add": ["Sub"], "Sub": ["Add"], "Mul": ["Div"], "Div": ["Mul"], "FloorDiv": ["Mul"], "Mod": ["FloorDiv"],
           "Pow": ["Mul"], "BitOr": ["BitAnd"], "BitAnd": ["BitOr"], "BitXor": ["BitAnd"], "LShift": ["RShift"],
           "RShift": ["LShift"]}
_COMPARISON = {"Eq": ["NotEq"], "NotEq": ["Eq"], "Lt": ["LtE", "GtE"], "LtE": ["Lt", "Gt"], "Gt": ["GtE", "LtE"],
               "GtE": ["Gt", "Lt"], "Is": ["IsNot"], "IsNot": ["Is"]}
_PLAIN = ["ReplaceUnaryOperator_USub_UAdd", "ReplaceUnaryOperator_Delete_Not", "AddNot", "ReplaceTrueWithFalse",
          "ReplaceFalseWithTrue", "ReplaceAndWithOr", "ReplaceOrWithAnd", "ReplaceBreakWithContinue",
          "ReplaceContinueWithBreak", "ExceptionReplacer", "NumberReplacer", "ZeroIterationForLoop", "RemoveDecorator"]


def _calls(node) -> bool:
    """A bare call statement (`x.append(y)`, `check(z)`): the last trailer of an atom_expr is `(...)`."""
    return node.type == "atom_expr" and node.children[-1].type == "trailer" and node.children[-1].children[0] == "("


class ReplaceInWithNotIn(Operator):
    """`a in b` -> `a not in b` (a membership test that passes what it should refuse)."""

    def mutation_positions(self, node):
        if isinstance(node, tree.Keyword) and node.value == "in" and node.parent.type == "comparison":
            yield node.start_pos, node.end_pos

    def mutate(self, node, index):
        node.value = "not in"
        return node

    @classmethod
    def examples(cls):
        return (Example("x = a in b", "x = a not in b"),)


class ReplaceNotInWithIn(Operator):
    """`a not in b` -> `a in b`."""

    def mutation_positions(self, node):
        if node.type == "comp_op" and [c.value for c in node.children] == ["not", "in"]:
            yield node.start_pos, node.end_pos

    def mutate(self, node, index):
        return tree.Keyword("in", node.start_pos, prefix=node.children[0].prefix)

    @classmethod
    def examples(cls):
        return (Example("x = a not in b", "x = a in b"),)


class DeleteStatement(Operator):
    """A call statement, a `raise` or an augmented assignment becomes `pass`: the record never appended, the guard
    that never raises, the counter that never counts."""

    def mutation_positions(self, node):
        if node.type == "simple_stmt" and len(node.children) == 2:  # one statement and its newline
            statement = node.children[0]
            if _calls(statement) or statement.type == "raise_stmt" or (
                    statement.type == "expr_stmt" and statement.children[1].type == "operator"
                    and statement.children[1].value.endswith("=") and statement.children[1].value != "="):
                yield statement.start_pos, statement.end_pos

    def mutate(self, node, index):
        statement = node.children[0]
        node.children[0] = tree.Keyword("pass", statement.start_pos, prefix=statement.get_first_leaf().prefix)
        return node

    @classmethod
    def examples(cls):
        return (Example("def f():\n    g(1)\n", "def f():\n    pass\n"),
                Example("def f():\n    raise E\n", "def f():\n    pass\n"),
                Example("x += 1\n", "pass\n"))


class ReturnNone(Operator):
    """`return value` -> `return None`."""

    def mutation_positions(self, node):
        if node.type == "return_stmt" and len(node.children) == 2 and node.children[1].get_code().strip() != "None":
            yield node.children[1].start_pos, node.children[1].end_pos

    def mutate(self, node, index):
        node.children[1] = tree.Keyword("None", node.children[1].start_pos, prefix=" ")
        return node

    @classmethod
    def examples(cls):
        return (Example("def f():\n    return 3\n", "def f():\n    return None\n"),)


class DropKeywordArgument(Operator):
    """`f(a, key=value)` -> `f(a)`: the callee's default replaces what the caller passed (a setting that never
    reaches its consumer)."""

    def mutation_positions(self, node):
        for argument in self._arguments(node):
            yield argument.start_pos, argument.end_pos

    def mutate(self, node, index):
        argument = self._arguments(node)[index]
        holder = argument.parent
        if holder.type == "trailer":  # the only argument: f(key=value) -> f()
            holder.children.remove(argument)
            return node
        at = holder.children.index(argument)
        # drop the argument with the comma before it, or after it when it comes first
        del holder.children[at - 1 if at > 0 else at: at + 1 if at > 0 else at + 2]
        if holder.children and holder.children[0].type != "operator":
            holder.children[0].get_first_leaf().prefix = ""
        return node

    @staticmethod
    def _arguments(node) -> list:
        if node.type != "trailer" or node.children[0] != "(" or len(node.children) != 3:
            return []
        inner = node.children[1]
        candidates = inner.children if inner.type == "arglist" else [inner]
        return [a for a in candidates if a.type == "argument" and len(a.children) == 3 and a.children[1] == "="]

    @classmethod
    def examples(cls):
        return (Example("f(a, k=1)", "f(a)"), Example("f(k=1)", "f()"), Example("f(k=1, j=2)", "f(j=2)"))


class DottedExceptionReplacer(ExceptionReplacer):
    """cosmic-ray's ExceptionReplacer, also for dotted classes (`except json.JSONDecodeError`, or one inside a
    tuple): cosmic-ray's own assumes every listed class is a bare name and stops the whole listing with an
    AttributeError. A dotted class becomes the testing exception whole; bare names are numbered as before. Not
    covered: `except*` (parso 0.8 reads it as an error node, so its handlers get no exception mutant)."""

    def mutate(self, node, index):
        target = self._name_nodes(node)[index]
        if isinstance(target, tree.Name):
            return super().mutate(node, index)
        replacement = tree.Name(CosmicRayTestingException.__name__, target.start_pos,
                                  prefix=target.get_first_leaf().prefix)
        holder = target.parent
        holder.children[holder.children.index(target)] = replacement
        replacement.parent = holder
        return node

    @staticmethod
    def _name_nodes(node):
        listed = node.children[1]
        if listed.type == "atom" and listed.children[0] == "(":
            inner = listed.children[1]
            return inner.children[::2] if inner.type == "testlist_comp" else (inner,)
        return (listed,)

    @classmethod
    def examples(cls):
        return (Example("try: pass\nexcept json.JSONDecodeError: pass",
                        f"try: pass\nexcept {CosmicRayTestingException.__name__}: pass"),
                Example("try: pass\nexcept (OSError, json.JSONDecodeError): pass",
                        f"try: pass\nexcept (OSError, {CosmicRayTestingException.__name__}): pass", occurrence=1))


OURS = {op.__name__: op for op in (ReplaceInWithNotIn, ReplaceNotInWithIn, DeleteStatement, ReturnNone,
                                   DropKeywordArgument)}


def operator_names() -> list[str]:
    """The default set, in the order mutants are listed."""
    names = [f"core/ReplaceBinaryOperator_{a}_{b}" for a, bs in _BINARY.items() for b in bs]
    names += [f"core/ReplaceComparisonOperator_{a}_{b}" for a, bs in _COMPARISON.items() for b in bs]
    return names + [f"core/{name}" for name in _PLAIN] + [f"rlvr/{name}" for name in OURS]


def make(name: str) -> Operator:
    """An operator instance by its listed name (cosmic-ray's registry for core/, this module for rlvr/)."""
    family, _, short = name.partition("/")
    if name == "core/ExceptionReplacer":
        return DottedExceptionReplacer()
    return OURS[short]() if family == "rlvr" else get_operator(name)()


def positions(operator: Operator, module) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
    """Every (start, end) the operator can mutate, in the order cosmic-ray numbers its occurrences."""
    from cosmic_ray.ast import ast_nodes
    for node in ast_nodes(module):
        yield from operator.mutation_positions(node)
