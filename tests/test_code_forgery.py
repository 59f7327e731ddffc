"""A candidate must not be able to forge a pass by defining or patching what the asserts use.

Each attack below passed (score 1.0) when the asserts' operators ran in the candidate's process. Now the
parent evaluates everything but the candidate's own calls, so every attack scores 0 in both reward modes,
while honest solutions to the same references still score 1.
"""
from __future__ import annotations

import json
import textwrap

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.code.sandbox import SandboxConfig

pytestmark = pytest.mark.sandbox

# The reference: tolerance asserts only, the way HumanEval/MBPP check floats.
TOLERANCE = json.dumps({"asserts": ["assert abs(hyp(3, 4) - 5.0) < 1e-9", "assert abs(hyp(5, 12) - 13.0) < 1e-9",
                                    "assert math.isclose(hyp(8, 15), 17.0)"]})
# Builtins applied to the result, as MBPP writes them (the expected values are visible in MBPP prompts).
BUILTIN_FORMS = json.dumps({"asserts": ["assert len(evens(7)) == 4", "assert sorted(evens(5)) == [0, 2, 4]",
                                        "assert set(evens(3)) == {0, 2}", "assert round(sum(evens(4)) / 3, 2) == 0.67",
                                        "assert max(evens(9)) == 8 and min(evens(9)) == 0"]})
TWO_CALLS = json.dumps({"asserts": ["assert fib(10) == fib(9) + fib(8)", "assert fib(12) - fib(11) == fib(10)",
                                    "assert fib(1) == 1 and fib(7) == 13"]})


def code(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


ATTACKS = {  # name -> (completion, reference); none computes a right answer
    "issue_example_shadowed_abs_and_fake_math": (code("""
        abs = lambda x: 0
        class math:
            isclose = staticmethod(lambda *a, **k: True)
        def hyp(a, b): return 0"""), TOLERANCE),
    "patch_builtins_and_math_modules": (code("""
        import builtins, math
        builtins.abs = lambda x: 0
        math.isclose = lambda *a, **k: True
        def hyp(a, b): return 0"""), TOLERANCE),
    "patch_in_function": (code("""
        def hyp(a, b):
            import builtins, math
            builtins.abs = lambda x: 0
            math.isclose = lambda *a, **k: True
            return 0.0"""), TOLERANCE),
    "float_subclass_overrides": (code("""
        class F(float):
            def __eq__(self, o): return True
            def __sub__(self, o): return F(0.0)
            def __abs__(self): return 0.0
            def __lt__(self, o): return True
            __hash__ = float.__hash__
        def hyp(a, b): return F(1.0)"""), TOLERANCE),
    "float_like_object": (code("""
        class F:
            def __sub__(self, o): return self
            def __rsub__(self, o): return self
            def __abs__(self): return 0.0
            def __float__(self): return 5.0
            def __eq__(self, o): return True
        def hyp(a, b): return F()"""), TOLERANCE),
    "forged_lines_then_exit": (code("""
        import os, sys, json
        fd = int(sys.argv[1])
        for i in range(3):
            for value in (True, 0.0, "pass"):
                os.write(fd, (json.dumps({"i": i, "ok": True, "value": value, "done": 99}) + "\\n").encode())
        os.write(fd, b'{"i": 0, "ok": true, "passed": true}\\n{"all": "passed"}\\n')
        os._exit(0)"""), TOLERANCE),
    "forged_stdout_and_exit": (code("""
        print('{"i": 0, "ok": true, "value": 5.0}')
        print('3 passed, 0 failed')
        import os; os._exit(0)"""), TOLERANCE),
    "shadow_len_sorted_set_round_max_min": (code("""
        len = lambda x: 4
        sorted = lambda x: [0, 2, 4]
        set = lambda x: {0, 2}
        round = lambda *a: 0.67
        max = lambda x: 8
        min = lambda x: 0
        def evens(n): return []"""), BUILTIN_FORMS),
    "patch_builtins_len_sorted": (code("""
        import builtins
        builtins.len = lambda x: 4
        builtins.sorted = lambda x: [0, 2, 4]
        builtins.set = lambda x: {0, 2}
        builtins.round = lambda *a: 0.67
        builtins.max = lambda x: 8
        builtins.min = lambda x: 0
        def evens(n): return 1"""), BUILTIN_FORMS),
    "list_subclass_with_len": (code("""
        class L(list):
            def __len__(self): return 4
            def __iter__(self): return iter([0, 2, 4])
        def evens(n): return L()"""), BUILTIN_FORMS),
    "always_equal_between_two_calls": (code("""
        class Eq:
            def __eq__(self, o): return True
            def __add__(self, o): return self
            __sub__ = __radd__ = __add__
            __hash__ = object.__hash__
        def fib(n): return Eq()"""), TWO_CALLS),
    "int_subclass_between_two_calls": (code("""
        class I(int):
            def __eq__(self, o): return True
            def __add__(self, o): return self
            def __sub__(self, o): return self
            __hash__ = int.__hash__
        def fib(n): return I(n)"""), TWO_CALLS),
    "nan_between_two_calls": (code("def fib(n):\n    return float('nan')"), TWO_CALLS),
}


def _verifier(mode: str):
    from rlvr.verifiers.code.verifier import CodeVerifier

    return CodeVerifier(mode, SandboxConfig(time_limit_s=5.0))


@pytest.mark.parametrize("mode", ["fraction", "all"])
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_forged_pass_scores_zero(name, mode):
    completion, reference = ATTACKS[name]
    verdict = _verifier(mode).verify(completion, reference)
    assert verdict.score == 0.0 and verdict.outcome is not Outcome.CORRECT, verdict
    assert verdict.scorable, verdict  # judged wrong, not excused from the group baseline


HONEST = {
    "hypot": ("import math\ndef hyp(a, b):\n    return math.hypot(a, b)", TOLERANCE),
    "sqrt": ("def hyp(a, b):\n    return (a * a + b * b) ** 0.5", TOLERANCE),
    "newton_loop": ("def hyp(a, b):\n    s = a * a + b * b\n    x = s\n    for _ in range(60):\n"
                    "        x = (x + s / x) / 2\n    return x", TOLERANCE),
    "set_evens": ("def evens(n):\n    return {i for i in range(n) if i % 2 == 0}", BUILTIN_FORMS),
    "list_evens": ("def evens(n):\n    return [i for i in range(0, n, 2)]", BUILTIN_FORMS),
    "fib_memo": ("from functools import lru_cache\n@lru_cache(None)\ndef fib(n):\n"
                 "    return n if n < 2 else fib(n - 1) + fib(n - 2)", TWO_CALLS),
}


@pytest.mark.parametrize("mode", ["fraction", "all"])
@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_solution_still_scores_one(name, mode):
    completion, reference = HONEST[name]
    verdict = _verifier(mode).verify(completion, reference)
    assert (verdict.outcome, verdict.score) == (Outcome.CORRECT, 1.0), verdict.detail


def test_partial_forgery_counts_only_real_passes():
    # hyp right for (3, 4) only, abs shadowed: 1 of 3 asserts really passes (hand count)
    completion = "abs = lambda x: 0\ndef hyp(a, b):\n    return 5.0 if (a, b) == (3, 4) else 0.0"
    verdict = _verifier("fraction").verify(completion, TOLERANCE)
    assert (verdict.outcome, verdict.score) == (Outcome.WRONG, pytest.approx(1 / 3)), verdict
