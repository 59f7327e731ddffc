"""Standard-library results cross the wire and compare as Python compares them; subclasses keep their
class; and each new wire type resists a forged subclass, a huge value and a value that lies about its type.

The first half needs no sandbox (code/wire.py and code/stdtypes.py on their own); the second runs candidates in
the sandbox, each honest result with a wrong variant that Python also calls wrong.
"""
from __future__ import annotations

import json
from collections import Counter, OrderedDict, defaultdict, deque
from decimal import Decimal
from fractions import Fraction

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.code.budget import Failed
from rlvr.verifiers.code.sandbox import SandboxConfig
from rlvr.verifiers.code.stdtypes import SUBCLASSES, Constant, UnknownFactory, kind
from rlvr.verifiers.code.values import binary, check_range, check_size
from rlvr.verifiers.code.wire import decode, encode

NEW_VALUES = [range(3), range(10, 0, -3), deque([1, 2]), deque([1, 2], 5), Decimal("0.1"), Decimal("-1.5E+3"),
              bytearray(b"ab"), defaultdict(int, {"a": 1}), defaultdict(list), defaultdict(None, {1: 2}),
              {1: "x"}.keys(), {1: [2]}.values(), {1: 2}.items(), OrderedDict(a=1).keys(), OrderedDict(a=1).values(),
              OrderedDict(a=1).items()]


@pytest.mark.parametrize("value", NEW_VALUES, ids=lambda v: type(v).__name__)
def test_new_types_round_trip_with_their_type(value):
    back = decode(encode(value))
    assert type(back) is type(value)
    if type(value) is not type({}.values()) and type(value) is not type(OrderedDict().values()):
        assert back == value  # views of values never compare equal in Python, even to themselves
    assert str(back) == str(value) if type(value) is Decimal else list(back) == list(value)


def test_new_types_compare_as_python():
    # Python: range == range by elements, never == list; a deque is not a list; bytearray == bytes; views of keys
    # and items are set-like; values views equal nothing; a defaultdict equals the dict with its items
    assert decode(encode(range(0, 6, 2))) == range(0, 5, 2) and decode(encode(range(3))) != [0, 1, 2]
    assert decode(encode(deque([1]))) != [1] and decode(encode(bytearray(b"a"))) == b"a"
    assert decode(encode({1: 2}.keys())) == {1} and decode(encode({1: 2}.items())) == {(1, 2)}
    values = decode(encode({1: 2}.values()))
    assert values != values.mapping.values() and list(values) == [2]
    assert decode(encode(defaultdict(int, a=1))) == {"a": 1} and decode(encode(Decimal("0.1"))) != 0.1


def test_a_defaultdict_keeps_its_default():
    counts = decode(encode(defaultdict(int, a=1)))
    assert counts["missing"] == 0 and counts == {"a": 1, "missing": 0}  # the parent's own int, called here
    assert decode({"dd": ["list", []]})["x"] == [] and decode({"dd": [["=", 7], []]})["x"] == 7  # `lambda: 7`
    unknown = decode({"dd": ["?", [["a", 1]]]})  # the candidate's own factory (`lambda: [0]`): never guessed
    assert unknown["a"] == 1 and isinstance(unknown.default_factory, UnknownFactory)
    with pytest.raises(Failed, match="default_factory"):
        unknown["b"]


@pytest.mark.parametrize("base,content", [(list, [1]), (tuple, {"t": [1]}), (dict, {"d": [[1, 2]]}), (str, "s"),
                                          (int, 5), (float, 0.5), (bytes, {"b": "61"}), (set, {"s": [1]}),
                                          (frozenset, {"f": [1]}), (Counter, {"k": [["a", 1]]}),
                                          (OrderedDict, {"o": [["a", 1]]}), (deque, {"dq": [[1], None]}),
                                          (Fraction, {"q": [1, 3]}), (Decimal, {"dec": "1.5"}),
                                          (defaultdict, {"dd": ["int", []]}), (bytearray, {"ba": "61"})],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_a_subclass_arrives_as_a_subclass_of_its_base(base, content):
    # a list subclass passed `type(f(x)) is list`; now type() sees another class, isinstance() the base
    value = decode({"sub": content})
    assert type(value) is SUBCLASSES[base] and type(value) is not base and isinstance(value, base)
    assert kind(value) is base and value == decode(content)  # compared by its base's content, never by the candidate


@pytest.mark.parametrize("forged", [
    {"sub": True},  # bool has no subclasses
    {"sub": {"sub": [1]}},  # a subclass of the parent's own subclass
    {"sub": {"r": [0, 3, 1]}}, {"sub": {"vk": [1]}}, {"sub": {"it": [1]}}, {"sub": None},  # no subclasses either
    {"r": [0, 1.5, 1]}, {"r": [0, 5, 0]}, {"r": [0, 5]},  # not a range
    {"dq": [[1], -1]}, {"dq": ["ab", None]}, {"dq": [[1], 10 ** 7]},  # a negative or huge maxlen, items a str
    {"dec": "abc"}, {"dec": 1.5}, {"ba": 5}, {"ba": "zz"},
    {"dd": ["eval", []]}, {"dd": [["=", [0]], []]}, {"dd": [None, [[1]]]},  # unknown name, mutable default
    {"vi": [[1]]}, {"vk": [[1]]}, {"vv": 5},  # an item that is not a pair, an unhashable key
])
def test_a_value_that_lies_about_its_type_is_refused(forged):
    with pytest.raises((ValueError, TypeError)):
        decode(forged)


@pytest.mark.parametrize("huge", [
    {"r": [0, 10 ** 7, 1]},  # list(f(x)) would build it in one C call the budget cannot interrupt
    {"r": [0, {"i": hex(1 << 80)}, 1]},  # len() overflows
    {"r": [0, {"i": hex(1 << 65000)}, {"i": hex(1 << 64982)}]},  # 2 ** 18 items of 8 KB each: 2 GB as a list
    {"dec": "1e999999999"}, {"dec": "9" * 19_001},  # int(Decimal) would have a billion digits, or 63,000+ bits
    {"dec": "1" * 50_000},  # the text itself
])
def test_huge_new_values_fail_their_call(huge):
    with pytest.raises(ValueError, match="bound|bad tagged"):  # Failed is a ValueError: the line is refused
        decode(huge)


def test_subclass_values_get_the_bounds_of_their_base():
    # kind() makes the size bounds see an int subclass as an int: without it the power bound was skipped
    big = decode({"sub": 10 ** 6})
    with pytest.raises(Failed, match="to the power"):
        binary("Pow", 3, big)
    with pytest.raises(Failed, match="repetition"):
        binary("Mult", "ab", decode({"sub": 10 ** 9}))
    with pytest.raises(Failed, match="Decimal"):
        check_size(decode({"dec": "1e10000"}) * decode({"sub": {"dec": "1e10000"}}))  # 1E+20000
    assert isinstance(Constant(0), Constant) and encode(decode({"sub": [1, 2]})) == [1, 2]  # sent on as its base


# ---------------------------------------------------------------- end to end, in the sandbox
def asserts(*tests: str, **extra) -> str:
    return json.dumps({"asserts": list(tests), **extra})


STDLIB = ("from collections import deque, defaultdict, OrderedDict\nfrom decimal import Decimal\n"
          "def r(n):\n    return range(n)\ndef dq(n):\n    return deque(range(n), 5)\n"
          "def dec(s):\n    return Decimal(s) / 4\ndef counts(s):\n    d = defaultdict(int)\n    for c in s:\n"
          "        d[c] += 1\n    return d\ndef keys(n):\n    return {i: -i for i in range(n)}.keys()\n"
          "def items(n):\n    return OrderedDict((i, -i) for i in range(n)).items()\n"
          "def vals(n):\n    return {i: -i for i in range(n)}.values()\ndef ba(s):\n    return bytearray(s, 'ascii')\n")
STDLIB_ASSERTS = ["assert r(3) == range(3) and type(r(3)) is range", "assert dq(3) == deque([0, 1, 2])",
                  "assert dq(3) != [0, 1, 2]", "assert dec('0.4') == Decimal('0.1')",
                  "assert counts('aab')['z'] == 0", "assert counts('aab') == {'a': 2, 'b': 1}",
                  "assert keys(2) == {0, 1}", "assert items(2) == {(0, 0), (1, -1)}", "assert vals(2) != vals(2)",
                  "assert sorted(vals(3)) == [-2, -1, 0]", "assert ba('hi') == b'hi' and type(ba('hi')) is bytearray"]
WRONG_VARIANTS = {  # the same asserts; each of these functions returns what Python calls a different value
    "r": "def r(n):\n    return list(range(n))", "dq": "def dq(n):\n    return list(range(n))",
    "dec": "def dec(s):\n    return float(s) / 4", "counts": "def counts(s):\n    return {}",
    "keys": "def keys(n):\n    return list(range(n))", "items": "def items(n):\n    return [(0, 0), (1, -1)]",
    "vals": "def vals(n):\n    return [0, -1, -2][:n]", "ba": "def ba(s):\n    return s.encode()",
}


def _verify(code: str, reference: str):
    from rlvr.verifiers.code.verifier import CodeVerifier

    return CodeVerifier(sandbox=SandboxConfig(time_limit_s=5.0)).verify(code, reference)


@pytest.mark.sandbox
def test_standard_library_results_pass_as_in_python():
    verdict = _verify(STDLIB, asserts(*STDLIB_ASSERTS))
    assert (verdict.outcome, verdict.score) == (Outcome.CORRECT, 1.0), verdict.detail


@pytest.mark.sandbox
@pytest.mark.parametrize("name", sorted(WRONG_VARIANTS))
def test_a_different_type_fails_as_in_python(name):
    verdict = _verify(STDLIB + WRONG_VARIANTS[name], asserts(*STDLIB_ASSERTS))  # the later definition wins
    assert verdict.outcome is Outcome.WRONG and verdict.score < 1.0, verdict.detail


SUBCLASS = "class L(list):\n    pass\ndef f(n):\n    return L([n])\n"


@pytest.mark.sandbox
@pytest.mark.parametrize("code,reference,passed", [
    (SUBCLASS, asserts("assert type(f(1)) is list"), False),  # passed before
    (SUBCLASS, asserts("assert isinstance(f(1), list) and f(1) == [1] and type(f(1)) is not list"), True),
    ("class L(list):\n    def __eq__(self, o):\n        return True\ndef f(n):\n    return L([n])",
     asserts("assert f(1) == [2]"), False),  # a forged __eq__ never runs in the parent
    ("class S(str):\n    def __eq__(self, o):\n        return True\n    __hash__ = str.__hash__\n"
     "def f(n):\n    return S('x')", asserts("assert f(1) == 'y'", "assert f(1) in {'y'}"), False),
    ("from enum import IntEnum\nclass C(IntEnum):\n    RED = 1\ndef f(n):\n    return C.RED",
     asserts("assert f(0) == 1 and type(f(0)) is not int"), True),
    ("from collections import defaultdict\ndef f(n):\n    return defaultdict(lambda: 5)",
     asserts("assert f(0)['x'] == 5"), True),  # one immutable default, made once in the sandbox
    ("from collections import defaultdict\ndef f(n):\n    return defaultdict(lambda: [n])",
     asserts("assert f(0)['x'] == [0]"), False),  # a mutable default the parent cannot remake: fails, never guessed
])
def test_classes_are_seen_as_python_sees_them(code, reference, passed):
    verdict = _verify(code, reference)
    assert (verdict.outcome is Outcome.CORRECT) == passed, verdict.detail


# ---------------------------------------------------------------- bounds and copies
def test_a_range_result_stands_for_no_more_than_a_list_the_wire_carries():
    # 349,525 items of 3 bytes ("1, ") fill the 1 MiB result line; 1,000,000 small items would be a
    # 7 MB list, and 2 ** 63 + k items 29 bytes each ('{"i": "0x8000000000000000"}, ': 13 + 16 hex digits)
    assert decode({"r": [0, 349_000, 1]}) == range(349_000)
    for forged in ({"r": [0, 10 ** 6, 1]}, {"r": [{"i": hex(2 ** 63)}, {"i": hex(2 ** 63 + 40_000)}, 1]}):
        with pytest.raises(Failed, match="stands for a list"):  # catches wire._range without result=True
            decode(forged)
    # the word bound rounds up: 500,001 items of 127 bits are 1,000,002 words (the floor made them 500,001)
    with pytest.raises(Failed, match="word bound"):
        check_range(range(2 ** 126, 2 ** 126 + 500_001))
    check_range(range(2 ** 126, 2 ** 126 + 500_000))  # 1,000,000 words: at the bound, a range the parent may make


def test_an_iterator_nested_in_a_result_is_an_iterator():
    # it was a list subclass, so `[iter([1, 2])] == [[1, 2]]` passed; in Python it is False
    value = decode([{"it": [1, 2]}, {"t": [{"it": [3]}]}])
    assert value != [[1, 2], ([3],)] and not isinstance(value[0], list) and list(value[0]) == [1, 2]
    assert next(value[1][0]) == 3 and list(decode({"it": [4]})) == [4]  # at the top as well


def test_the_new_types_keep_what_makes_them_themselves():
    # M04: a defaultdict subclass keeps its factory ("b" reads 0, as the candidate's D(int) does)
    assert decode({"sub": {"dd": ["int", [["a", 1]]]}})["b"] == 0
    # M20: a deque's maxlen crosses the wire (deques compare equal whatever their maxlen, so check it)
    assert encode(deque([1, 2], 2)) == {"dq": [[1, 2], 2]} and decode(encode(deque([1, 2], 2))).maxlen == 2
    # M24: an int subclass gets the power bound of an int (the bound's _bits looked at type(), not kind())
    with pytest.raises(Failed, match="to the power"):
        binary("Pow", decode({"sub": {"i": hex(2 ** 65000 - 1)}}), 300)
    # M32: a forged keys view of 30,000 values sharing hash 0 is refused, as a dict's keys are (it took 3.9 s)
    modulus = (1 << 61) - 1
    with pytest.raises(Failed, match="share one hash"):
        decode({"vk": [{"i": hex(k * modulus)} for k in range(1, 30_000)]})


SUBCLASS_BASES = [  # (code, assert, passes): a subclass is read through its base type's own methods
    ("class I(int):\n    def __add__(self, o):\n        return 42\ndef f():\n    return I(5)", "f() == 42", False),
    ("class I(int):\n    def __add__(self, o):\n        return 42\ndef f():\n    return I(5)", "f() == 5", True),
    ("from decimal import Decimal\nclass D(Decimal):\n    def __str__(self):\n        return '42'\n"
     "def f():\n    return D('5')", "f() == 42", False),
    ("class S(str):\n    def __str__(self):\n        return 'forged'\ndef f():\n    return S('real')",
     "f() == 'forged'", False),
    ("class S(str):\n    def __str__(self):\n        return 'forged'\ndef f():\n    return S('real')",
     "f() == 'real'", True),
    # the arguments the parent sends are rebuilt in the sandbox with what made them: a deque's maxlen (M11), a
    # factory that returns one immutable value (M33), and a factory the parent cannot rebuild stays unknown (M28)
    ("from collections import deque\ndef f(d):\n    return d.maxlen", "f(deque([1, 2], 2)) == 2", True),
]


@pytest.mark.sandbox
@pytest.mark.parametrize("code,assertion,passed", SUBCLASS_BASES)
def test_a_subclass_is_read_through_its_base(code, assertion, passed):
    # catches harness_main._BASES reading through the subclass (x + 0, str(x), Decimal(str(x)): the override)
    # and the decoder's deque without its maxlen
    verdict = _verify(code, asserts(f"assert {assertion}"))
    assert (verdict.outcome is Outcome.CORRECT) == passed, verdict.detail


DEFAULTS = "from collections import defaultdict\n"


@pytest.mark.sandbox
@pytest.mark.parametrize("code,body,passed", [
    (DEFAULTS + "def f(d):\n    return defaultdict(lambda: 0, {'a': 1}) if d is None else d['missing']",
     "d = candidate(None)\nassert candidate(d) == 0", True),  # M33: the parent sends `lambda: 0` back as a factory
    (DEFAULTS + "def f():\n    return defaultdict(lambda: [], {'a': [1]})",
     "d = candidate()\ntry:\n    d['zz']\nexcept KeyError:\n    pass\nassert d['a'] == [1]", False),  # M28
])
def test_a_default_factory_crosses_the_wire_as_it_can(code, body, passed):
    # M28: a factory returning a mutable value is "?" (reading a missing key fails the test); as None, the read
    # raised KeyError, which the program caught, and it passed
    reference = json.dumps({"check": "def check(candidate):\n" + "".join(f"    {line}\n" for line in body.split("\n")),
                            "entry": "f"})
    verdict = _verify(code, reference)
    assert (verdict.outcome is Outcome.CORRECT) == passed, verdict.detail
