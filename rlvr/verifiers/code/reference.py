"""Unit tests for model-written code, judged so that nothing the candidate can define or patch decides a pass.

Reference format and the judging of its asserts and check program; the sandbox's side is harness.py and
harness_main.py, the live run session.py, the wire format of results wire.py. Used by verifier.py; see its
docstring for the verifier around it.

Known hacks on naive harnesses: sys.exit(0) before the asserts, an object whose __eq__ is always True, walking
stack frames or gc to forge results, patching the harness, builtins or `math`, and shadowing `abs`
or `math.isclose` in the candidate's own namespace so that tolerance asserts pass. All of them act
inside the process that runs the code, so that process decides nothing:
  * The parent reads each assert with `ast` and refuses forms it cannot evaluate itself (code/evaluate); an
    assert that never calls the candidate (HumanEval's `assert True, "..."`) tests nothing and is ignored
    (before, it made the whole reference unscorable).
  * The sandbox receives only the candidate's call chains with plain arguments the parent computed
    (`hyp(3, 4)`, `Stack().push(1).pop()`), one at a time, in the order Python's evaluation of the asserts makes
    them (code/session.py), and answers each with one JSON line on a private pipe (not stdout, which
    with stderr goes to /dev/null once the harness is up) through a strict encoder: only the carried types, by
    exact type (code/wire.py); an instance of a subclass is sent as its base type's content, read with the base
    type's own methods, and marked as a subclass (code/stdtypes); a returned iterator is drained.
  * The parent decodes plain data and evaluates the whole assert itself: `abs`, `math.isclose`, `-`, `<`,
    comprehensions, with its own builtins (code/values). A call that got no answer (exit, crash, timeout, a line
    out of order) fails its test; a forged line can only claim a value the function could have returned.
  * A `check(candidate)` program (code/check_program.py) is trusted code run here, with a proxy for `candidate`
    whose calls go to the same session; its operations on candidate values are bounded (code/check_guard.py).
Equality (`==`, `!=`, `in`, `<`) is Python's own on plain data ([1, 2] != (1, 2), 0.1 + 0.2 != 0.3);
a reference's "rel_tol" makes two floats match within math.isclose(rel_tol=...) (code/values.same).
"""
from __future__ import annotations

import ast
import json
import reprlib
from dataclasses import dataclass
from itertools import islice
from typing import Any

from rlvr.verifiers.code.check_program import CheckProgram, parse_check
from rlvr.verifiers.code.evaluate import BadReference, Evaluator, Resolve
from rlvr.verifiers.code.forms import check_supported
from rlvr.verifiers.code.harness import printable
from rlvr.verifiers.code.stdtypes import VIEW_TAGS, kind
from rlvr.verifiers.code.values import Failed

__all__ = ["BadReference", "CodeTests", "parse_reference", "judge_asserts", "short"]

MAX_TIME_LIMIT_S = 60.0  # cap on a reference's own time_limit_s


@dataclass(frozen=True)
class AssertTest:
    source: str  # the assert as written, for details
    test: ast.expr  # its condition, checked by code/forms.check_supported


@dataclass(frozen=True)
class CodeTests:
    asserts: tuple[AssertTest, ...]
    io: tuple[tuple[str, str], ...]  # (stdin, expected stdout)
    entry: str | None
    time_limit_s: float | None
    rel_tol: float | None = None  # floats match within math.isclose(rel_tol=...) when given; else Python's ==
    check: CheckProgram | None = None  # a `check(candidate)` program: one more test, run after the asserts
    prompt: str | None = None  # the code the answer completes (code/prompted.py); needs entry


def parse_reference(reference: str) -> CodeTests:
    """The tests of a JSON reference; raises BadReference saying what is wrong."""
    try:
        spec = json.loads(reference)
    except (ValueError, RecursionError) as err:
        raise BadReference(f"not JSON ({err})") from None
    if not isinstance(spec, dict) or not (spec.get("asserts") or spec.get("io") or spec.get("check")):
        raise BadReference("expected a JSON object with non-empty 'asserts', 'check' and/or 'io'")
    asserts = spec.get("asserts") or []
    asserts = [asserts] if isinstance(asserts, str) else asserts
    io = spec.get("io") or []
    entry, limit, rel_tol = spec.get("entry"), spec.get("time_limit_s"), spec.get("rel_tol")
    if not isinstance(asserts, list) or not all(isinstance(a, str) for a in asserts):
        raise BadReference("'asserts' must be a list of strings")
    if not isinstance(io, list) or not all(isinstance(c, dict) and isinstance(c.get("input", ""), str)
                                           and isinstance(c.get("output"), str) for c in io):
        raise BadReference("'io' must be a list of {'input': str, 'output': str}")
    if entry is not None and not (isinstance(entry, str) and entry.isidentifier()):
        raise BadReference(f"'entry' must be an identifier, got {entry!r}")
    if limit is not None and not (isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0):
        raise BadReference(f"'time_limit_s' must be a positive number, got {limit!r}")
    if rel_tol is not None and not (type(rel_tol) in (int, float) and 0 <= rel_tol < 1):
        raise BadReference(f"'rel_tol' must be a number in [0, 1), got {rel_tol!r}")
    prompt = spec.get("prompt")
    if prompt is not None and not (isinstance(prompt, str) and entry is not None):
        raise BadReference("'prompt' must be a string, with an 'entry' (the function the answer completes)")
    tests, tested, expected = [], set(), {}
    for source in asserts:
        for stmt in _assert_statements(source):
            text = ast.unparse(stmt)
            names, wanted = check_supported(stmt.test, text, entry)
            if not names and not wanted:  # a constant assert tests nothing: ignored
                continue
            tested |= names
            expected.update({name: text for name in wanted if name not in expected})
            tests.append(AssertTest(text, stmt.test))
    check = parse_check(spec["check"], entry) if "check" in spec else None
    if not tests and not io and check is None:
        raise BadReference("no assert statements that call the candidate, no check program and no io cases")
    for name, text in expected.items():
        if entry is None and name not in tested:  # the candidate could define it to match
            raise BadReference(f"{text[:80]!r} takes {name!r} from the candidate's code only on the expected side; "
                               "without an 'entry' rlvr cannot tell it from the function under test (give the "
                               "reference an 'entry'); the sample is unscorable")
    return CodeTests(tuple(tests), tuple((c.get("input", ""), c["output"]) for c in io), entry,
                     None if limit is None else min(float(limit), MAX_TIME_LIMIT_S),
                     None if rel_tol is None else float(rel_tol), check, prompt)


def _assert_statements(source: str) -> list[ast.Assert]:
    """The asserts of one entry. `import math` lines (MBPP's test_imports) are accepted and ignored: the parent
    always has `math`. Any other statement (`from math import isclose` included) refuses the reference."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise BadReference(f"assert {source[:80]!r} does not parse ({err})") from None
    statements = [stmt for stmt in tree.body if not _harmless_import(stmt)]
    if not all(isinstance(stmt, ast.Assert) for stmt in statements) or len(tree.body) == 0:
        raise BadReference(f"{source[:80]!r} is not a sequence of assert statements")
    return statements


def _harmless_import(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Import) and all(a.name == "math" and a.asname is None for a in stmt.names):
        return True
    return False


# ---------------------------------------------------------------- judging
def judge_asserts(tests: CodeTests, resolve: Resolve) -> list[tuple[bool, str]]:
    """(passed, why not) per assert, in order; `resolve` answers each candidate call as Python's evaluation of the
    assert reaches it (code/session.Session.call, or a stand-in in tests). The caller holds the CPU budget."""
    return [_judge(test, tests, resolve) for test in tests.asserts]


def _judge(test: AssertTest, tests: CodeTests, resolve: Resolve) -> tuple[bool, str]:
    evaluator = Evaluator(resolve, tests.entry, rel_tol=tests.rel_tol)
    try:
        passed = bool(evaluator.eval(test.test, {}))
    except Failed as err:
        return False, f"{test.source[:80]}: {err}"
    except Exception as err:  # any error on candidate values fails the test, as the assert would in Python
        return False, f"{test.source[:80]}: raised {type(err).__name__}: {printable(str(err))[:120]}"
    got = f"got {short(evaluator.first_value[0])}" if evaluator.first_value else "false"
    return passed, "" if passed else f"{test.source[:80]}: {got}"


class _Unsorted(reprlib.Repr):
    """reprlib without its sorting: reprlib sorts a whole set or dict to show a few keys (one C call; a set of 30
    Decimals and 30 big ints took 0.4 s), and repr()s a Counter, OrderedDict or defaultdict in full
    (Counter's sorts its counts). Here the first few items are shown in the container's own order."""

    def _few(self, items: Any, level: int, pair: bool, length: int) -> str:
        shown = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" if pair else self.repr1(k, level - 1)
                 for k, v in islice(items, self.maxdict if pair else self.maxset)] if level > 0 else ["..."]
        return ", ".join(shown + (["..."] if level > 0 and len(shown) < length else []))

    def _container(self, x: Any, level: int, pair: bool) -> str:
        body = self._few(x.items() if pair else ((k, None) for k in x), level, pair, len(x))
        name = type(x).__name__
        if name == "dict":
            return "{" + body + "}"
        if name == "set":
            return "{" + body + "}" if x else "set()"
        return f"{name}({{{body}}})"

    def repr_set(self, x: Any, level: int) -> str:
        return self._container(x, level, False)

    repr_frozenset = repr_set

    def repr_dict(self, x: Any, level: int) -> str:
        return self._container(x, level, True)

    repr_Counter = repr_OrderedDict = repr_defaultdict = repr_dict

    def repr_instance(self, x: Any, level: int) -> str:
        base = kind(x)  # the parent's subclass of a carried type: shown as its base
        return self.repr1(base(x), level) if base is not type(x) else super().repr_instance(x, level)


_SHORT = _Unsorted()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 4, 80, 80


def short(value: Any, limit: int = 80) -> str:
    """repr for details, looking at a few items only: the full repr of a 1 MiB result took tens of ms."""
    try:
        if type(value) is not kind(value) or type(value) in VIEW_TAGS:  # reprlib knows the base types only
            value = list(value) if type(value) in VIEW_TAGS else kind(value)(value)
        text = _SHORT.repr(value)
    except (ValueError, RecursionError, TypeError):  # an int past the str-digit limit, a deep list
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
