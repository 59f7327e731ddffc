"""Mutation follow-up: a check program's `x op= v` statements, unbound str methods and replace() go through
the bounds of code/check_guard.py exactly, and parse_check / run_check report what the program did wrong.

A fake stands in for the sandbox session, as in test_code_check_program: the candidate is a plain Python function
behind the wire encoding. Sizes are chosen around values.MAX_ITEMS (1,000,000) so that each case is cheap to run
whether or not the bound holds.
"""
from __future__ import annotations

import pytest

from code_judging import program
from code_judging import run_program as run
from rlvr.verifiers.code.check_program import parse_check
from rlvr.verifiers.code.evaluate import BadReference
from rlvr.verifiers.code.values import MAX_ITEMS


def identity(x):
    return x


# ---------------------------------------------------------------- x op= v
@pytest.mark.parametrize("body", [
    "x = candidate(1)\nx += 1\nassert x == 2",  # a name: x = x.__iadd__(1)
    "d = {'a': 1}\nd['a'] += candidate(1)\nassert d == {'a': 2}",  # a subscript
    "class C:\n    pass\nc = C()\nc.v = 1\nc.v *= candidate(3)\nassert c.v == 3",  # an attribute
    "xs = [candidate(1)]\nxs += [2]\nassert xs == [1, 2]",  # list += list, far under the bound
    "s = 'a'\ns += 'b' * candidate(2)\nassert s == 'abb'",
])
def test_an_augmented_assignment_still_assigns(body):
    # each statement is rewritten into a helper call that must still store the result (check_guard.Rewrite
    # .visit_AugAssign); the asserted values are what Python gives for the same lines (1 + 1, 1 + 1, 1 * 3, ...)
    assert run(program(body), identity) == (True, "")


@pytest.mark.parametrize("statement", ["x += len('ab' * candidate(1))",  # inside `x op= v`
                                       "x = len('ab' * candidate(1)) + 1",  # an operand of another operation
                                       "x = -(2 ** candidate(1) - 1)"])  # 2 ** 2,000,000: over MAX_INT_BITS
def test_an_operation_nested_in_another_is_bounded_too(statement):
    # 'ab' * 2,000,000 is 4,000,000 items, over MAX_ITEMS: an operation inside `x op= v` or inside another
    # operation must go through binary() like any other (the rewrite visits the children first); the program
    # catches Exception, which misses Stop, and the guard records the trip anyway
    source = program(f"x = 0\ntry:\n    {statement}\nexcept Exception:\n    pass\nassert candidate(0) == 0")
    passed, why = run(source, lambda n: 2 * MAX_ITEMS if n else 0)
    assert passed is False and "stopped" in why and "bound" in why, why


def test_an_augmented_concatenation_over_the_bound_is_refused_before_it_is_built():
    # 600,000 + 600,000 items: each side is under MAX_ITEMS, the sum over it; the inplace bound names the
    # concatenation (without it the result's size check would fail later, with another message)
    source = program("xs = [0] * candidate(1)\ntry:\n    xs += xs\nexcept Exception:\n    pass\n"
                     "assert candidate(0) == 0")
    passed, why = run(source, lambda n: 600_000 if n else 0)
    assert passed is False and "concatenation is over the 1000000 bound" in why, why


def test_an_augmented_power_over_the_bound_stops_even_when_caught():
    # 2 ** 10,000,000 has 10 million bits, over MAX_INT_BITS: the bound trips before the power is computed and
    # raises Stop; a Failed (a ValueError) would be swallowed by `except Exception` and the run would pass
    source = program("x = 2\ntry:\n    x **= candidate(1)\nexcept Exception:\n    pass\nassert candidate(0) == 0")
    passed, why = run(source, lambda n: 10 ** 7 if n else 0)
    assert passed is False and why.startswith("check(candidate) stopped: ") and "bit" in why, why


# ---------------------------------------------------------------- replace(), bound and unbound
def test_an_unbound_str_replace_is_bounded_on_its_receiver():
    # str.replace(s, 'a', new): s is the receiver (args[0]); 1,001 'a's each become 1,000 'b's: 1,001,000 items,
    # over MAX_ITEMS. Measured on `new` instead ('b' * 1000 holds no 'a') the bound would see nothing to replace.
    source = program("s = 'a' * candidate(1001)\ntry:\n    r = str.replace(s, 'a', 'b' * 1000)\n"
                     "except Exception:\n    pass\nassert candidate(0) == 0")
    passed, why = run(source, identity)
    assert passed is False and "replace() result is over the 1000000 bound" in why, why


@pytest.mark.parametrize("call", ["s.replace('a', 'b' * 1000)", "str.replace(s, 'a', 'b' * 1000)"])
def test_a_replace_exactly_at_the_bound_is_allowed(call):
    # 1,000 'a's, each replaced by 1,000 'b's: exactly MAX_ITEMS items, which the size bound allows (> MAX_ITEMS
    # fails); one 'a' more is 1,001,000 and fails (hand count)
    at = program(f"s = 'a' * candidate(1000)\nr = {call}\nassert len(r) == 1000000 and set(r) == {{'b'}}")
    assert run(at, identity) == (True, "")
    over = program(f"s = 'a' * candidate(1001)\nr = {call}")
    passed, why = run(over, identity)
    assert passed is False and "replace() result is over" in why, why


# ---------------------------------------------------------------- parse_check and the failure's detail
@pytest.mark.parametrize("source", [
    "def check(candidate):\n    candidate.__rlvr_call = 1",  # an attribute
    "def __rlvr_call(x):\n    return x\ndef check(candidate):\n    assert candidate(1) == 1",  # a def's name
    "def check(candidate, __rlvr_tick=None):\n    assert candidate(1) == 1",  # an argument
    "def check(candidate):\n    try:\n        candidate(1)\n    except Exception as __rlvr_e:\n        pass",
    # ^ an exception handler's name
    "import math as __rlvr_call\ndef check(candidate):\n    assert candidate(1) == 1",  # an import's alias
    "from math import sqrt as __rlvr_call\ndef check(candidate):\n    assert candidate(1) == 1",
    "def check(candidate):\n    global __rlvr_call\n    assert candidate(1) == 1",  # a global statement
])
def test_every_kind_of_name_with_the_reserved_prefix_is_refused(source):
    # names, attributes, definitions and handlers all name things in the program's namespace, where the
    # __rlvr_ helpers live: any of them could shadow or reach one (check_program.parse_check)
    with pytest.raises(BadReference, match="reserves"):
        parse_check(source, "f")


def test_a_failure_names_its_line_cut_to_120_characters_and_its_message_to_150():
    # a line of 160 characters whose assert fails with a message of 200: the detail shows the line's first 120
    # characters (stripped) and the message's first 150, both cut by hand below
    message = "m" * 200
    line = f"assert candidate(1) == 2, '{message}'"
    source = program(f"x = 1\n{line}")
    passed, why = run(source, identity)
    assert passed is False
    assert why == f"check(candidate) raised AssertionError: {message[:150]} at line 3: {line[:120]}", why
    assert len(line) > 120
