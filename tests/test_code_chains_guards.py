"""Mutation follow-up (batch g): lines of code/chains.py, code/check_guard.py and code/check_program.py that
no test told apart from a one-line change.

Candidate chains in asserts are judged with test_code_calls' in-process harness (the sandbox's own decoder, runner
and answerer on the test's code); check programs run against a fake session, as in test_code_guard_rewrite, whose
candidate is a plain Python function behind the wire encoding.
"""
from __future__ import annotations

import pytest

from code_judging import program
from code_judging import run_program as run
from rlvr.verifiers.code import check_guard
from rlvr.verifiers.code.budget import CHECK_EVERY, Failed
from rlvr.verifiers.code.check_guard import Guards, Stop
from rlvr.verifiers.code.check_program import parse_check
from rlvr.verifiers.code.evaluate import BadReference
from rlvr.verifiers.code.values import MAX_ITEMS
from test_code_calls import LOG, judge


# ---------------------------------------------------------------- chains.inert: a dict display
@pytest.mark.parametrize("assertion,python", [
    # by hand, Python's order: g(1) is called, then the dict {1: h(2)} is built (h called), then f: 'ghf'
    ("assert f(g(1), {1: h(2)}) == 'ghf'", True),
    ("assert f(g(1), {1: h(2)}) == 'hgf'", False),
    ("assert f(g(1), {'k': [h(2)]}) == 'ghf'", True),
])
def test_a_dict_whose_value_calls_the_candidate_is_not_quiet(assertion, python):
    # a dict display is quiet only when its keys are constants AND its values are quiet; a dict with constant keys
    # and a candidate call as a value is loud, so g(1) before it must run first (as a handle), not travel nested
    # in f's request after the dict was built here (that order is h, g, f)
    assert judge(LOG, assertion)[0] == [python]


def test_a_dict_whose_key_is_a_name_is_not_quiet():
    # keys that are names could be unhashable: not quiet either, even with quiet values. Python calls g(1), then
    # fails building {k: 1} (k is the list [1]), so f is never called and the log holds 'g'; the next assert
    # reads it through f: 'gf' (had the dict been built first, g would never have run: 'f')
    outcomes, sent = judge(LOG, "assert [f(g(1), {k: 1}) for k in [[1]]] == 0", "assert f(0) == 'gf'")
    assert outcomes == [False, True]
    assert [request["root"] for request in sent] == ["g", "f"]


# ---------------------------------------------------------------- chains._call_arguments: * and ** arguments
PAIR = "def pair(a, b=0):\n    return [a, b]\n"


@pytest.mark.parametrize("assertion,wire", [
    # a *list spreads into positional wire arguments, a **dict into [name, value] pairs (by hand from the call)
    ("assert pair(*[1, 2]) == [1, 2]", [["call", [1, 2], []]]),
    ("assert pair(**{'a': 1, 'b': 2}) == [1, 2]", [["call", [], [["a", 1], ["b", 2]]]]),
    ("assert pair(*[1], **{'b': 3}) == [1, 3]", [["call", [1], [["b", 3]]]]),
])
def test_spread_arguments_are_sent_as_python_passes_them(assertion, wire):
    outcomes, sent = judge(PAIR, assertion)
    assert outcomes == [True]
    assert sent == [{"root": "pair", "ops": wire}]


# ---------------------------------------------------------------- Guards.call: format()
def test_format_with_one_argument_is_formatted():
    # format(5) is '5' and format('ab') is 'ab' (an empty spec): the width bound looks at a spec only when one
    # was given
    assert run(program("assert format(candidate(5)) == '5'\nassert format(candidate('ab')) == 'ab'"),
               lambda x: x) == (True, "")


def test_format_with_a_huge_width_stops_even_when_caught():
    # a 7-digit width ('1000000d') is refused before the string is built, and Stop escapes `except Exception`
    source = program("try:\n    format(candidate(5), '1000000d')\nexcept Exception:\n    pass\n"
                     "assert candidate(0) == 0")
    passed, why = run(source, lambda x: x)
    assert passed is False and "format width or precision of 7+ digits" in why, why


# ---------------------------------------------------------------- _format_bound: %-formatting widths
@pytest.mark.parametrize("fmt", ["'%1000000d'", "b'%1000000d'", "'%.1000000f'"])
def test_a_percent_format_with_a_literal_huge_width_stops(fmt):
    # width 1,000,000 gives a string of exactly MAX_ITEMS characters, which the size check alone lets through: only
    # the spec's width bound (7 digits or more) stops it, str and bytes alike (bytes are read as latin-1)
    assert len("%1000000d" % 5) == MAX_ITEMS
    source = program(f"try:\n    s = {fmt} % candidate(5)\nexcept Exception:\n    pass\nassert candidate(0) == 0")
    passed, why = run(source, lambda x: x)
    assert passed is False and "format width or precision of 7+ digits" in why, why


def test_a_percent_format_with_a_small_width_is_formatted():
    # '%5d' % 42 is '   42' by hand: a width under the bound formats as Python does
    assert run(program("assert '%5d' % candidate(42) == '   42'"), lambda x: x) == (True, "")


# ---------------------------------------------------------------- Guards.iterate: budget checks all loop long
def test_a_long_loop_is_stopped_once_the_budget_is_spent(monkeypatch):
    # a fake budget (no clock): spent once the loop has consumed 3 * CHECK_EVERY items. The guard checks every
    # CHECK_EVERY items for as long as the loop runs, so it stops at the first check after that: item
    # 3 * CHECK_EVERY (0-based), with exactly 3 * CHECK_EVERY items consumed; a guard that checked only early on
    # would let the loop run through all of them
    consumed = []

    def check() -> None:
        if len(consumed) >= 3 * CHECK_EVERY:
            raise Failed("the budget is spent")

    monkeypatch.setattr(check_guard, "check", check)
    guards = Guards()
    with pytest.raises(Stop, match="the budget is spent"):
        for item in guards.iterate(range(100 * CHECK_EVERY)):
            consumed.append(item)
    assert len(consumed) == 3 * CHECK_EVERY
    assert guards.tripped == "the budget is spent"


def test_the_loop_checks_once_every_check_every_items(monkeypatch):
    # 10 * CHECK_EVERY items: checks at items 0, CHECK_EVERY, ..., 9 * CHECK_EVERY, ten in all (by hand)
    calls = []
    monkeypatch.setattr(check_guard, "check", lambda: calls.append(1))
    assert list(Guards().iterate(range(10 * CHECK_EVERY))) == list(range(10 * CHECK_EVERY))
    assert len(calls) == 10


# ---------------------------------------------------------------- parse_check: compile()'s ValueError
def test_a_program_the_rewrite_cannot_compile_is_a_bad_reference():
    # `case 1+2j:` parses, but the rewrite turns the pattern's 1+2j into a guard call, and compile() refuses a
    # call in a pattern with a ValueError ("patterns may only match literals ..."): parse_check must say it is a
    # bad reference, not let a bare ValueError out of reading the reference
    source = program("match candidate(1):\n    case 1+2j:\n        pass\n")
    with pytest.raises(BadReference, match="does not compile"):
        parse_check(source, "f")
