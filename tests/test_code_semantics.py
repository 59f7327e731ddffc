"""Python's own comparison is the code verifier's specification, end to end through the sandbox.

FORGED: each once scored 1.0 (a list passed for a tuple, an OrderedDict's order was lost, floats
matched within 1e-9 without the reference asking, the candidate's own `Fraction` or helper decided the expected
value, `is` compared two copies); each must now be wrong, or unscorable when the parent cannot evaluate the
form exactly. PYTHON: what Python itself says is equal must pass (dict == OrderedDict, Counters with zero
counts, 1 == 1.0 == True, set == frozenset, -0.0 == 0.0, NaN != NaN), and a short-circuit branch Python never
takes must not cost an honest solution its later asserts.
"""
from __future__ import annotations

import json
import time

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.code.sandbox import SandboxConfig, probe

_PROBE = probe()  # cached; the `sandbox` mark decides skip or fail
pytestmark = pytest.mark.sandbox  # skips without bubblewrap, fails under CI=true (conftest.py)
LIMIT_S = 2.0


def asserts(*tests: str, **extra) -> str:
    return json.dumps({"asserts": list(tests), **extra})


def _verify(code: str, reference: str):
    from rlvr.verifiers.code.verifier import CodeVerifier

    return CodeVerifier(sandbox=SandboxConfig(time_limit_s=LIMIT_S)).verify(code, reference)


FORGED = {  # name -> (code, reference); Python says each assert fails (or cannot say it across processes)
    "list_for_tuple": ("def f(n):\n    return [1, 2]", asserts("assert f(0) == (1, 2)")),
    "tuple_for_list": ("def f(n):\n    return (1, 2)", asserts("assert f(0) == [1, 2]")),
    "nested_lists_for_tuples": ("def f(n):\n    return [[1, 2], [3]]", asserts("assert f(0) == [(1, 2), (3,)]")),
    "list_in_dict_for_tuple": ("def f(n):\n    return {'a': [1]}", asserts("assert f(0) == {'a': (1,)}")),
    "list_ordered_against_tuple": ("def f(n):\n    return [1, 2]", asserts("assert f(0) < (1, 3)")),  # TypeError
    "ordered_dict_order": ("from collections import OrderedDict\n"
                           "def f(n):\n    return OrderedDict([('a', 1), ('b', 2)])",
                           asserts("assert f(0) == OrderedDict([('b', 2), ('a', 1)])")),
    "float_sum_without_tolerance": ("def f(n):\n    return 0.1 + 0.2", asserts("assert f(0) == 0.3")),
    "nested_float_without_tolerance": ("def f(n):\n    return [1.0000000001]", asserts("assert f(0) == [1.0]")),
    "candidates_own_fraction": ("def Fraction(a, b):\n    return 7\ndef f(n):\n    return 7",
                                asserts("assert f(3) == Fraction(1, 3)")),
    # deque is the parent's (was refused as a library name): the candidate receives a real deque
    "candidates_own_deque_argument": ("def deque(xs):\n    return 'magic'\n"
                                      "def f(d):\n    return 3 if d == 'magic' else 0",
                                      asserts("assert f(deque([1, 2])) == 3")),
}
UNSCORABLE = {  # forms the parent cannot evaluate exactly: refused when the reference is read
    "helper_only_on_expected_side": ("def expected(n):\n    return 0\ndef solve(n):\n    return 0",
                                     asserts("assert solve(2) == expected(2)")),
    "identity_of_two_results": ("_x = [1]\ndef f(n):\n    return _x", asserts("assert f(1) is not f(1)")),
}
PYTHON = {  # name -> (code, reference); Python says every assert passes
    "dict_equals_ordered_dict": ("def f(n):\n    return {'a': 1, 'b': 2}",
                                 asserts("assert f(0) == OrderedDict([('b', 2), ('a', 1)])")),
    "ordered_dict_equals_dict": ("from collections import OrderedDict\ndef f(n):\n    return OrderedDict(b=2, a=1)",
                                 asserts("assert f(0) == {'a': 1, 'b': 2}", "assert list(f(0)) == ['b', 'a']")),
    "counter_zero_counts": ("from collections import Counter\ndef f(n):\n    return Counter({'a': 1, 'b': 0})",
                            asserts("assert f(0) == Counter({'a': 1})")),  # Python 3.10+: a missing key is zero
    "int_float_bool": ("def f(n):\n    return [1, 2.0, True]",
                       asserts("assert f(0) == [1.0, 2, 1]", "assert type(f(0)[2]) is bool")),
    "set_equals_frozenset": ("def f(n):\n    return frozenset({1, 2})",
                             asserts("assert f(0) == {1, 2}", "assert f(0) != [1, 2]")),
    "negative_zero": ("def f(n):\n    return -0.0",
                      asserts("assert f(0) == 0.0", "assert math.copysign(1.0, f(0)) == -1.0")),
    "nan_is_never_equal": ("def f(n):\n    return float('nan')",  # two NaN objects: [x] != [y] as x != y
                           asserts("assert f(0) != f(0)", "assert [f(0)] != [f(0)]", "assert f(0) not in [f(0)]")),
    "reference_asks_for_tolerance": ("def f(n):\n    return [0.1 + 0.2]",
                                     asserts("assert f(0) == [0.3]", rel_tol=1e-9)),
    "fractions": ("from fractions import Fraction\ndef f(n):\n    return Fraction(1, n)",
                  asserts("assert f(3) == Fraction(1, 3)", "assert sum([f(2), f(2)]) == 1")),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_forged_pass_is_wrong(name):
    verdict = _verify(*FORGED[name])
    assert (verdict.outcome, verdict.score, verdict.scorable) == (Outcome.WRONG, 0.0, True), verdict.detail


@pytest.mark.parametrize("name", sorted(UNSCORABLE))
def test_form_the_parent_cannot_evaluate_is_unscorable(name):
    verdict = _verify(*UNSCORABLE[name])
    assert (verdict.outcome, verdict.score, verdict.scorable) == (Outcome.ERROR, 0.0, False), verdict.detail
    assert verdict.detail.startswith("reference tests unparseable")


@pytest.mark.parametrize("name", sorted(PYTHON))
def test_what_python_calls_equal_passes(name):
    verdict = _verify(*PYTHON[name])
    assert (verdict.outcome, verdict.score) == (Outcome.CORRECT, 1.0), verdict.detail


def test_untaken_branch_that_hangs_costs_no_later_assert():
    # ok(1) is True, so Python never calls ok(-1) (it hangs); it is never sent either (the session
    # follows Python's evaluation); g(g(1) + 1): g(1) = 1, then g(2) = 2
    code = "def ok(x):\n    while x < 0:\n        pass\n    return True\ndef g(x):\n    return x"
    start = time.monotonic()
    verdict = _verify(code, asserts("assert any(ok(x) for x in [1, -1])", "assert g(g(1) + 1) == 2"))
    assert (verdict.outcome, verdict.score) == (Outcome.CORRECT, 1.0), verdict.detail
    assert time.monotonic() - start < LIMIT_S + 1.5  # the hang never ran (it had a quarter of the limit before)
