"""The parent's side of code tests (issue #8), without a sandbox: which assert forms are refused up front, how
nested candidate calls are resolved in rounds, the bounds on what a candidate value can make the parent compute,
and Python-faithful results on plain data. A fake stands in for the sandbox: it runs plain Python functions
on the decoded arguments and returns their values through the wire encoding."""
from __future__ import annotations

import json
import time

import pytest

from rlvr.verifiers.code_eval import MAX_ROUNDS, BadReference, CallResult
from rlvr.verifiers.code_tests import AssertRounds, parse_reference, read_results
from rlvr.verifiers.code_values import decode, encode, same


def refs(*asserts: str, **extra) -> str:
    return json.dumps({"asserts": list(asserts), **extra})


def judge(reference: str, functions: dict) -> tuple[list[tuple[bool, str]], list[list[str]]]:
    """(outcomes, the calls of each round as 'name(args)') with `functions` as the candidate's namespace."""
    rounds, log = AssertRounds(parse_reference(reference)), []
    while calls := rounds.calls():
        results, names = {}, []
        for i, call in enumerate(calls):
            (_, args, kwargs), = call.ops  # the fake supports single-call chains
            args = [decode(a) for a in args]
            names.append(f"{call.root}{tuple(args)}")
            try:
                value = functions[call.root](*args, **{k: decode(v) for k, v in kwargs})
                results[i] = CallResult(True, decode(encode(value)), 1)
            except Exception as err:
                results[i] = CallResult(False, f"raised {type(err).__name__}")
        log.append(names)
        rounds.record(calls, results)
    return rounds.outcomes(), log


@pytest.mark.parametrize("assertion,form", [
    ("assert sorted(f(x), key=lambda v: -v) == [3]", "a lambda"),
    ("assert np.allclose(f(1), [1.0])", "np.allclose"),
    ("assert numpy.isclose(f(1), 1.0)", "numpy.isclose"),
    ("assert getattr(f(1), 'x') == 1", "builtin 'getattr'"),
    ("assert eval('f(1)') == 1", "builtin 'eval'"),
    ("assert f'{f(1)}' == '1'", "an f-string"),
    ("assert (y := f(1)) == 1", "walrus"),
    ("assert math.fake(f(1)) == 1", "math.fake"),
    ("assert '{:>9}'.format(f(1)) == ' 1'", ".format"),
    ("assert abs(f(1)).real == 1", ".real"),  # on the candidate's own chain, `.x` runs at run time instead
    ("assert f(math) == 1", "module 'math' as a value"),
])
def test_unsupported_form_is_refused_with_its_name(assertion, form):
    with pytest.raises(BadReference, match="unscorable") as err:
        parse_reference(refs(assertion))
    assert form in str(err.value)


@pytest.mark.parametrize("reference", [
    refs("assert 1 + 1 == 2"), refs("assert math.sqrt(4) == 2"), refs("import math"),
    refs("from math import isclose\nassert isclose(f(1), 1)"), refs("x = f(1)"),
])
def test_reference_without_candidate_calls_or_with_statements_is_refused(reference):
    with pytest.raises(BadReference):
        parse_reference(reference)


SUPPORTED = [  # forms from HumanEval (entry bound as `candidate`), MBPP and APPS-style references
    refs("assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True", "assert abs(candidate(3.5) - 0.5) < 1e-6",
         entry="has_close_elements"),
    refs("import math\nassert math.isclose(volume_sphere(10), 4188.790204786391, rel_tol=0.001)"),
    refs("assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))"),
    refs("assert round(area(2), 2) == 12.57", "assert sorted(f(3)) == [1, 2, 3]", "assert len(f(3)) == 3"),
    refs("assert all(f(x) == x * x for x in range(5))", "assert [f(i) for i in (1, 2)] == [1, 4]"),
    refs("assert Solution().twoSum([2, 7, 11, 15], 9) == [0, 1]", "assert f(g(3)) == 7"),
    refs("assert f(3) == f(2) + 1", "assert f('abc').upper() == 'ABC'", "assert f(1)[0] in {1, 2}"),
    refs("assert isinstance(f(1), int) and type(f(2)) is float", "assert f(1) is None or not f(0)"),
    refs("assert Counter(f('aab')) == Counter({'a': 2, 'b': 1})", "assert sum(map(int, f('12'))) == 3"),
]


@pytest.mark.parametrize("reference", SUPPORTED)
def test_supported_forms_parse(reference):
    assert parse_reference(reference).asserts


def test_tolerance_asserts_are_judged_in_the_parent():
    reference = refs("assert abs(hyp(3, 4) - 5.0) < 1e-9", "assert math.isclose(hyp(8, 15), 17.0)")
    outcomes, log = judge(reference, {"hyp": lambda a, b: (a * a + b * b) ** 0.5})
    assert [ok for ok, _ in outcomes] == [True, True] and log == [["hyp(3, 4)", "hyp(8, 15)"]]
    outcomes, _ = judge(reference, {"hyp": lambda a, b: 0})  # abs(0 - 5.0) = 5 > 1e-9; isclose(0, 17) False
    assert [ok for ok, _ in outcomes] == [False, False] and "got 0" in outcomes[0][1]


def test_nested_calls_take_one_round_per_depth():
    functions = {"g": lambda x: x + 1, "f": lambda x: 2 * x - 1}  # g(3) = 4, f(4) = 7, f(f(g(3))) = 13
    outcomes, log = judge(refs("assert f(g(3)) == 7", "assert f(f(g(3))) == 13"), functions)
    assert [ok for ok, _ in outcomes] == [True, True]
    assert log == [["g(3,)"], ["f(4,)"], ["f(7,)"]]  # identical calls are made once


def test_calls_of_one_depth_share_one_round():
    # f(3) == f(2) + 1 and every element of the generator: one sandbox run; f(0..3) are 4 distinct calls
    outcomes, log = judge(refs("assert f(3) == f(2) + 1", "assert all(f(x) == x for x in range(4))"), {"f": lambda x: x})
    assert [ok for ok, _ in outcomes] == [True, True] and log == [["f(3,)", "f(2,)", "f(0,)", "f(1,)"]]


def test_nesting_deeper_than_the_round_cap_fails():
    expr = "f(" * (MAX_ROUNDS + 1) + "0" + ")" * (MAX_ROUNDS + 1)
    outcomes, log = judge(refs(f"assert {expr} == {MAX_ROUNDS + 1}"), {"f": lambda x: x + 1})
    assert len(log) == MAX_ROUNDS and outcomes[0][0] is False and "nested" in outcomes[0][1]


def test_short_circuit_as_python():
    # `or` stops at a true left side, so the call that raises does not matter; `and` stops at a false one
    outcomes, _ = judge(refs("assert f(0) == 0 or boom(1)", "assert not (f(1) == 0 and boom(1))"),
                        {"f": lambda x: x, "boom": lambda x: 1 / 0})
    assert [ok for ok, _ in outcomes] == [True, True]


def test_comparison_that_raises_fails_even_under_not():
    # TypeError on "x" < 5: in Python the assert raises, so it must fail, not pass via `not False`
    outcomes, _ = judge(refs("assert not f(1) < 5"), {"f": lambda x: "x"})
    assert outcomes[0][0] is False and "TypeError" in outcomes[0][1]


def test_generator_results_behave_as_in_python():
    outcomes, _ = judge(refs("assert list(f(3)) == [0, 1, 2]", "assert f(3) == [0, 1, 2]", "assert sum(f(4)) == 6"),
                        {"f": lambda n: iter(range(n))})
    assert [ok for ok, _ in outcomes] == [True, False, True]  # an iterator is not equal to a list in Python


@pytest.mark.parametrize("assertion,value", [
    ("assert 2 ** f(1) > 0", 10 ** 7),  # 10 million bits
    ("assert len('ab' * f(1)) > 0", 10 ** 9),
    ("assert len(list(range(f(1)))) > 0", 10 ** 12),
    ("assert math.factorial(f(1)) > 0", 10 ** 6),
    ("assert round(1.5, f(1)) == 1.5", -10 ** 9),
    ("assert '%*d' % (f(1), 1) != ''", 10 ** 9),
    ("assert list(map(pow, [3], [f(1)])) != []", 10 ** 8),
    ("assert sum(x for x in range(f(1)) for y in range(f(1))) > 0", 10 ** 6),
    ("assert 1 << f(1) > 0", 10 ** 9),
])
def test_candidate_values_cannot_blow_up_the_parent(assertion, value):
    start = time.monotonic()
    outcomes, _ = judge(refs(assertion), {"f": lambda x: value})
    assert outcomes[0][0] is False and "bound" in outcomes[0][1] or "steps" in outcomes[0][1], outcomes
    assert time.monotonic() - start < 30  # a liveness bound with slack, not a speed test


def test_forged_result_lines_gain_nothing():
    calls = AssertRounds(parse_reference(refs("assert f(1) == 1"))).calls()
    channel = b"\n".join([b'{"ready": true}', b'{"i": 0, "ok": true, "value": 1, "done": 7}',  # done > ops
                          b'{"i": 5, "ok": true, "value": 1}', b'{"passed": true}', b'not json'])
    results, ready, _ = read_results(channel, calls)
    assert ready and results == {0: CallResult(False, "None")}
    twice = b'{"i": 0, "ok": true, "value": 1, "done": 1}\n' * 2
    assert read_results(twice, calls)[0][0] == CallResult(False, "duplicated result line")


def test_wire_round_trip_and_strict_decoding():
    value = {(1, 2): [1.5, None, True, "s", b"\x00", frozenset({3}), {4}], "big": 10 ** 30}
    assert decode(encode(value)) == value and type(decode(encode((1,)))) is tuple
    for bad in ({"x": [1]}, {"d": [[1]]}, {"i": 5}, {"t": 1}, {"a": 1, "b": 2}):
        with pytest.raises(ValueError):
            decode(bad)


def test_equality_on_plain_data():
    assert same([1, (2, 3)], ((1, [2, 3]))) and same(1, 1.0) and same(True, 1) and not same("1", 1)
    assert same(0.1 + 0.2, 0.3) and not same(1.0, 1.0001) and not same(None, 0)  # rel_tol 1e-9
    assert same({"a": 2}, {"a": 2.0}) and not same({1, 2}, [1, 2]) and same(frozenset({1}), {1})
