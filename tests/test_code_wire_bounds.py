"""Mutation testing: the wire's exact edges, on both sides, without a sandbox.

The harness's encoder (code/harness_main.py, run here in this process) and the parent's (code/wire.py) agree on
where a plain int ends (|x| < 2**53, wire.py's docstring) and how deep a value may nest (depth 100); the parent's
decoder refuses every malformed tagged value with ValueError (a result line that carries one is then unreadable,
never a crash), and bounds a decoded Decimal's text and a range result by the bytes the wire would spend.
"""
from __future__ import annotations

import json
from collections import defaultdict
from fractions import Fraction

import pytest

from rlvr.verifiers.code import harness_main
from rlvr.verifiers.code.budget import Budget, Failed
from rlvr.verifiers.code.chains import CandidateCall
from rlvr.verifiers.code.harness import Desync, read_reply
from rlvr.verifiers.code.stdtypes import MAX_DECIMAL_DIGITS, decimal
from rlvr.verifiers.code.values import check_range
from rlvr.verifiers.code.wire import decode, encode

HARNESS_ENCODE = harness_main._encoder()


def nest(levels: int) -> list:
    """`levels` lists, each holding the next; the innermost is empty."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("x,wire", [
    ((1 << 53) - 1, (1 << 53) - 1), (-(1 << 53) + 1, -(1 << 53) + 1),
    (1 << 53, {"i": "0x20000000000000"}), (-(1 << 53), {"i": "-0x20000000000000"}),
    (-(1 << 54) + 1, {"i": "-0x3fffffffffffff"}),
], ids=["max_plain", "min_plain", "two_53", "minus_two_53", "minus_two_54_plus_1"])
def test_both_encoders_send_ints_plain_only_below_two_to_the_53(x, wire):
    # 2 ** 53 = 0x20000000000000; 2 ** 54 - 1 = 0x3fffffffffffff (hand)
    assert HARNESS_ENCODE(x, 0) == wire
    assert encode(x) == wire
    assert decode(wire) == x


def test_both_encoders_allow_depth_100_and_no_more():
    # the outermost list is at depth 0, so 101 nested lists put the innermost at 100 (allowed), 102 at 101
    assert HARNESS_ENCODE(nest(101), 0) == nest(101)
    assert encode(nest(101)) == nest(101)
    with pytest.raises(ValueError, match="too deep"):
        HARNESS_ENCODE(nest(102), 0)
    with pytest.raises(Failed, match="nested too deeply"):
        encode(nest(102))
    # a tuple's items, a dict's values and a Fraction's parts sit one level below it, as a list's items do
    assert encode((nest(100),)) == {"t": [nest(100)]}
    assert encode({1: nest(100)}) == {"d": [[1, nest(100)]]}
    with pytest.raises(Failed, match="nested too deeply"):
        encode((nest(101),))
    with pytest.raises(Failed, match="nested too deeply"):
        encode({1: nest(101)})


def forged_fraction(numerator: object, denominator: object) -> Fraction:
    """A Fraction whose parts a candidate overwrote (its slots are writable): the harness still encodes them."""
    x = Fraction(1, 2)
    x._numerator, x._denominator = numerator, denominator
    return x


def test_the_harness_bounds_a_fractions_parts_like_a_tuples_items():
    # a Fraction at depth 0 puts its parts at depth 1, as a tuple does its items: 100 nested lists there reach
    # depth 100 (encoded), 101 reach 101 (refused), whichever part holds them
    assert HARNESS_ENCODE((nest(100),), 0) == {"t": [nest(100)]}
    assert HARNESS_ENCODE(forged_fraction(1, nest(100)), 0) == {"q": [1, nest(100)]}
    assert HARNESS_ENCODE(forged_fraction(nest(100), 2), 0) == {"q": [nest(100), 2]}
    for value in ((nest(101),), forged_fraction(1, nest(101)), forged_fraction(nest(101), 2)):
        with pytest.raises(ValueError, match="too deep"):
            HARNESS_ENCODE(value, 0)
    assert HARNESS_ENCODE(Fraction(-(1 << 60), 3), 0) == {"q": [{"i": hex(-(1 << 60))}, 3]}


def test_a_decimals_text_may_be_twice_the_digit_bound():
    # MAX_DECIMAL_DIGITS is 19,000: a 19,000-digit Decimal with its sign is 19,001 characters, honest and in bound;
    # leading zeros add text but no digits, up to 38,000 characters in all
    assert MAX_DECIMAL_DIGITS == 19_000
    nines = "-" + "9" * 19_000
    assert decimal(nines).as_tuple() == (1, (9,) * 19_000, 0)  # sign 1 is negative; no digit dropped or rounded
    assert decode({"dec": nines}).as_tuple() == (1, (9,) * 19_000, 0)
    assert decimal("0" * 37_999 + "1") == 1
    with pytest.raises(ValueError, match="bad tagged value 'dec'"):
        decimal("0" * 38_000 + "1")
    with pytest.raises(Failed, match="more than 19000 digits"):
        decimal("9" * 19_001)
    for bad in ("abc", 5, None, ["1"]):
        with pytest.raises(ValueError, match="bad tagged value 'dec'"):
            decimal(bad)


@pytest.mark.parametrize("start,size,fits", [
    (1 << 51, 349_525, True), (1 << 51, 349_526, False),  # 52 bits: 3 bytes an item, 349,525 * 3 = 1,048,575
    (1 << 52, 38_836, True), (1 << 52, 38_837, False),  # 53 bits: 13 + 14 hex digits = 27 bytes, 38,836 * 27 =
    # 1,048,572 and 38,837 * 27 = 1,048,599, against the 1 MiB (1,048,576 bytes) of a result line
])
def test_a_range_result_stands_for_the_bytes_its_list_would_take(start, size, fits):
    r = range(start, start + size)
    check_range(r)  # as an argument or a reference's own range, only the item count bounds it
    if fits:
        check_range(r, result=True)
    else:
        with pytest.raises(Failed, match="over the 1048576 a result line carries"):
            check_range(r, result=True)


@pytest.mark.parametrize("wire", [{"dd": 5}, {"dd": [None]}, {"dd": [None, [], []]}, {"dd": "ab"},
                                  {"dd": {"t": [None, []]}}], ids=["int", "short", "long", "str", "tuple"])
def test_a_malformed_defaultdict_is_refused(wire):
    # [factory, pairs] and nothing else: a third item must not be ignored, a string not indexed
    with pytest.raises(ValueError, match="bad tagged value 'dd'"):
        decode(wire)
    line = json.dumps({"n": 0, "ok": True, "value": wire, "done": 1}).encode()
    with pytest.raises(Desync):
        read_reply(line, 0, CandidateCall("f", [["call", [1], []]]))


@pytest.mark.parametrize("wire", [
    {"i": 5}, {"b": 5}, {"ba": ["00"]}, {"q": [1, 0]}, {"q": [1.5, 2]}, {"q": [1, 2, 3]}, {"c": [1, 2]}, {"c": 1.5},
    {"r": [0, 5]}, {"r": "abc"}, {"dq": 5}, {"dq": [[1], -1]}, {"t": 5}, {"s": "ab"}, {"d": [[1]]}, {"k": 5},
    {"vk": 5}, {"vv": "ab"},
])
def test_every_malformed_tagged_value_is_a_value_error(wire):
    # ValueError, never TypeError or IndexError from indexing what is not there: the decoder's promise (decode)
    with pytest.raises(ValueError, match="bad tagged"):
        decode(wire)


def test_a_well_formed_defaultdict_is_read():
    plain = decode({"dd": [None, []]})
    assert type(plain) is defaultdict and plain.default_factory is None and plain == {}
    counts = decode({"dd": ["int", [["a", 2]]]})
    assert counts == {"a": 2} and counts["b"] == 0


@pytest.mark.parametrize("items", [[[]], [5], [[1]], [[1, 2], 7], [{"t": [1, 2]}]],
                         ids=["empty_pair", "int", "one_item", "pair_and_int", "tuple"])
def test_a_malformed_items_view_is_refused(items):
    # each item of a dict_items is a [key, value] list: anything else is a bad view (ValueError), whatever it is
    for tag in ("vi", "ovi"):
        with pytest.raises(ValueError, match="bad tagged view"):
            decode({tag: items})
        line = json.dumps({"n": 0, "ok": True, "value": {tag: items}, "done": 1}).encode()
        with pytest.raises(Desync):
            read_reply(line, 0, CandidateCall("f", [["call", [1], []]]))


def test_an_items_view_bounds_its_keys_hashes():
    # ints k * (2 ** 61 - 1) all hash to 0: 33 different keys on one hash are over MAX_HASH_COLLISIONS (32)
    p = (1 << 61) - 1
    assert decode({"vi": [[1, 2], [3, 4]]}) == {1: 2, 3: 4}.items()
    with pytest.raises(Failed, match="share one hash"):
        decode({"vi": [[k * p, 0] for k in range(33)]})
    assert len(decode({"vi": [[k * p, 0] for k in range(32)]})) == 32


def test_arguments_changed_are_accepted_only_for_a_calls_own_arguments():
    # "after" entries name [op index, position or keyword, value]; the op must be a call with that argument
    def reply(after: list) -> bytes:
        return json.dumps({"n": 0, "ok": True, "value": 1, "done": 1, "after": after}).encode()
    keyword = CandidateCall("f", [["call", [], [["xs", [9]]]]])  # f(xs=[9])
    assert read_reply(reply([[0, "xs", [1]]]), 0, keyword).after == ((0, "xs", [1]),)
    method = CandidateCall("f", [["attr", "m"], ["call", [[1], 2], []]])  # f.m([1], 2)
    assert read_reply(reply([[1, 0, [5]]]), 0, method).after == ((1, 0, [5]),)
    for bad in ([[0, 0, [5]]], [[1, 2, [5]]], [[2, 0, [5]]], [[-1, 0, [5]]], [[1, "ys", [5]]], [[1, 0]], [7]):
        with pytest.raises(Desync, match="malformed"):
            read_reply(reply(bad), 0, method)
    with pytest.raises(Desync, match="malformed"):
        read_reply(reply([[0, "ys", [1]]]), 0, keyword)


def test_honest_values_round_trip_at_the_edges():
    # a budget active, as when the parent reads a result line: the edges above decode to equal values
    with Budget(10.0):
        for value in ((1 << 53) - 1, 1 << 53, -(1 << 53), Fraction(-(1 << 60), 3), nest(101)):
            assert decode(encode(value)) == value
