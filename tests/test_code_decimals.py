"""The parent's CPU with Decimals mixed with other numbers,
failure details and io cases. Decimal == int converts the int (5.4 ms at 65,536 bits), Decimal < float the float
(3 us for a subnormal), a non-integral Decimal power runs at the base's full length: single C calls the budget's
clock checks cannot interrupt, so they are paid for or bounded before they run.

Values come through the wire (encoded, then decoded inside the budget) as a result line would, without a sandbox;
the io and end-to-end tests use the sandbox.
"""
from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.code.budget import Budget, OverBudget
from rlvr.verifiers.code.evaluate import CallResult, CandidateCall
from rlvr.verifiers.code.harness import read_reply
from rlvr.verifiers.code.reference import judge_asserts, parse_reference, short
from rlvr.verifiers.code.sandbox import SandboxConfig
from rlvr.verifiers.code.wire import decode, encode

P = (1 << 61) - 1  # ints k * P + c hash to c, and so do Decimals of the same value


def refs(*asserts: str) -> str:
    return json.dumps({"asserts": list(asserts), "entry": "f"})


def judge_wire(reference: str, wire: object, budget_s: float = 0.1) -> tuple[list[tuple[bool, str]], float]:
    """(outcomes, this thread's CPU s) when every call of f returns the value `wire` decodes to."""
    tests = parse_reference(reference)
    start = time.thread_time()
    with Budget(budget_s):
        outcomes = judge_asserts(tests, lambda call: CallResult(True, decode(wire), 1))
    return outcomes, time.thread_time() - start


def colliding_line(tag: str) -> bytes:
    """A result line: 16 Decimals and 16 65,061-bit ints on one hash (tag "s": a set, "d": a dict's keys), written
    as JSON by hand: building that set here would cost what the attack costs."""
    decimals = [{"dec": str(12345 + j * P)} for j in range(16)]
    ints = [{"i": hex(12345 + P * ((1 << 65000) + j))} for j in range(16)]
    items = decimals + ints if tag == "s" else [[k, 0] for k in decimals + ints]
    return json.dumps({"n": 0, "ok": True, "value": {tag: items}, "done": 1}).encode()


@pytest.mark.parametrize("tag", ["s", "d"], ids=["set", "dict"])
def test_decimals_and_big_ints_sharing_a_hash_are_paid_before_the_set_is_built(tag):
    # decoding this line built the set in one C call, 16 * 16 Decimal == int comparisons of 5.4 ms:
    # 1.95 s (dict: 1.41 s) of parent CPU through the verifier. Each (Decimal, big int) pair is now paid as its
    # second member arrives (budget.Budget.number): 25 ms of this thread here, then the line is refused
    start = time.thread_time()
    with Budget(0.1), pytest.raises(OverBudget, match="CPU budget"):
        read_reply(colliding_line(tag), 0, CandidateCall("f", [["call", [1], []]]))
    assert time.thread_time() - start < 0.2


def test_honest_decimals_sets_and_big_ints_still_pass():
    # a 20,000-bit int and a few Decimals: 0.6 ms a pair (each call decodes them anew, and its pairs are paid anew)
    big = (1 << 20000) + 7
    value = [{Decimal("1.5"), 3, 2 ** 100}, Decimal("2.25"), big, {Decimal(1): "a", 2: "b"}]
    outcomes, cpu = judge_wire(refs("assert f(1) == [{Decimal('1.5'), 3, 2 ** 100}, Decimal('2.25'), "
                                    "2 ** 20000 + 7, {Decimal(1): 'a', 2: 'b'}]",
                                    "assert sorted(f(1)[0]) == [Decimal('1.5'), 3, 2 ** 100]",
                                    "assert max(f(1)[0]) == 2 ** 100 and min(f(1)[0]) == Decimal('1.5')",
                                    "assert f(1)[1] ** Decimal('0.5') == Decimal('1.5')"), encode(value))
    assert outcomes == [(True, "")] * 4, outcomes
    assert cpu < 0.1


@pytest.mark.parametrize("base", [Decimal("9" * 18999), (1 << 65000) + 1], ids=["decimal_base", "int_base"])
def test_a_decimal_power_of_a_long_base_is_refused_before_computing(base):
    # f(1) ** Decimal('0.5') with 18,999 nines took 8.2 s of parent CPU (a 3,000-digit base 0.35 s)
    outcomes, cpu = judge_wire(refs("assert f(1) ** Decimal('0.5') == 3"), encode(base))
    assert outcomes[0][0] is False and "400-digit bound" in outcomes[0][1], outcomes
    assert cpu < 0.05
    # a base of up to 400 digits is still evaluated (0.8 ms here)
    outcomes, _ = judge_wire(refs("assert f(1) ** Decimal('0.5') > 0"), encode(Decimal("9" * 400)))
    assert outcomes == [(True, "")], outcomes


MIXED = [x for i in range(32000) for x in (Decimal(i), 5e-324 * (i + 1))]  # Decimals and subnormal floats


@pytest.mark.parametrize("assertion", ["assert sorted(f(1)) == [1]", "assert max(f(1)) == 2",
                                       "assert f(1).sort() is None and False"], ids=["sorted", "max", "list_sort"])
def test_sorting_decimals_with_floats_is_paid_before_it_runs(assertion):
    # sorted() of these 64,000 items took 0.28 s of parent CPU, max() 0.15 s, in one C call each;
    # n * log2(n) * 0.5 us (n * 3 us for max) is now charged first (decimals.order_bound): about 70 ms here,
    # most of it decoding the line
    outcomes, cpu = judge_wire(refs(assertion), encode(MIXED))
    assert outcomes[0][0] is False and "CPU budget" in outcomes[0][1], outcomes
    assert cpu < 0.2


def test_failure_details_do_not_sort_a_result():
    # reprlib sorted a whole set or dict to show four of its keys: 0.41 s of parent CPU for a set of 30
    # Decimals and 30 65,000-bit ints, 0.18 s for 30,000 Decimals and 30,000 subnormal floats. Shown unsorted now
    values = [{Decimal(j) for j in range(1, 31)} | {(1 << 65000) + j for j in range(30)},
              {x: 0 for x in [Decimal(j) for j in range(1, 31)] + [(1 << 65000) + j for j in range(30)]},
              set(MIXED[:60000])]
    start = time.thread_time()
    texts = [short(v) for v in values]
    assert time.thread_time() - start < 0.02, texts
    assert short({1, 2, 3}) == "{1, 2, 3}" and short(set()) == "set()" and short({"a": [1, {2}]}) == "{'a': [1, {2}]}"
    assert short(set(range(10))) == "{0, 1, 2, 3, 4, 5, ...}"


@pytest.mark.sandbox
def test_io_output_that_is_not_utf8_is_refused_without_decoding_it(code_verifier):
    # 100 io cases each printing 1 MiB of 0xff cost 1.13 s of parent CPU (decoded with
    # errors="replace", 8 ms a case); now refused undecoded: 0.43 s for 100 under load, honest 0.15 s
    cases = [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(10)]
    flood = 'import sys\nsys.stdout.buffer.write(b"\\xff" * (1 << 20))\n'
    start = time.process_time()
    verdict = code_verifier.verify(f"```python\n{flood}```", json.dumps({"io": cases}))
    cpu = time.process_time() - start
    assert verdict.score == 0.0 and "not UTF-8" in verdict.detail, verdict
    assert cpu < 0.1
    honest = code_verifier.verify("```python\nprint(input() + ' é')\n```",
                                  json.dumps({"io": [{"input": "1\n", "output": "1 é\n"}]}))
    assert honest.outcome is Outcome.CORRECT, honest


@pytest.fixture
def code_verifier():
    from rlvr.verifiers.code.verifier import CodeVerifier
    return CodeVerifier(sandbox=SandboxConfig())


def test_an_io_case_reads_no_more_output_than_could_match(code_verifier, monkeypatch):
    """Output more than twice the expected size plus 64 KiB cannot normalise to it, so it is not read: 100 cases
    printing 1 MiB each cost the parent as much as 100 honest ones (0.15 s here; 0.34 s when all was read). A large
    expected output raises the cap with it."""
    import rlvr.verifiers.code.verifier as verifier_module

    caps = []
    real = verifier_module.run_sandboxed
    monkeypatch.setattr(verifier_module, "run_sandboxed",
                        lambda code, stdin, config: caps.append(config.max_output_bytes) or real(code, stdin, config))
    flood = code_verifier.verify('```python\nprint("a" * (1 << 20))\n```', json.dumps({"io": [{"input": "",
                                                                                          "output": "1\n"}]}))
    assert flood.score == 0.0 and caps == [2 * 2 + (64 << 10)]
    big = "x" * 300_000
    honest = code_verifier.verify('```python\nprint("x" * 300_000)\n```',
                                  json.dumps({"io": [{"input": "", "output": big + "\n"}]}))
    assert honest.outcome is Outcome.CORRECT and caps[-1] == 2 * 300_001 + (64 << 10), honest
