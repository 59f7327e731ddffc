"""The problems of the code environment: small Python functions `f` from templates with varied
constants, each with visible tests (shown to the model, run by the `run_tests` tool) and hidden tests (only in
Prompt.reference, for the "code" verifier that scores the final answer).

A problem is a template ("add", "returns x plus {k}") and a constant k; its identity is "<template> <k>" (e.g.
"add 7"). Expected values come from the template's own reference function, run here on our own inputs: this is
our code, never the model's (model code runs only in the sandbox, rlvr/tasks/envs/code.py). Tests are written as
asserts on literals (`assert f(10) == 17`), the form the code verifier judges in the parent
(rlvr/verifiers/code/reference.py), so the reference is {"asserts": [...hidden...], "entry": "f"}.

Split as every enumerated task (rlvr.tasks.base.split_by_hash): ranking every problem by the sha256 of its identity
gives an order that depends on nothing else; the first max(200, n // 5) are held out, the rest train. The one-shot
example ("add 3") is in neither split, nor is the second ("sum 1", whose first code fails a visible test).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from rlvr.tasks.base import split_by_hash

VISIBLE_TESTS = 2  # the first inputs of a problem; the rest are hidden
ENTRY = "f"  # every problem asks for `f`: one name less for a 135M model to get wrong
EXAMPLE_CANONICAL = "add 3"
SECOND_EXAMPLE_CANONICAL = "sum 1"  # k = 1 is outside the sum template's constants: in no split either

_INTS = lambda k: [1, 10, 0, 7, 25, 100]  # noqa: E731 - inputs of most integer templates
_AROUND = lambda k: [k + 1, k, 2 * k, 0, k - 1, 3 * k + 1]  # noqa: E731 - both answers of a yes/no template
_LISTS = lambda k: [[1, 2, 3], [], [5], [10, 0, 7], [k, k + 1, 2], [4, 4, 4, 4]]  # noqa: E731
_STRINGS = lambda k: ["ab", "hello", "", "x", "python", "code agent"]  # noqa: E731


@dataclass(frozen=True)
class Template:
    key: str
    arg: str  # the parameter's name, as the question says it
    text: str  # what f returns, with {k}
    solve: Callable[[Any, int], Any]  # the reference: (input, k) -> expected value
    inputs: Callable[[int], list[Any]]  # the problem's inputs for k; the first VISIBLE_TESTS are visible
    constants: range


_NUMBERS, _SMALL = range(2, 50), range(1, 13)
TEMPLATES = (
    Template("add", "x", "x plus {k}", lambda x, k: x + k, _INTS, _NUMBERS),
    Template("sub", "x", "x minus {k}", lambda x, k: x - k, _INTS, _NUMBERS),
    Template("mul", "x", "x times {k}", lambda x, k: x * k, _INTS, _NUMBERS),
    Template("mod", "x", "the remainder of x divided by {k} (x % {k})", lambda x, k: x % k, _INTS, _NUMBERS),
    Template("div", "x", "x divided by {k}, rounded down (x // {k})", lambda x, k: x // k, _INTS, _NUMBERS),
    Template("square", "x", "x * x + {k}", lambda x, k: x * x + k, _INTS, _NUMBERS),
    Template("max", "x", "the larger of x and {k}", lambda x, k: max(x, k), _AROUND, _NUMBERS),
    Template("min", "x", "the smaller of x and {k}", lambda x, k: min(x, k), _AROUND, _NUMBERS),
    Template("dist", "x", "the distance between x and {k}, abs(x - {k})", lambda x, k: abs(x - k), _INTS, _NUMBERS),
    Template("divisible", "x", "True if x is divisible by {k}, else False", lambda x, k: x % k == 0, _AROUND,
             _NUMBERS),
    Template("greater", "x", "True if x is greater than {k}, else False", lambda x, k: x > k, _AROUND, _NUMBERS),
    Template("sum", "xs", "the sum of the list xs plus {k}", lambda xs, k: sum(xs) + k, _LISTS, _NUMBERS),
    Template("count", "xs", "how many items of the list xs are greater than {k}",
             lambda xs, k: sum(1 for x in xs if x > k), _LISTS, range(0, 12)),
    Template("scale", "xs", "a new list: every item of xs times {k}", lambda xs, k: [x * k for x in xs], _LISTS,
             _NUMBERS),
    Template("shift", "xs", "a new list: {k} added to every item of xs", lambda xs, k: [x + k for x in xs], _LISTS,
             _NUMBERS),
    Template("repeat", "s", "the string s repeated {k} times", lambda s, k: s * k, _STRINGS, _SMALL),
    Template("prefix", "s", "the first {k} characters of the string s", lambda s, k: s[:k], _STRINGS, _SMALL),
    Template("bang", "s", "s followed by {k} '!' characters", lambda s, k: s + "!" * k, _STRINGS, _SMALL),
)


@dataclass(frozen=True)
class Problem:
    canonical: str  # "add 7": the identity hashed for the split and shown in Prompt.id
    template: str
    question: str  # "Write a Python function f(x) that returns x plus 7."
    visible: tuple[str, ...]  # asserts shown to the model and run by run_tests
    hidden: tuple[str, ...]  # asserts only the final answer's verifier runs

    def reference(self) -> str:
        """Prompt.reference in the code verifier's form (rlvr/verifiers/code/verifier.py): the hidden tests."""
        return json.dumps({"asserts": list(self.hidden), "entry": ENTRY})


def make_problem(template: Template, k: int) -> Problem:
    tests = tuple(f"assert {ENTRY}({x!r}) == {template.solve(x, k)!r}" for x in template.inputs(k))
    question = f"Write a Python function {ENTRY}({template.arg}) that returns {template.text.format(k=k)}."
    return Problem(f"{template.key} {k}", template.key, question, tests[:VISIBLE_TESTS], tests[VISIBLE_TESTS:])


@lru_cache(maxsize=1)
def splits() -> tuple[tuple[Problem, ...], tuple[Problem, ...]]:
    """(train, held_out); held_out in its fixed evaluation order."""
    problems = [make_problem(t, k) for t in TEMPLATES for k in t.constants]
    return split_by_hash([p for p in problems if p.canonical != EXAMPLE_CANONICAL], lambda p: p.canonical)


def example() -> Problem:
    """The one-shot example's problem (in no split)."""
    return make_problem(TEMPLATES[0], int(EXAMPLE_CANONICAL.split()[1]))


def second_example() -> Problem:
    """The second worked example's problem (in no split): a list problem whose first try fails a visible test."""
    key, k = SECOND_EXAMPLE_CANONICAL.split()
    return make_problem(next(t for t in TEMPLATES if t.key == key), int(k))
