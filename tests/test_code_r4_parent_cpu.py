"""The charge before a sort, min/max or comparison of containers counts what
the comparisons will really walk (code/decimals.order_weight), so one C call cannot overspend the parent's budget.

Before: a list of 4,096 Counters of 24 keys weighed 4,096 (a Counter was not counted as nested), and Counter
comparisons are pure-Python code inside the single sorted() call: `assert sorted(f('listen')) == sorted('silent')`
cost the parent 0.18-0.20 s alone and 0.21-0.22 s after an assert whose 0.9 MB result had spent part of the budget,
against the 0.2 s guarantee (docs/verifiers.md, "The parent's cost"). A list of `[0, long_list]` pairs escaped the
count too (a level whose first item is a scalar was not walked). CPU here is time.thread_time() of the judging
thread (the parent judges on one thread; the sandbox's work is in other processes), the best of a few runs, since
the machine is shared and a run can only be slowed by it.
"""
from __future__ import annotations

import json
import random
import time
from collections import Counter

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.code.budget import PARENT_CPU_S, Budget
from rlvr.verifiers.code.decimals import FREE_WEIGHT, order_weight
from rlvr.verifiers.code.evaluate import CallResult
from rlvr.verifiers.code.reference import judge_asserts, parse_reference
from rlvr.verifiers.code.sandbox import SandboxConfig, probe
from rlvr.verifiers.code.wire import decode, encode

GUARANTEE_S = 0.2  # docs/verifiers.md: the parent's CPU per completion
MARGIN_S = 0.15  # under the guarantee with room for a loaded machine
ANAGRAM = "assert sorted(f('listen')) == sorted('silent')"

COUNTERS = """
import random
from collections import Counter
def f(x):
    if x == 'ab':
        return [[[[[]]]]] * {prefill}
    out = []
    for i in range(4096):
        c = Counter({{k: 1 for k in range(23)}}); c[99] = i
        out.append(c)
    random.seed(1); random.shuffle(out)
    return out
"""
PAIRS = """
import random
def f(x):
    out = [[0, [[[[]]] for _ in range(59)] + [i]] for i in range(1365)]
    random.seed(1); random.shuffle(out)
    return out
"""


def counters(n: int = 4096, keys: int = 24) -> list[Counter]:
    out = []
    for i in range(n):
        c = Counter({k: 1 for k in range(keys - 1)})
        c[99] = i
        out.append(c)
    random.Random(1).shuffle(out)
    return out


def pairs() -> list:
    out = [[0, [[[[]]] for _ in range(59)] + [i]] for i in range(1365)]
    random.Random(1).shuffle(out)
    return out


def judged(assertion: str, value: object) -> tuple[tuple[bool, str], float]:
    """(passed, detail) of one assert whose calls of f all return `value` through the wire, and the CPU the
    judging took (decoding included), with the verifier's own budget."""
    tests = parse_reference(json.dumps({"asserts": [assertion], "entry": "f"}))
    wire = encode(value)
    start = time.thread_time()
    with Budget():
        verdict = judge_asserts(tests, lambda call: CallResult(True, decode(wire), 1))[0]
    return verdict, time.thread_time() - start


# ---------------------------------------------------------------- the weight: what a comparison walks
def test_a_counter_weighs_its_keys_and_its_python_comparison():
    items = counters()
    assert order_weight(items) > 4096 * 24 * 4  # was 4096: a Counter was one item
    assert order_weight([Counter("ab"), Counter("a")]) <= FREE_WEIGHT  # small Counters still sort free


def test_counters_are_counted_however_deep_they_are_wrapped():
    # `[[[[c1]]]] < [[[[c2]]]]` compares c1 with c2 four times with `==`, then once with `<` (0.55 s sorting 4,096
    # of them, before): the walk goes on past 4 levels (the wire carries 100), and what lies deeper counts more
    bare = counters()
    wrapped = [[[[[c]]]] for c in bare]
    assert order_weight(wrapped) == 4096 * (1 + 1 + 2 + 3 + 4) + 5 * (order_weight(bare) - 4096)


def test_the_walk_has_no_depth_cap_and_stops_at_its_limit():
    deep: list = [Counter({k: 1 for k in range(24)})]
    for _ in range(300):  # deeper than the harness's encoder goes: a line the candidate writes may be
        deep = [deep]
    assert order_weight([deep, deep]) > 300 * 300
    cyclic: list = []
    cyclic.append(cyclic)  # a check program can build one: each level counts more, so the limit ends it
    assert 1000 < order_weight([cyclic, cyclic], limit=1000) < 1000 + 2 * 100


def test_a_level_is_walked_whatever_its_first_item_is():
    items = pairs()
    # 1365 pairs, their 2 elements each, the 60 items of each long list (counted twice: 2 levels down), the one item
    # of each [[[]]] (3 levels) and of its [[]] (4 levels)
    assert order_weight(items) == 1365 * (1 + 2 + 60 * 2 + 59 * 3 + 59 * 4)  # was 3 * 1365: stopped at the 0
    assert order_weight([1, [2, 3]]) == 4 and order_weight([[1], 2]) == 3 and order_weight([1, [[2]]]) == 5


# ---------------------------------------------------------------- in this process, without a sandbox
@pytest.mark.parametrize("value", [counters(), pairs(), [[[[[c]]]] for c in counters()]],
                         ids=["counters", "zero_long_pairs", "counters_five_deep"])
def test_the_reported_sorts_are_refused_before_they_run(value):
    best = min(judged(ANAGRAM, value)[1] for _ in range(3))
    (passed, detail), _ = judged(ANAGRAM, value)
    assert passed is False and "CPU budget" in detail, detail
    # decoding and the walk only: the sort never ran (it takes seconds). 1.5x the parent's budget: on a slower machine
    # of the CI kind, in the full suite, the walk alone took 0.101-0.103 s against 0.1 (2026-11-29)
    assert best < 1.5 * PARENT_CPU_S, f"{best:.3f} s"


@pytest.mark.parametrize("assertion, value", [
    ("assert sorted(f(1)) == [Counter('a'), Counter('ab')]", [Counter("ab"), Counter("a")]),
    ("assert f('listen') == Counter('silent')", Counter("silent")),
    ("assert sorted(f(1))[0] == [0, [0]]", [[i % 7, [i]] for i in range(2999, -1, -1)]),
    ("assert max(f(1)) == (999, 'x')", [(i, "x") for i in range(1000)]),
    ("assert f(1) == [Counter({1: 2})] * 50", [Counter({1: 2}) for _ in range(50)]),
    ("assert sorted(f(1)) == sorted(f(1))", [[i % 3, "ab" * 5, (i, i)] for i in range(2000)]),
], ids=["small_counters", "counter_equality", "zero_int_pairs", "max_tuples", "list_of_counters", "nested_rows"])
def test_honest_sorts_and_comparisons_still_pass(assertion, value):
    assert judged(assertion, value)[0] == (True, "")


# ---------------------------------------------------------------- through the verifier, with the sandbox
@pytest.fixture(scope="module")
def verify():
    _ = probe()  # cached; the `sandbox` mark decides skip or fail
    from rlvr.verifiers.code.verifier import CodeVerifier
    verifier = CodeVerifier(mode="all", sandbox=SandboxConfig(time_limit_s=30.0))
    verifier.verify("```python\ndef f(x):\n    return x\n```", json.dumps({"asserts": ["assert f(1) == 1"]}))

    def run(code: str, asserts: list[str], runs: int = 3):
        cpus, verdicts = [], []
        for _ in range(runs):
            start = time.thread_time()
            verdicts.append(verifier.verify(f"```python\n{code}\n```", json.dumps({"asserts": asserts})))
            cpus.append(time.thread_time() - start)
        return min(cpus), verdicts
    return run


@pytest.mark.sandbox
@pytest.mark.parametrize("code, asserts", [
    (COUNTERS.format(prefill=0), [ANAGRAM]),
    (COUNTERS.format(prefill=90000), ["assert f('ab') == ['ab', 'ba']", ANAGRAM]),
    (PAIRS, ["assert sorted(f('x')) == [1, 2, 3]"]),
], ids=["counters", "counters_after_a_0_9_mb_result", "zero_long_pairs"])
def test_the_reproducer_stays_under_the_guarantee(verify, code, asserts):
    cpu, verdicts = verify(code, asserts)
    assert all(v.outcome != Outcome.CORRECT and v.score < 1 for v in verdicts), verdicts[0].detail
    assert cpu < MARGIN_S < GUARANTEE_S, f"{cpu:.3f} s of parent CPU ({verdicts[0].detail[:200]})"


@pytest.mark.sandbox
def test_honest_counter_programs_still_pass(verify):
    code = ("from collections import Counter\ndef f(word):\n    return [Counter(w) for w in sorted(set(word))]\n"
            "def g(word):\n    return Counter(word)")
    asserts = ["assert sorted(f('listen'), key=len) == [Counter(c) for c in 'eilnst']",
               "assert sorted(g('listen')) == sorted('silent')",
               "assert g('listen') == g('silent') == Counter('tinsel')",
               "assert sorted([g('ab'), g('a')]) == [Counter('a'), Counter('ab')]"]
    cpu, verdicts = verify(code, asserts, runs=1)
    assert verdicts[0].outcome == Outcome.CORRECT and verdicts[0].score == 1, verdicts[0].detail


def test_comparisons_and_membership_of_containers_are_charged(monkeypatch):
    # `==`, `<` and `in` are one C call each too, running Counter's Python comparisons throughout
    from rlvr.verifiers.code import decimals
    asked: list[float] = []
    monkeypatch.setattr(decimals, "check", asked.append)
    a, b = counters(), counters()
    decimals.compare_bound("Eq", a, b)
    decimals.member_bound(a[0], b)
    decimals.compare_bound("Eq", a, b[:10])  # lists of different lengths: `==` answers at once, free
    decimals.compare_bound("Lt", [1, 2], [3])  # small: free
    both = order_weight([a, b]) - 2  # both sides' elements, each Counter's keys two levels down (`<` walks them twice)
    member = order_weight(b) + len(b) * (order_weight([a[0]]) - 1)  # the list, and the item once per list item
    assert both > 2 * 4096 * 24 * 4
    assert asked == [pytest.approx(both * decimals.SCAN_S), pytest.approx(member * decimals.SCAN_S)]
