"""Mutation follow-up (survivors-i): a candidate's exception message keeps its own ': ' when rebuilt
for a check program (check_program._rebuilt); the evaluator's step bound counts from the first node
(evaluate.Evaluator); an unreadable harness line is a Desync (harness.read_start); replace()'s bound reads the old
substring, not the count (methods.BoundMethod); only map/filter get a wrapped function and keep all their iterables
(methods.call_allowed); a default factory spec is exactly ["=", value] (stdtypes.factory); factorial's bound is on
int arguments only (values._arg_bound)."""
from __future__ import annotations

import ast

import pytest

from code_judging import judge_function as judge
from code_judging import program, run_program
from rlvr.verifiers.code import evaluate
from rlvr.verifiers.code.budget import Budget, Failed
from rlvr.verifiers.code.evaluate import Evaluator
from rlvr.verifiers.code.harness import Desync, read_start
from rlvr.verifiers.code.methods import attribute
from rlvr.verifiers.code.stdtypes import factory


def check(body: str, function) -> tuple[bool, str]:
    return run_program(program(body), function)


# ---------------------------------------------------------------- check_program._rebuilt
def test_a_caught_exception_keeps_every_colon_of_its_message():
    # the wire value is "raised ValueError: a: b: c"; only the first ": " ends the prefix, so str(e) is "a: b: c"
    def f(x):
        raise ValueError("a: b: c")
    body = "try:\n    candidate(1)\nexcept ValueError as e:\n    assert str(e) == 'a: b: c', str(e)\n"
    assert check(body, f) == (True, "")


# ---------------------------------------------------------------- evaluate.Evaluator
def test_the_step_bound_counts_the_first_node(monkeypatch):
    # `1 + 2` is three nodes (BinOp, two Constants): three steps, so a bound of 2 refuses it and 3 allows it
    monkeypatch.setattr(evaluate, "MAX_STEPS", 2)
    node = ast.parse("1 + 2", mode="eval").body
    with Budget(10.0):
        with pytest.raises(Failed, match="more than 2 evaluation steps"):
            Evaluator(lambda call: None, None).eval(node, {})
        monkeypatch.setattr(evaluate, "MAX_STEPS", 3)
        evaluator = Evaluator(lambda call: None, None)
        assert evaluator.eval(node, {}) == 3 and evaluator.steps == 3


# ---------------------------------------------------------------- harness.read_start
@pytest.mark.parametrize("raw", [b"not json", b"{\"ready\": tru", b"\xff\xfe"])
def test_an_unreadable_start_line_is_a_desync(raw):
    # json.loads raises a ValueError (JSONDecodeError, UnicodeDecodeError): read as a Desync, not passed through
    with pytest.raises(Desync, match="unreadable line"):
        read_start(raw, "ready")


# ---------------------------------------------------------------- methods.BoundMethod
def test_replace_with_a_count_bounds_by_the_old_substring():
    # one 'x' in 1,000 chars: replacing it by 1,000 chars adds 1,000 items (count 0 replaces none); reading the
    # count (0, falsy) as the old substring would bound 1,001 * 1,000 = 1,001,000 > MAX_ITEMS and refuse it
    receiver = "a" * 999 + "x"
    with Budget(10.0):
        assert attribute(receiver, "replace")("x", "b" * 1000, 0) == receiver
        assert attribute(receiver, "replace")("x", "b" * 1000, 1) == "a" * 999 + "b" * 1000


# ---------------------------------------------------------------- methods.call_allowed
def test_only_map_and_filter_get_a_wrapped_function():
    # str() of a builtin is Python's own repr; a wrapped one would be the evaluator's lambda
    results = judge(["assert f(1) == 1 and str(len) == '<built-in function len>'",
                     "assert f(1) == 1 and repr(abs) == '<built-in function abs>'"], lambda x: x)
    assert results == [(True, ""), (True, "")]


def test_map_keeps_all_its_iterables():
    # map pairs both lists: pow -> [8, 9], max -> [5, 7]; dropping the first list would call pow with one argument
    assert judge(["assert list(map(pow, [2, 3], [3, 2])) == f([8, 9])",
                  "assert list(map(max, [5, 1], [1, 7])) == f([5, 7])"], lambda x: x) == [(True, "")] * 2


# ---------------------------------------------------------------- stdtypes.factory
@pytest.mark.parametrize("spec", [["x", 1], ["=", 1, 2], ("=", 1), "=x", []])
def test_a_factory_spec_is_exactly_a_two_item_list_after_equals(spec):
    # only the list ["=", value] is a constant factory; another list, a tuple or a 2-char string "=x" is bad
    with pytest.raises(ValueError, match="bad default factory"):
        factory(spec)


def test_a_constant_factory_spec_gives_its_value():
    assert factory(["=", 5])() == 5


# ---------------------------------------------------------------- values._arg_bound
def test_the_factorial_bound_is_on_ints_only():
    # math.factorial(1e9) raises Python's own TypeError (floats are refused), not the int bound's Failed message
    results = judge(["assert f(1) == 1 and math.factorial(10 ** 9) == 1"], lambda x: x)
    assert results[0][0] is False and "over the bound" in results[0][1]
    results = judge(["assert f(1) == 1 and math.factorial(1e9) == 1"], lambda x: x)
    assert results[0][0] is False and "over the bound" not in results[0][1]
