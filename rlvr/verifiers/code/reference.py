"""Unit tests for model-written code, judged so that nothing the candidate can define or patch decides a pass.

Reference format and the rounds that judge the asserts; the harness that runs inside the sandbox is in
harness.py, the wire format of its results in wire.py. Used by verifier.py; see its docstring for the
verifier around it.

Known hacks on naive harnesses: sys.exit(0) before the asserts, an object whose __eq__ is always True, walking
stack frames or gc to forge results, patching the harness, builtins or `math` (issue #3), and shadowing `abs`
or `math.isclose` in the candidate's own namespace so that tolerance asserts pass (issue #8). All of them act
inside the process that runs the code, so that process decides nothing:
  * The parent reads each assert with `ast` and refuses forms it cannot evaluate itself (code/evaluate).
  * The sandbox receives only the candidate's call chains with plain arguments the parent computed
    (`hyp(3, 4)`, `Stack().push(1).pop()`), runs them in order after loading the code, and writes one JSON
    line per call to a private pipe (not stdout, which with stderr goes to /dev/null once the harness is
    up) through a strict encoder: only None/bool/int/float/complex/Fraction/str/bytes/list/tuple/dict/
    OrderedDict/Counter/set/frozenset, by exact type; subclasses (defaultdict, numpy.float64) are sent as
    their base type's content, read with the base type's own methods; a returned iterator is drained.
  * The parent decodes plain data and evaluates the whole assert itself: `abs`, `math.isclose`, `-`, `<`,
    comprehensions, with its own builtins (code/values). A call whose line never arrived (exit, crash,
    timeout) fails its test; a forged line can only claim a value the function could have returned.
  * Calls that only a branch Python may not take needs (the rest of an `any(...)`, the right side of an `or`)
    are *speculative*: they run after the calls Python certainly makes, under their own share of the time
    limit, and a speculative call without an answer is dropped, never failed (issue #24).
Equality (`==`, `!=`, `in`, `<`) is Python's own on plain data (issue #24: [1, 2] != (1, 2), 0.1 + 0.2 != 0.3);
a reference's "rel_tol" makes two floats match within math.isclose(rel_tol=...) (code/values.same).
"""
from __future__ import annotations

import ast
import json
import reprlib
from dataclasses import dataclass
from typing import Any

from rlvr.verifiers.code.budget import Budget
from rlvr.verifiers.code.evaluate import (
    MAX_ROUNDS,
    MISSING,
    BadReference,
    CallResult,
    CandidateCall,
    Evaluator,
    Pending,
)
from rlvr.verifiers.code.forms import check_supported
from rlvr.verifiers.code.harness import SPECULATIVE_MARK, harness_files, printable, read_results
from rlvr.verifiers.code.values import Failed

__all__ = ["BadReference", "CodeTests", "AssertRounds", "parse_reference", "harness_files", "read_results", "short",
           "SPECULATIVE_MARK"]

MAX_TIME_LIMIT_S = 60.0  # cap on a reference's own time_limit_s
MAX_RUNS = 2 * MAX_ROUNDS  # sandbox runs per completion, counting the rounds whose speculative calls were cut


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


def parse_reference(reference: str) -> CodeTests:
    """The tests of a JSON reference; raises BadReference saying what is wrong."""
    try:
        spec = json.loads(reference)
    except (ValueError, RecursionError) as err:
        raise BadReference(f"not JSON ({err})") from None
    if not isinstance(spec, dict) or not (spec.get("asserts") or spec.get("io")):
        raise BadReference("expected a JSON object with non-empty 'asserts' and/or 'io'")
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
    tests, tested, expected = [], set(), {}
    for source in asserts:
        for stmt in _assert_statements(source):
            text = ast.unparse(stmt)
            names, wanted = check_supported(stmt.test, text, entry)
            tested |= names
            expected.update({name: text for name in wanted if name not in expected})
            tests.append(AssertTest(text, stmt.test))
    if not tests and not io:
        raise BadReference("no assert statements and no io cases")
    for name, text in expected.items():
        if entry is None and name not in tested:  # issue #24: the candidate could define it to match
            raise BadReference(f"{text[:80]!r} takes {name!r} from the candidate's code only on the expected side; "
                               "without an 'entry' rlvr cannot tell it from the function under test (give the "
                               "reference an 'entry'); the sample is unscorable")
    return CodeTests(tuple(tests), tuple((c.get("input", ""), c["output"]) for c in io), entry,
                     None if limit is None else min(float(limit), MAX_TIME_LIMIT_S),
                     None if rel_tol is None else float(rel_tol))


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


# ---------------------------------------------------------------- the sandbox's side of a round
# ---------------------------------------------------------------- judging, round by round
class AssertRounds:
    """The asserts of one reference against one candidate: `calls()` says what the sandbox must run next,
    `record()` stores its answers, `outcomes()` judges every assert (code/evaluate.Evaluator, in this process)."""

    def __init__(self, tests: CodeTests, budget: Budget | None = None):
        self.tests = tests
        self.budget = budget or Budget()  # the parent's CPU for this completion starts now (verifiers/code/budget.py)
        self.known: dict[str, CallResult] = {}
        self.decided: dict[int, tuple[bool, str]] = {}
        self.rounds = self.cut_rounds = 0  # runs, and runs whose speculative calls did not all answer
        self.needed = 0  # of the last calls(): how many come first because Python makes them
        self.unspeculated: set[str] = set()  # speculative calls that hung or died once: only run when needed
        self.stopped = ""  # why no further round was run, when it was cut short

    def calls(self) -> list[CandidateCall]:
        """Every not-yet-run call that an undecided assert needs and whose arguments are known. Calls that
        Python's order certainly makes come first (`self.needed` of them); those gathered by walking untaken
        branches come last, so one of them hanging cannot cost a needed call its result."""
        if self.rounds - self.cut_rounds >= MAX_ROUNDS or self.rounds >= MAX_RUNS:
            return []
        with self.budget:
            return self._calls()

    def _calls(self) -> list[CandidateCall]:
        needed: dict[str, CandidateCall] = {}
        speculative: dict[str, CandidateCall] = {}
        for index, test in enumerate(self.tests.asserts):
            if index in self.decided:
                continue
            verdict = self._judge(index, needed)
            if verdict is not None:
                self.decided[index] = verdict
            else:  # walk every branch, so the next run answers all of this assert's known calls at once
                try:
                    Evaluator(self.known, speculative, self.tests.entry, collect=True, site=index,
                              rel_tol=self.tests.rel_tol).eval(test.test, {})
                except Exception:
                    pass
        extra = [c for k, c in speculative.items() if k not in needed and k not in self.unspeculated]
        self.needed = len(needed)
        return [*needed.values(), *(call for call in extra if call.key not in self.known)]

    def read(self, channel: bytes, calls: list[CandidateCall]) -> tuple[dict[int, CallResult], bool, str]:
        """read_results under this completion's budget: decoding a costly line fails its call, never stalls."""
        with self.budget:
            return read_results(channel, calls)

    def record(self, calls: list[CandidateCall], results: dict[int, CallResult]) -> None:
        """Store a run's answers. A needed call without one failed (the program exited, hung or was killed); a
        speculative one is dropped instead (issue #24: a branch Python may never take decides nothing), and the
        first of them, the one running when the run ended, is never sent speculatively again."""
        self.rounds += 1
        cut = False
        for i, call in enumerate(calls):
            if i >= self.needed and i not in results:
                if not cut:
                    self.unspeculated.add(call.key)
                cut = True
                continue
            self.known[call.key] = results.get(i, CallResult(False, MISSING))
        self.cut_rounds += cut

    def outcomes(self) -> list[tuple[bool, str]]:
        """(passed, why not) per assert, in order."""
        with self.budget:
            return self._outcomes()

    def _outcomes(self) -> list[tuple[bool, str]]:
        out = []
        for index, test in enumerate(self.tests.asserts):
            verdict = self.decided.get(index) or self._judge(index, {})
            why = self.stopped or f"candidate calls nested more than {MAX_ROUNDS} deep"
            out.append(verdict or (False, f"{test.source[:80]}: not evaluated ({why})"))
        return out

    def _judge(self, index: int, requests: dict[str, CandidateCall]) -> tuple[bool, str] | None:
        test = self.tests.asserts[index]
        evaluator = Evaluator(self.known, requests, self.tests.entry, site=index, rel_tol=self.tests.rel_tol)
        try:
            passed = bool(evaluator.eval(test.test, {}))
        except Pending:
            return None
        except Failed as err:
            return False, f"{test.source[:80]}: {err}"
        except Exception as err:  # any error on candidate values fails the test, as the assert would in Python
            return False, f"{test.source[:80]}: raised {type(err).__name__}: {printable(str(err))[:120]}"
        got = f"got {short(evaluator.first_value[0])}" if evaluator.first_value else "false"
        return passed, "" if passed else f"{test.source[:80]}: {got}"


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 4, 80, 80


def short(value: Any, limit: int = 80) -> str:
    """repr for details, looking at a few items only: the full repr of a 1 MiB result took tens of ms."""
    try:
        text = _SHORT.repr(value)
    except (ValueError, RecursionError):  # an int past the str-digit limit, a deep list
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
