"""Honest, correct solutions score 1 under the code verifier; partial ones score what was hand-computed.

Skips (with the probe's reason) where the bubblewrap sandbox cannot run; CI installs it via scripts/setup.sh.
"""
from __future__ import annotations

import json

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.code.sandbox import SandboxConfig, probe

_PROBE = probe()  # cached; the `sandbox` mark decides skip or fail
pytestmark = pytest.mark.sandbox  # skips without bubblewrap, fails under CI=true (conftest.py)


def asserts(*tests: str, **extra) -> str:
    return json.dumps({"asserts": list(tests), **extra})


def io(*cases: tuple[str, str]) -> str:
    return json.dumps({"io": [{"input": i, "output": o} for i, o in cases]})


def fenced(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code.strip()}\n```\n\nIt runs in O(n)."


HONEST = {
    "recursion": ("def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)",
                  asserts("assert fact(0) == 1", "assert fact(5) == 120", "assert fact(20) == 2432902008176640000")),
    "big_int_result": ("def fact(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n    return r",
                       asserts("assert fact(30) == 265252859812191058636308480000000",
                               "assert fact(1000) == fact(999) * 1000")),  # 2568 digits, both sides
    "class": ("class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
              "        self.items.append(x)\n        return self\n    def pop(self):\n"
              "        return self.items.pop()\n",
              asserts("assert Stack().push(1).push(2).pop() == 2", "assert Stack().push('a').items == ['a']")),
    "generator": ("def evens(n):\n    for i in range(n):\n        if i % 2 == 0:\n            yield i",
                  asserts("assert list(evens(7)) == [0, 2, 4, 6]", "assert sum(evens(100)) == 2450")),
    "itertools": ("import itertools\ndef pairs(xs):\n    return list(itertools.combinations(xs, 2))",
                  asserts("assert pairs([1, 2, 3]) == [(1, 2), (1, 3), (2, 3)]", "assert pairs([]) == []")),
    "collections": ("from collections import Counter, deque\ndef top(s):\n    return Counter(s).most_common(1)[0][0]\n"
                    "def rotate(xs, k):\n    d = deque(xs)\n    d.rotate(k)\n    return list(d)",
                    asserts("assert top('abracadabra') == 'a'", "assert rotate([1, 2, 3], 1) == [3, 1, 2]")),
    "functools": ("from functools import lru_cache, reduce\n@lru_cache(None)\ndef fib(n):\n"
                  "    return n if n < 2 else fib(n - 1) + fib(n - 2)\ndef product(xs):\n"
                  "    return reduce(lambda a, b: a * b, xs, 1)",
                  asserts("assert fib(90) == 2880067194370816120", "assert product([2, 3, 7]) == 42")),
    "math_float": ("import math\ndef hyp(a, b):\n    return math.sqrt(a * a + b * b)",
                   asserts("assert hyp(3, 4) == 5.0", "assert abs(hyp(1, 1) - 1.41421356) < 1e-6",
                           "assert math.isclose(hyp(1, 2), 5 ** 0.5)")),
    "float_tolerance": ("def add(a, b):\n    return a + b", asserts("assert add(0.1, 0.2) == 0.3", rel_tol=1e-9)),
    "regex": ("import re\ndef words(s):\n    return re.findall(r'[a-z]+', s.lower())",
              asserts("assert words('Hello, World!') == ['hello', 'world']", "assert words('42') == []")),
    "heapq": ("import heapq\ndef k_smallest(xs, k):\n    return heapq.nsmallest(k, xs)",
              asserts("assert k_smallest([5, 1, 4, 2], 2) == [1, 2]")),
    "bisect": ("import bisect\ndef rank(xs, x):\n    return bisect.bisect_left(sorted(xs), x)",
               asserts("assert rank([10, 30, 20], 25) == 2", "assert rank([], 1) == 0")),
    "dataclass": ("from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int\n"
                  "def norm1(x, y):\n    p = P(x, y)\n    return abs(p.x) + abs(p.y)",
                  asserts("assert norm1(-3, 4) == 7")),
    "fractions": ("from fractions import Fraction\ndef half_sum(a, b):\n"
                  "    return str(Fraction(a, 2) + Fraction(b, 2))",
                  asserts("assert half_sum(1, 2) == '3/2'")),
    "multiple_functions": ("def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n"
                           "def primes(n):\n    return [k for k in range(n) if is_prime(k)]",
                           asserts("assert primes(20) == [2, 3, 5, 7, 11, 13, 17, 19]", "assert is_prime(97)",
                                   "assert not is_prime(91)")),
    "closure": ("def counter():\n    n = 0\n    def inc():\n        nonlocal n\n        n += 1\n        return n\n"
                "    return inc\ndef third():\n    c = counter()\n    c(); c()\n    return c()",
                asserts("assert third() == 3")),
    "exceptions_handled": ("def safe_div(a, b):\n    try:\n        return a / b\n    except ZeroDivisionError:\n"
                           "        return None",
                           asserts("assert safe_div(1, 0) is None", "assert safe_div(6, 3) == 2")),
    "tuple_dict_set_results": ("def stats(xs):\n    return (min(xs), max(xs))\ndef freq(s):\n    d = {}\n"
                               "    for ch in s:\n        d[ch] = d.get(ch, 0) + 1\n    return d\n"
                               "def uniq(xs):\n    return set(xs)",
                               asserts("assert stats([3, 1, 2]) == (1, 3)", "assert freq('aab') == {'a': 2, 'b': 1}",
                                       "assert uniq([1, 1, 2]) == {1, 2}", "assert 2 in uniq([2, 3])")),
    "entry_candidate": ("def solve(xs):\n    return sorted(xs, reverse=True)",
                        asserts("assert candidate([1, 3, 2]) == [3, 2, 1]", entry="solve")),
    "main_guard_not_run": ("def sq(x):\n    return x * x\nif __name__ == '__main__':\n    print(sq(int(input())))",
                           asserts("assert sq(9) == 81")),
    "prints_in_assert_mode": ("def add(a, b):\n    print('debug', a, b)\n    return a + b",
                              asserts("assert add(2, 2) == 4")),
    "concurrency": ("from multiprocessing import Pool\nfrom concurrent.futures import ThreadPoolExecutor\n"
                    "import asyncio, subprocess\ndef sq(x):\n    return x * x\ndef par(xs):\n    with Pool(2) as p:\n"
                    "        return p.map(sq, xs)\ndef thr(xs):\n    with ThreadPoolExecutor(2) as ex:\n"
                    "        return list(ex.map(sq, xs))\nasync def _inc(x):\n    await asyncio.sleep(0)\n"
                    "    return x + 1\n"
                    "def aio(x):\n    return asyncio.run(_inc(x))\ndef echo(s):\n"
                    "    return subprocess.run(['echo', s], capture_output=True, text=True).stdout",
                    asserts("assert par([1, 2, 3]) == [1, 4, 9]", "assert thr([5]) == [25]", "assert aio(1) == 2",
                            "assert echo('hi') == 'hi\\n'")),
    "compound_asserts": ("def add(a, b):\n    return a + b",
                         asserts("assert add(1, 1) == 2 and add(2, 2) == 4", "assert not add(1, 1) == 3",
                                 "assert add(0, 0) == 0 or undefined_name()", "assert 2 < add(0, 3) <= 3",
                                 "assert add(1, 2) in (3, 4) and add('a', 'b') is not None")),
    "humaneval_style": ("def truncate_number(x):\n    return x % 1.0",
                        asserts("assert candidate(3.5) == 0.5", "assert abs(candidate(1.33) - 0.33) < 1e-6",
                                "assert candidate(123.456) - 0.456 < 1e-6", entry="truncate_number")),
    "mbpp_style": ("import math\ndef volume_sphere(r):\n    return 4 / 3 * math.pi * r ** 3\n"
                   "def similar_elements(a, b):\n    return tuple(set(a) & set(b))",
                   asserts("import math\nassert math.isclose(volume_sphere(10), 4188.790204786391, rel_tol=0.001)",
                           "assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))")),
    "leetcode_class": ("class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
                       "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
                       "                return [seen[target - x], i]\n            seen[x] = i",
                       asserts("assert Solution().twoSum([2, 7, 11, 15], 9) == [0, 1]",
                               "assert sorted(Solution().twoSum([3, 2, 4], 6)) == [1, 2]")),
    "nested_and_related_calls": ("def inc(x):\n    return x + 1\ndef sq(x):\n    return x * x",
                                 asserts("assert sq(inc(3)) == 16", "assert inc(inc(inc(0))) == 3",
                                         "assert sq(4) == sq(3) + 7", "assert all(sq(i) == i * i for i in range(6))")),
    "subclass_results": ("from collections import Counter, defaultdict, OrderedDict\ndef freq(s):\n"
                         "    d = defaultdict(int)\n    for ch in s:\n        d[ch] += 1\n    return d\n"
                         "def count(s):\n    return Counter(s)\n"
                         "def ordered(xs):\n    return OrderedDict((x, 1) for x in xs)",
                         asserts("assert freq('aab') == {'a': 2, 'b': 1}", "assert count('abb')['b'] == 2",
                                 "assert ordered([2, 1]) == {2: 1, 1: 1}",
                                 "assert count('aab').most_common(1) == [('a', 2)]")),
    "string_methods_on_result": ("def greet(n):\n    return 'Hello ' + n",
                                 asserts("assert greet('bo').lower() == 'hello bo'",
                                         "assert greet('x').split() == ['Hello', 'x']",
                                         "assert ''.join(reversed(greet('a'))) == 'a olleH'")),
    "objects_between_calls": ("class Node:\n    def __init__(self, v, nxt=None):\n        self.v, self.nxt = v, nxt\n"
                              "def from_list(xs):\n    head = None\n    for x in reversed(xs):\n"
                              "        head = Node(x, head)\n"
                              "    return head\ndef reverse(h):\n    prev = None\n    while h:\n"
                              "        h.nxt, prev, h = prev, h, h.nxt\n    return prev\n"
                              "def to_list(h):\n    out = []\n"
                              "    while h:\n        out.append(h.v)\n        h = h.nxt\n    return out",
                              asserts("assert to_list(reverse(from_list([1, 2, 3]))) == [3, 2, 1]")),
    "state_between_calls": ("_store = {}\ndef encode(url):\n    key = str(len(_store))\n    _store[key] = url\n"
                            "    return key\ndef decode(key):\n    return _store[key]",
                            asserts("assert decode(encode('https://a.b/c')) == 'https://a.b/c'")),
    "random_calls_are_separate": ("import random\ndef token(n):\n    return random.getrandbits(8 * n)",
                                  asserts("assert token(12) != token(12)")),
    "complex_values": ("import cmath\ndef angle_complex(a, b):\n    return cmath.phase(a + b)\n"
                       "def polar_rect(x, y):\n    return (abs(complex(x, y)), cmath.rect(2, cmath.pi))",
                       asserts("assert angle_complex(0, 1j) == 1.5707963267948966",
                               "assert polar_rect(3, 4) == (5.0, (-2+2.4492935982947064e-16j))")),
    "stdin_sum": ("import sys\nnums = list(map(int, sys.stdin.read().split()))\nprint(sum(nums))",
                  io(("1 2 3\n", "6\n"), ("10\n-4\n", "6"))),
    "stdin_lines_print": ("n = int(input())\nfor i in range(1, n + 1):\n    print(i, i * i)",
                          io(("3\n", "1 1\n2 4\n3 9\n"), ("1\n", "1 1  \n\n"))),
    "stdin_with_exit": ("import sys\ndef main():\n    s = input().strip()\n    print(s[::-1])\n    sys.exit(0)\nmain()",
                        io(("abc\n", "cba\n"))),
    "mixed_asserts_and_io": ("def double(x):\n    return 2 * x\nif __name__ == '__main__':\n"
                             "    print(double(int(input())))",
                             json.dumps({"asserts": ["assert double(4) == 8"],
                                         "io": [{"input": "5", "output": "10"}]})),
}


@pytest.fixture(scope="module")
def verifier():
    from rlvr.verifiers.code.verifier import CodeVerifier

    return CodeVerifier(sandbox=SandboxConfig(time_limit_s=10.0))


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_solution_scores_one(verifier, name):
    code, reference = HONEST[name]
    verdict = verifier.verify(fenced(code), reference)
    assert (verdict.outcome, verdict.score) == (Outcome.CORRECT, 1.0), verdict.detail


def test_unfenced_code_is_the_whole_completion(verifier):
    verdict = verifier.verify("def add(a, b):\n    return a + b\n", asserts("assert add(2, 3) == 5"))
    assert verdict.outcome is Outcome.CORRECT


def test_last_python_block_wins(verifier):
    text = ("First try:\n```python\ndef add(a, b):\n    return a - b\n```\nFixed:\n```py\ndef add(a, b):\n"
            "    return a + b\n```\nShell:\n```bash\necho hi\n```")
    assert verifier.verify(text, asserts("assert add(2, 3) == 5")).outcome is Outcome.CORRECT


HALF = asserts("assert f(1) == 1", "assert f(2) == 4", "assert f(3) == 9", "assert f(4) == 16")
PARTIAL = [  # code, reference, passed out of total (computed by hand)
    ("def f(x):\n    return x * x if x % 2 else x", HALF, 2, 4),  # f(1)=1, f(3)=9 ok; f(2)=2, f(4)=4 wrong
    ("def f(x):\n    if x > 2:\n        raise ValueError\n    return x * x", HALF, 2, 4),  # raises on 3, 4
    ("def f(x):\n    if x == 3:\n        import os; os._exit(0)\n    return x * x", HALF, 2, 4),  # dies at 3
    ("print(input())", io(("a\n", "a\n"), ("b\n", "c\n")), 1, 2),
]


@pytest.mark.parametrize("code,reference,passed,total", PARTIAL)
def test_partial_credit_fraction_and_all(code, reference, passed, total):
    from rlvr.verifiers.code.verifier import CodeVerifier

    config = SandboxConfig(time_limit_s=10.0)
    fraction = CodeVerifier("fraction", config).verify(fenced(code), reference)
    everything = CodeVerifier("all", config).verify(fenced(code), reference)
    assert (fraction.outcome, fraction.score) == (Outcome.WRONG, passed / total), fraction.detail
    assert fraction.detail.startswith(f"{passed}/{total} tests passed; first failure:")
    assert (everything.outcome, everything.score) == (Outcome.WRONG, 0.0)


@pytest.mark.parametrize("reference", [
    "not json", "[]", "{}", json.dumps({"asserts": []}), json.dumps({"asserts": ["x = 1"]}),
    json.dumps({"asserts": ["assert f(1) =="]}), json.dumps({"asserts": ["assert 1 == 1"]}),
    json.dumps({"asserts": ["assert True"]}), json.dumps({"io": [{"input": "1"}]}),
    json.dumps({"asserts": ["assert f() == 1"], "entry": "not an identifier"}),
    json.dumps({"asserts": ["assert f() == 1"], "time_limit_s": -1}),
])
def test_unparseable_reference_is_unscorable(verifier, reference):
    verdict = verifier.verify(fenced("def f(x=0):\n    return 1"), reference)
    assert (verdict.outcome, verdict.score, verdict.scorable) == (Outcome.ERROR, 0.0, False)
    assert verdict.detail.startswith("reference tests unparseable")


@pytest.mark.parametrize("completion", ["", "   \n", "Only C++ here:\n```cpp\nint main() {}\n```",
                                        "```python\n\n```"])
def test_no_code_is_unparseable(verifier, completion):
    verdict = verifier.verify(completion, asserts("assert f() == 1"))
    assert (verdict.outcome, verdict.score) == (Outcome.UNPARSEABLE, 0.0)


def test_syntax_error_is_wrong_with_reason(verifier):
    verdict = verifier.verify(fenced("def f(:\n    pass"), asserts("assert f() == 1"))
    assert (verdict.outcome, verdict.score) == (Outcome.WRONG, 0.0)
    assert "SyntaxError" in verdict.detail


def test_speculative_call_that_hangs_costs_no_needed_call():
    # `not valid(-1)` is True, so Python never calls isqrt(-1) (which hangs here); the session
    # follows Python's evaluation and never sends it (before, it ran after the needed calls, on a shorter limit)
    from rlvr.verifiers.code.verifier import CodeVerifier

    code = "def valid(x):\n    return x >= 0\ndef isqrt(x):\n    while x < 0:\n        pass\n    return int(x ** 0.5)"
    reference = asserts("assert not valid(-1) or isqrt(-1) == 0", "assert isqrt(16) == 4")
    verdict = CodeVerifier(sandbox=SandboxConfig(time_limit_s=2.0)).verify(fenced(code), reference)
    assert (verdict.outcome, verdict.score) == (Outcome.CORRECT, 1.0), verdict.detail
