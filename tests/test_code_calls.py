"""Candidate calls: Python's evaluation order exactly, the
arguments a call changes in place, built-in methods on a returned copy, `entry` and a subclass's
methods in a chain.

The first half stands the harness's own functions (code/harness_main.py, run in this process) in for the sandbox:
the requests are the ones the session would send, answered by the code the sandbox would run; the second half runs
the real sandbox.
"""
from __future__ import annotations

import json

import pytest

from code_judging import in_process
from code_judging import judge_code as judge
from rlvr.types import Outcome
from rlvr.verifiers.code.budget import Budget, Failed
from rlvr.verifiers.code.chains import CandidateCall
from rlvr.verifiers.code.methods import attribute
from rlvr.verifiers.code.sandbox import SandboxConfig
from rlvr.verifiers.code.values import MAX_ITEMS
from rlvr.verifiers.code.wire import encode

LOG = ("log = []\ndef g(x):\n    log.append('g')\n    return x\ndef h(x):\n    log.append('h')\n    return x\n"
       "def f(a, b=0):\n    log.append('f')\n    return ''.join(log)\n")
COUNTER = "n = 0\ndef nxt():\n    global n\n    n += 1\n    return n\ndef pair(a, b):\n    return (a, b)\n"


@pytest.mark.parametrize("code,assertion,python", [
    # what Python says, by hand: g(1) is called before 1 + h(2) is evaluated, and f after both
    (LOG, "assert f(g(1), 1 + h(2)) == 'ghf'", True),
    (LOG, "assert f(g(1), 1 + h(2)) == 'hgf'", False),  # h first (it passed before)
    (LOG, "assert f(g(1), b=-h(2)) == 'ghf'", True),
    (LOG, "assert f(g(1), [h(2)]) == 'ghf'", True),
    (COUNTER, "assert pair(nxt(), nxt() * 10) == (1, 20)", True),  # nxt() = 1, then nxt() = 2 -> 20
    (COUNTER, "assert pair(nxt(), nxt() * 10) == (2, 10)", False),  # passed before the fix
    (COUNTER, "assert {nxt(): nxt(), nxt(): nxt()} == {1: 2, 3: 4}", True),  # key, value, key, value
    (COUNTER, "assert {nxt(): nxt(), nxt(): nxt()} == {1: 3, 2: 4}", False),  # all keys first: passed before
])
def test_calls_run_in_pythons_order_exactly(code, assertion, python):
    # catches: a chain that evaluates its loud arguments before the nested chain before them runs (chains.py
    # _call_arguments' `all(quiet[i:])`), and a dict display evaluating keys first (evaluate.Evaluator._Dict)
    assert judge(code, assertion)[0] == [python]


STACK = ("class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
         "        self.items.append(x)\n        return self\n    def pop(self):\n        return self.items.pop()\n"
         "def size(s, k):\n    return len(s.items) * 10 + k\n") + COUNTER


def test_quiet_chains_stay_one_request_and_loud_ones_run_when_python_runs_them():
    # one request: every argument is a constant or a quiet nested chain (the sandbox runs g(3) when it decodes)
    oks, sent = judge(LOG, "assert f(g(3)) == 'gf'")
    assert oks == [True] and len(sent) == 1 and sent[0]["ops"][0][1] == [{"call": {"root": "g",
                                                                                   "ops": [["call", [3], []]]}}]
    # Stack() runs, then nxt() (1), then .push(2): a prefix kept in the sandbox, then a call on it by reference
    oks, sent = judge(STACK, "assert Stack().push(nxt() + 1).pop() == 2")
    assert oks == [True] and [s.get("keep", "") for s in sent] == ["prefix", "", ""] and sent[2]["ref"] == 0
    # size(Stack().push(1), nxt() + 1): the Stack is made first and passed on by reference (an object: it could
    # not travel as a value); 1 item * 10 + 2 = 12
    oks, sent = judge(STACK, "assert size(Stack().push(1), nxt() + 1) == 12")
    assert oks == [True] and sent[0]["keep"] == "handle" and sent[2]["ops"][0][1][0] == {"ref": 0}


def test_a_prefix_that_is_plain_data_goes_on_in_the_parent():
    # lst() returns a list: after the prefix the parent applies .count itself, evaluating its argument then
    oks, sent = judge("def lst():\n    return [1, 2, 2]\n" + COUNTER, "assert lst().count(nxt() + 1) == 2")
    assert oks == [True] and len(sent) == 2 and sent[0]["keep"] == "prefix"


def test_candidate_names_the_entry_and_only_the_entry():
    # with an entry, `candidate` is the entry; a function the completion calls `candidate` is its own
    code = "def candidate(x):\n    return x + 1"
    assert judge(code, "assert candidate(1) == 2", entry="add_one")[0] == [False]  # add_one is not defined
    assert judge(code + "\ndef add_one(x):\n    return candidate(x)", "assert candidate(1) == 2",
                 entry="add_one")[0] == [True]
    assert judge(code, "assert candidate(1) == 2")[0] == [True]  # without an entry any name is the candidate's


def test_arguments_a_call_changes_are_written_back():
    # Python's caller sees the change; the parent's comprehension variable is the caller's object
    code = ("def sort_in_place(a):\n    a.sort()\ndef add(d):\n    d['x'] = 1\n    raise ValueError\n"
            "def grow(xs):\n    xs[0].append(1)\n")
    oks, _ = judge(code, "assert all(sort_in_place(a) is None and a == [1, 2, 3] for a in [[3, 1, 2]])",
                   "assert all(grow(w) is None and w == [[1]] for w in [[[]]])")
    assert oks == [True, True]
    resolve, _ = in_process(code)
    with Budget(10.0):
        result = resolve(CandidateCall("add", [["call", [encode({})], []]]))
    assert not result.ok and result.after == ((0, 0, {"x": 1}),)  # the change is reported even when it raised


def test_writing_back_has_known_limits():
    # pinned, as docs/verifiers.md (Code) says: a call nested in another's arguments runs inside the sandbox's decoding
    # (nothing is recorded there), and a tuple is never written back; Python would show [1, 2, 3] and ([1, 3],)
    code = ("def sort_in_place(a):\n    a.sort()\ndef ident(x):\n    return x\n"
            "def sort_first(t):\n    t[0].sort()\n")
    oks, sent = judge(code, "assert all(ident(sort_in_place(a)) is None and a == [3, 1, 2] for a in [[3, 1, 2]])",
                      "assert all(sort_first(t) is None and t == ([3, 1],) for t in [([3, 1],)])")
    assert oks == [True, True] and "call" in sent[0]["ops"][0][1][0]  # the nested call went inside ident's


def test_builtin_methods_run_on_the_parents_copy():
    # `make_stack([1, 2]).pop()` is list.pop on the parent's copy (it was refused as not evaluated)
    code = "def make_stack(xs):\n    return list(xs)\ndef f():\n    return {'a': 1}\ndef s():\n    return {1}\n"
    oks, _ = judge(code, "assert make_stack([1, 2]).pop() == 2", "assert f().pop('a') == 1",
                   "assert f().setdefault('b', 5) == 5", "assert sorted(make_stack([3, 1])) == [1, 3]",
                   "assert [x for x in [make_stack([2, 1])] if x.sort() is None] == [[1, 2]]",
                   "assert s().add(2) is None")
    assert oks == [True] * 6


def test_growing_methods_keep_the_parents_bounds():
    # extend/update materialise their argument and keep the container under MAX_ITEMS; keys colliding in one
    # hash are refused as set() refuses them (values.hash_bound)
    with pytest.raises(Failed, match="over the"):
        attribute([0] * 10, "extend")(range(MAX_ITEMS))
    modulus = (1 << 61) - 1
    with pytest.raises(Failed, match="share one hash"):
        attribute(set(), "update")([k * modulus for k in range(1, 100)])
    grown = [1]
    attribute(grown, "extend")(iter([2, 3]))
    assert grown == [1, 2, 3]


# ---------------------------------------------------------------- end to end, in the sandbox
def verify(code: str, reference: dict):
    from rlvr.verifiers.code.verifier import CodeVerifier

    return CodeVerifier(sandbox=SandboxConfig(time_limit_s=5.0)).verify(code, json.dumps(reference))


def check(body: str) -> str:
    return "def check(candidate):\n" + "".join(f"    {line}\n" for line in body.splitlines())


@pytest.mark.sandbox
@pytest.mark.parametrize("code,reference,passed", [
    (LOG, {"asserts": ["assert f(g(1), 1 + h(2)) == 'ghf'"]}, True),  # the evaluation order, as Python says
    (LOG, {"asserts": ["assert f(g(1), 1 + h(2)) == 'hgf'"]}, False),
    (COUNTER, {"asserts": ["assert pair(nxt(), nxt() * 10) == (1, 20)"]}, True),
    (STACK, {"asserts": ["assert size(Stack().push(1), nxt() + 1) == 12"]}, True),
    # an argument changed in place, in a check program, as HumanEval-style in-place tests write it
    ("def sort_in_place(a):\n    a.sort()", {"check": check("a = [3, 1, 2]\ncandidate(a)\nassert a == [1, 2, 3]"),
                                             "entry": "sort_in_place"}, True),
    ("def sort_in_place(a):\n    a.reverse()", {"check": check("a = [3, 1, 2]\ncandidate(a)\nassert a == [1, 2, 3]"),
                                                "entry": "sort_in_place"}, False),  # [2, 1, 3]
    ("def add(d):\n    d['x'] = 1\n    raise ValueError", {"check": check(
        "d = {}\ntry:\n    candidate(d)\nexcept ValueError:\n    pass\nassert d == {'x': 1}"), "entry": "add"}, True),
    # `candidate` is the entry, which this completion does not define
    ("def candidate(x):\n    return x + 1", {"asserts": ["assert candidate(1) == 2"], "entry": "add_one"}, False),
    # a method the base type has is the base's (the parent's copy), never the subclass's override;
    # an attribute the base lacks (a namedtuple field) is the candidate's own and runs in the sandbox
    ("class L(list):\n    def copy(self):\n        return [1, 2, 3]\ndef f(x):\n    return L([9])",
     {"asserts": ["assert f(1).copy() == [1, 2, 3]"]}, False),
    ("class L(list):\n    def copy(self):\n        return [1, 2, 3]\ndef f(x):\n    return L([9])",
     {"asserts": ["assert f(1).copy() == [9]"]}, True),
    ("class S(str):\n    def strip(self):\n        return 'abc'\ndef f(x):\n    return S(' zzz ')",
     {"asserts": ["assert f(1).strip() == 'zzz'"]}, True),
    ("from collections import namedtuple\nP = namedtuple('P', 'x y')\ndef f(x):\n    return P(x, 2)",
     {"asserts": ["assert f(1).x == 1 and f(1).count(2) == 1"]}, True),
    # M09: the candidate's exception reaches a check program as its first built-in class (E -> ValueError)
    ("class E(ValueError):\n    pass\ndef f(x):\n    raise E('no')",
     {"check": check("try:\n    candidate(1)\nexcept ValueError:\n    pass"), "entry": "f"}, True),
])
def test_calls_as_python_makes_them_in_the_sandbox(code, reference, passed):
    # catches, besides the above: harness_main._runner's parent_applies (type(v) in PLAIN alone lets L.copy run
    # in the sandbox; isinstance(v, PLAIN) alone refuses the namedtuple's field)
    verdict = verify(code, reference)
    assert (verdict.outcome is Outcome.CORRECT) == passed, verdict.detail
