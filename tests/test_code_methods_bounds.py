"""Mutation follow-up: the parent's methods on plain data (code/methods.py) are bounded before they run
and leave their receiver as Python would; dict displays and nested comprehensions in asserts evaluate as Python
does (code/evaluate.py); an assert's failure detail is cut where reference.py says, and short() shows nested
containers to reprlib's depth (reference._Unsorted).

Sizes are chosen around values.MAX_ITEMS (1,000,000) so that each case is cheap whether or not its bound holds.
"""
from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from code_judging import judge_function as judge
from rlvr.verifiers.code.budget import Budget, Failed, OverBudget, produced
from rlvr.verifiers.code.methods import attribute
from rlvr.verifiers.code.reference import short


# ---------------------------------------------------------------- methods.BoundMethod
def test_replace_is_refused_before_it_is_built_and_allowed_at_the_bound():
    # 1,000 'a's each replaced by 1,001 'b's would be 1,001,000 items: refused by the replace bound itself (its
    # message), before the string exists; by 1,000 'b's it is exactly MAX_ITEMS, which is allowed (> fails)
    with Budget(10.0):
        with pytest.raises(Failed, match=r"replace\(\) result is over the 1000000 bound"):
            attribute("a" * 1000, "replace")("a", "b" * 1001)
        assert attribute("a" * 1000, "replace")("a", "b" * 1000) == "b" * 1_000_000
        # an empty old string inserts `new` len + 1 times: 999 + 1 = 1,000 times 1,001 is over the bound too
        with pytest.raises(Failed, match=r"replace\(\) result"):
            attribute("a" * 999, "replace")("", "b" * 1001)


def test_only_sort_pays_for_ordering_mixed_numbers():
    # with a Decimal seen in the completion, ordering a list that holds containers is paid for before the C call:
    # 1,000,000 * log2(1,000,000) * 5e-7 s = about 10 s, over this 5 s budget, so sort() fails at once. count()
    # orders nothing (about 20 ms here) and must not be charged for a sort it does not do.
    items = [[0]] * 1_000_000
    with Budget(5.0):
        produced(Decimal(1))
        assert attribute(items, "count")([0]) == 1_000_000
        assert attribute(items, "index")([0]) == 0
        with pytest.raises(OverBudget):
            attribute(items, "sort")()


@pytest.mark.parametrize("receiver,method,items,expected", [
    ({1}, "update", "23", {1, "2", "3"}),  # a keyed receiver: its new keys are hashed first
    (Counter("a"), "update", "ab", Counter({"a": 2, "b": 1})),
    ({}, "update", ["k0", "k1"], {"k": "1"}),  # pairs: the keys are their first items ('k', then 'k' again)
    ([1], "extend", "23", [1, "2", "3"]),
])
def test_growing_from_a_generator_uses_every_item(receiver, method, items, expected):
    # a generator can be read once: _grown must materialise it before reading its keys for the bounds, or the
    # method itself gets an exhausted iterator and adds nothing (expected values: Python's own set/Counter/list)
    with Budget(10.0):
        assert attribute(receiver, method)(x for x in items) is None
    assert receiver == expected


def test_a_list_grown_past_the_bound_is_refused_before_it_grows():
    # 600,000 + 600,000 items is over MAX_ITEMS: the growth bound counts every item of the list's new items and
    # refuses the call before it runs, so the receiver is left as it was
    receiver = [0] * 600_000
    with Budget(10.0):
        with pytest.raises(Failed, match="a container grown to 1200000 items is over the 1000000 bound"):
            attribute(receiver, "extend")([1] * 600_000)
    assert len(receiver) == 600_000
    pairs = {}
    with Budget(10.0):  # a dict's new keys are the pairs' first items: [(k, 0)] grows it by one key each
        attribute(pairs, "update")([(1, 0), (2, 0)])
    assert pairs == {1: 0, 2: 0}


# ---------------------------------------------------------------- evaluate.Evaluator
def test_a_dict_display_unpacks_a_mapping_in_its_place():
    # {**f(1), 'b': 2}: the unpacked items first, then the later key; {'a': 0, **f(1)} lets the unpacked value
    # win over the earlier key (Python's own results: {'a': 1, 'b': 2} and {'a': 1})
    outcomes = judge(["assert {**f(1), 'b': 2} == {'a': 1, 'b': 2}", "assert {'a': 0, **f(1)} == {'a': 1}"],
                     lambda n: {"a": n})
    assert outcomes == [(True, ""), (True, "")]


def test_a_comprehension_runs_every_one_of_its_loops():
    # two and three `for` clauses: every clause is a loop of its own (Python: [0, 1, 10, 11] and 8 triples)
    outcomes = judge(["assert [x * 10 + y for x in f(2) for y in range(2)] == [0, 1, 10, 11]",
                      "assert len([(x, y, z) for x in f(2) for y in f(2) for z in f(2)]) == 8",
                      "assert {(x, y) for x in f(2) for y in range(x)} == {(1, 0)}"],
                     lambda n: list(range(n)))
    assert outcomes == [(True, ""), (True, ""), (True, "")]


# ---------------------------------------------------------------- reference: the failure detail
PAD = " and True" * 12  # makes each assert below longer than 80 characters without changing its value


@pytest.mark.parametrize("assertion,why", [
    (f"assert 1 / f(0) == 1{PAD}", ": raised ZeroDivisionError: division by zero"),  # an exception
    (f"assert len('ab' * f(10 ** 6)) > 0{PAD}", ": repetition to 2000000 items is over the 1000000 bound"),  # Failed
    (f"assert f(0) == 1{PAD}", ": got 0"),  # a false assert
])
def test_a_failed_asserts_detail_starts_with_its_first_80_characters(assertion, why):
    assert len(assertion) > 81
    assert judge([assertion], lambda n: n) == [(False, assertion[:80] + why)]


def test_an_exceptions_message_is_cut_to_120_characters():
    # KeyError's message is the key's repr: 202 characters for 200 k's, cut to its first 120
    key = "k" * 200
    [(passed, why)] = judge(["assert {'a': 1}[f(0)] == 1"], lambda n: key)
    assert (passed, why) == (False, "assert {'a': 1}[f(0)] == 1: raised KeyError: " + repr(key)[:120])


@pytest.mark.parametrize("value,shown", [
    # reprlib's depth is 4: a container reached at depth 0 is shown as `...`, whatever its size (hand-derived,
    # as reprlib.Repr shows lists: [[[[...]]]] for five nested lists)
    ([[[[{1: 2, 3: 4}]]]], "[[[[{...}]]]]"),
    ([[[[{1}]]]], "[[[[{...}]]]]"),
    # a dict's keys and values are one level down from the dict
    ({((((1,),),),): 2}, "{((((...),),),): 2}"),
    ({2: ((((1,),),),)}, "{2: ((((...),),),)}"),
    # a set's items too
    ({frozenset({frozenset({frozenset({frozenset({1})})})})},
     "{frozenset({frozenset({frozenset({frozenset({...})})})})}"),
    ({1: 2, 3: 4}, "{1: 2, 3: 4}"),  # all shown: no `...`
])
def test_short_shows_nested_containers_to_reprlibs_depth(value, shown):
    assert short(value, 200) == shown
