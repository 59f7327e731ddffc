"""The parent's side of code tests, without a sandbox: which assert forms are refused up front, the order
in which candidate calls are made (Python's own), the bounds on what a candidate value can make the parent
compute, and Python-faithful results on plain data. A fake stands in for the sandbox session: it runs plain Python
functions on the decoded arguments and returns their values through the wire encoding."""
from __future__ import annotations

import json
import time

import pytest

from rlvr.verifiers.code.budget import PARENT_CPU_S, Budget
from rlvr.verifiers.code.evaluate import BadReference, CallResult, CandidateCall
from rlvr.verifiers.code.harness import Desync, read_reply
from rlvr.verifiers.code.reference import judge_asserts, parse_reference
from rlvr.verifiers.code.values import same
from rlvr.verifiers.code.wire import decode, encode


def refs(*asserts: str, **extra) -> str:
    return json.dumps({"asserts": list(asserts), **extra})


def _fake_run(root: str, ops: list, functions: dict) -> tuple[object, str]:
    """What the harness does for a single-call chain, nested calls included: (value, 'name(args)')."""
    (_, args, kwargs), = ops  # the fake supports single-call chains
    values, shown = [], []
    for a in args:
        if isinstance(a, dict) and "call" in a:
            value, text = _fake_run(a["call"]["root"], a["call"]["ops"], functions)
            values.append(value)
            shown.append(text)
        else:
            values.append(decode(a))
            shown.append(repr(values[-1]))
    return functions[root](*values, **{k: decode(v) for k, v in kwargs}), f"{root}({', '.join(shown)})"


def fake_session(functions: dict, log: list[str]):
    """A stand-in for Session.call: runs `functions` in this thread, logging each request as 'name(args)'."""
    def call(request: CandidateCall) -> CallResult:
        try:
            value, text = _fake_run(request.root, request.ops, functions)
            result = CallResult(True, decode(encode(value)), 1)
        except Exception as err:
            text, result = f"{request.root}(...)", CallResult(False, f"raised {type(err).__name__}", 0,
                                                              type(err).__name__)
        log.append(text)
        return result
    return call


def judge(reference: str, functions: dict, budget_s: float = 10.0) -> tuple[list[tuple[bool, str]], list[str]]:
    """(outcomes, the requests in the order they were made, as 'name(args)') with `functions` as the candidate's
    namespace. The fake runs the candidate in this thread, so its work counts against the parent's CPU budget."""
    log: list[str] = []
    with Budget(budget_s):
        return judge_asserts(parse_reference(reference), fake_session(functions, log)), log


@pytest.mark.parametrize("assertion,form", [
    ("assert sorted(f(1), key=lambda v: -v) == [3]", "a lambda"),
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
    ("assert '%*d' % (f(1), 1) != ''", "%-formatting"),  # widths are unbounded
    ("assert list(map(square, [1, 2])) == [1, 4]", "candidate's 'square' as a value"),
    ("assert abs(poly([1, 2], candidate([1, 2]))) < 1e-4", "'poly', which is neither the entry"),
])
def test_unsupported_form_is_refused_with_its_name(assertion, form):
    with pytest.raises(BadReference, match="unscorable") as err:
        parse_reference(refs(assertion, entry="find_zero") if "poly" in assertion else refs(assertion))
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
    assert [ok for ok, _ in outcomes] == [True, True] and log == ["hyp(3, 4)", "hyp(8, 15)"]
    outcomes, _ = judge(reference, {"hyp": lambda a, b: 0})  # abs(0 - 5.0) = 5 > 1e-9; isclose(0, 17) False
    assert [ok for ok, _ in outcomes] == [False, False] and "got 0" in outcomes[0][1]


def test_directly_nested_calls_are_one_request():
    functions = {"g": lambda x: x + 1, "f": lambda x: 2 * x - 1}  # g(3) = 4, f(4) = 7, f(f(g(3))) = 13
    outcomes, log = judge(refs("assert f(g(3)) == 7", "assert f(f(g(3))) == 13"), functions)
    assert [ok for ok, _ in outcomes] == [True, True]
    assert log == ["f(g(3))", "f(f(g(3)))"]  # one request each; the inner values never come back


def test_calls_behind_parent_operators_run_in_pythons_order():
    # g(3) = 4; 4 + 1 = 5; f(5) = 9; f(9) - 0 = 9 -> f(9) = 17 (hand). The order is Python's, assert by
    # assert (rounds made it g(3), g(3), f(5), f(5), f(9): the second assert's g(3) before the first's f(5))
    functions = {"g": lambda x: x + 1, "f": lambda x: 2 * x - 1}
    outcomes, log = judge(refs("assert f(g(3) + 1) == 9", "assert f(f(g(3) + 1) - 0) == 17"), functions)
    assert [ok for ok, _ in outcomes] == [True, True]
    assert log == ["g(3)", "f(5)", "g(3)", "f(5)", "f(9)"]  # one call per site: no dedup


def test_calls_run_in_the_order_the_asserts_make_them():
    # exactly Python's order (rounds sent f(0) of the second assert before f(2) of the first), and a
    # generator stops where all() stops: f(1) = 5 is false, so f(2) and f(3) are never called
    outcomes, log = judge(refs("assert f(3) == f(2) + 1", "assert all(f(x) == x for x in range(4))"),
                          {"f": lambda x: 5 if x == 1 else x})
    assert [ok for ok, _ in outcomes] == [True, False]  # 3 == 2 + 1; 5 != 1
    assert log == ["f(3)", "f(2)", "f(0)", "f(1)"]


def test_a_generators_first_iterable_is_evaluated_when_it_is_created():
    # Python evaluates g(1) when the generator expression is built, before h(2); its elements when zip pulls them
    # (f(2) too: zip takes from the generator before it finds the list exhausted)
    functions = {"f": lambda x: x * 10, "g": lambda x: [x, x + 1], "h": lambda x: x}
    outcomes, log = judge(refs("assert list(zip((f(x) for x in g(1)), [h(2)])) == [(10, 2)]"), functions)
    assert outcomes == [(True, "")] and log == ["g(1)", "h(2)", "f(1)", "f(2)"]


def test_repeated_calls_are_not_merged():
    # a random function called twice must be called twice, as in Python
    import itertools

    counter = itertools.count()
    outcomes, _ = judge(refs("assert token(12) != token(12)"), {"token": lambda n: next(counter)})
    assert outcomes[0][0] is True


def test_calls_nested_behind_operators_run_innermost_first():
    # no cap on the depth any more (it was 4 rounds); each call is made when Python makes it
    expr = "0"
    for _ in range(6):
        expr = f"f({expr} + 0)"  # a parent operator between each pair of calls
    outcomes, log = judge(refs(f"assert {expr} == 6"), {"f": lambda x: x + 1})
    assert outcomes == [(True, "")] and log == ["f(0)", "f(1)", "f(2)", "f(3)", "f(4)", "f(5)"]


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
    ("assert list(map(pow, [3], [f(1)])) != []", 10 ** 8),
    ("assert sum(x for x in range(f(1)) for y in range(f(1))) > 0", 10 ** 6),
    ("assert 1 << f(1) > 0", 10 ** 9),
])
def test_candidate_values_cannot_blow_up_the_parent(assertion, value):
    start = time.monotonic()
    outcomes, _ = judge(refs(assertion), {"f": lambda x: value}, budget_s=PARENT_CPU_S)  # the verifier's budget
    assert outcomes[0][0] is False and any(w in outcomes[0][1] for w in ("bound", "steps", "budget")), outcomes
    assert time.monotonic() - start < 30  # a liveness bound with slack, not a speed test


CALL = CandidateCall("f", [["call", [1], []]])


@pytest.mark.parametrize("line", [
    b'{"n": 0, "ok": true, "value": 1, "done": 7}',  # done > ops
    b'{"n": 5, "ok": true, "value": 1, "done": 1}',  # another call's number: a line out of order
    b'{"n": 0, "passed": true}', b'{"ready": true}', b'not json', b'{"n": 0, "ok": true, "value": {"x": 1}}',
])
def test_a_line_the_protocol_does_not_expect_ends_the_session(line):
    # one line answers one call; anything else raises Desync, and the session then fails every call
    with pytest.raises(Desync):
        read_reply(line, 0, CALL)
    assert read_reply(b'{"n": 0, "ok": true, "value": 1, "done": 1}', 0, CALL) == CallResult(True, 1, 1)


def test_wire_round_trip_and_strict_decoding():
    value = {(1, 2): [1.5, None, True, "s", b"\x00", frozenset({3}), {4}], "big": 10 ** 30}
    assert decode(encode(value)) == value and type(decode(encode((1,)))) is tuple
    for bad in ({"x": [1]}, {"d": [[1]]}, {"i": 5}, {"t": 1}, {"a": 1, "b": 2}):
        with pytest.raises(ValueError):
            decode(bad)


def test_equality_on_plain_data():
    # Python's own ==: a tuple is not a list, even nested; numbers mix (1 == 1.0 == True)
    assert not same([1, (2, 3)], ((1, [2, 3]))) and same(1, 1.0) and same(True, 1) and not same("1", 1)
    assert not same(0.1 + 0.2, 0.3) and not same(None, 0)  # 0.30000000000000004 != 0.3 in Python
    assert same({"a": 2}, {"a": 2.0}) and not same({1, 2}, [1, 2]) and same(frozenset({1}), {1})
    # with a reference's rel_tol, two floats match within it: |0.30000000000000004 - 0.3| = 5.6e-17 <= 1e-9 * 0.3
    assert same(0.1 + 0.2, 0.3, 1e-9) and same([0.1 + 0.2], [0.3], 1e-9) and not same(1.0, 1.0001, 1e-9)
    assert not same([0.3], (0.3,), 1e-9) and not same(1, 1.0000000001, 1e-9)  # types and ints stay exact


def test_int_answers_get_no_float_tolerance():
    # 1e12 is 999 away from 1000000000999 but within rel 1e-9; 1.0000000005 is not True
    functions = {"f": lambda n: 1e12, "g": lambda n: 1.0000000005, "h": lambda n: 0.1 + 0.2}
    asserts = ("assert f(3) == 1000000000999", "assert g(3) == True", "assert h(1) == 0.3")
    outcomes, _ = judge(refs(*asserts, rel_tol=1e-9), functions)
    assert [ok for ok, _ in outcomes] == [False, False, True]  # two floats compare within the reference's rel_tol
    outcomes, _ = judge(refs(*asserts), functions)
    assert [ok for ok, _ in outcomes] == [False, False, False]  # without it, exactly as Python: 0.1 + 0.2 != 0.3


def test_stop_iteration_in_a_comprehension_fails_the_test_only():
    # next() on an empty iterator inside a list comprehension; the other assert still passes
    outcomes, _ = judge(refs("assert next(gen(1)) == 1", "assert [next(gen(i)) for i in range(1, 3)] == [1, 2]"),
                        {"gen": lambda n: iter([n]) if n < 2 else iter([])})
    assert outcomes[0] == (True, "") and outcomes[1][0] is False


def test_hash_collisions_are_refused_quickly():
    # ints k * (2**61 - 1) all hash to 0; building a set of 30,000 took 8.6 s
    modulus = (1 << 61) - 1
    start = time.monotonic()
    outcomes, _ = judge(refs("assert set(f(1)) == {1, 2}", "assert len({x for x in f(1)}) == 2"),
                        {"f": lambda n: [k * modulus for k in range(1, 30000)]})
    assert [ok for ok, _ in outcomes] == [False, False] and "share one hash" in outcomes[0][1]
    with pytest.raises(Exception, match="share one hash"):
        decode({"s": [k * modulus for k in range(1, 100)]})
    assert time.monotonic() - start < 10  # liveness bound with slack (quadratic would take minutes)
    assert decode({"s": [1] * 50 + [2]}) == {1, 2}  # equal values sharing a hash are fine


def test_big_int_inputs_are_bounded():
    # a 4M-bit int on the wire, and math.lcm over 90,000 ints
    with pytest.raises(ValueError, match="bits"):
        decode({"i": hex(1 << 4_000_000)})
    outcomes, _ = judge(refs("assert math.lcm(*f(1)) > 0"), {"f": lambda n: list(range(1, 90_000))})
    assert outcomes[0][0] is False and "bits" in outcomes[0][1]


def test_error_text_with_lone_surrogates_is_escaped():
    # a candidate's ValueError('\\ud800') must not make the detail unwritable as UTF-8
    line = json.dumps({"n": 0, "ok": False, "error": "raised ValueError: \ud800", "exc": "ValueError"}).encode()
    result = read_reply(line, 0, CALL)
    assert result.raised == "ValueError" and not result.ok
    result.value.encode("utf-8")


def test_complex_and_fraction_values_cross_the_wire():
    from fractions import Fraction

    assert decode(encode(1 + 2j)) == 1 + 2j and decode(encode(Fraction(1, 3))) == Fraction(1, 3)
    outcomes, _ = judge(refs("assert angle(0, 1j) == 1.5707963267948966", "assert half(1) == 0.5"),
                        {"angle": lambda a, b: __import__("cmath").phase(a + b), "half": lambda n: Fraction(n, 2)})
    assert [ok for ok, _ in outcomes] == [True, True]
