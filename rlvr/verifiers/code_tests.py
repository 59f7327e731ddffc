"""Unit tests for model-written code, judged so that nothing the candidate can define or patch decides a pass.

Reference format, the harness that runs inside the sandbox, the wire format of its results, and the rounds
that judge the asserts. Used by code.py; see its docstring for the verifier around it.

Known hacks on naive harnesses: sys.exit(0) before the asserts, an object whose __eq__ is always True, walking
stack frames or gc to forge results, patching the harness, builtins or `math` (issue #3), and shadowing `abs`
or `math.isclose` in the candidate's own namespace so that tolerance asserts pass (issue #8). All of them act
inside the process that runs the code, so that process decides nothing:
  * The parent reads each assert with `ast` and refuses forms it cannot evaluate itself (code_eval).
  * The sandbox receives only the candidate's call chains with plain arguments the parent computed
    (`hyp(3, 4)`, `Stack().push(1).pop()`), runs them in order after loading the code, and writes one JSON
    line per call to a private pipe (not stdout) through a strict encoder: only None/bool/int/float/str/bytes/
    list/tuple/dict/set/frozenset, by exact type; subclasses (Counter, defaultdict, numpy.float64) are sent
    as their base type's content, read with the base type's own methods; a returned iterator is drained.
  * The parent decodes plain data and evaluates the whole assert itself: `abs`, `math.isclose`, `-`, `<`,
    comprehensions, with its own builtins (code_values). A call whose line never arrived (exit, crash,
    timeout) fails its test; a forged line can only claim a value the function could have returned.
Equality (`==`, `!=`, `in`) is Python's on plain data, except that tuples equal lists and floats compare with
math.isclose(rel_tol=1e-9), so 0.1 + 0.2 == 0.3 passes; numbers mix as in Python (1 == 1.0 == True).
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

from rlvr.verifiers.code_eval import MAX_ROUNDS, MISSING, BadReference, CallResult, CandidateCall, Evaluator, Pending
from rlvr.verifiers.code_forms import check_supported
from rlvr.verifiers.code_values import Failed, decode

__all__ = ["BadReference", "CodeTests", "AssertRounds", "parse_reference", "harness_files", "read_results", "short"]

MAX_TIME_LIMIT_S = 60.0  # cap on a reference's own time_limit_s

# Runs inside the sandbox under Debian's python3. Everything it needs is bound before the candidate runs; the
# candidate can still tamper with all of it, but can only ever report values its functions could have returned.
HARNESS = r'''
import json, os, sys
from fractions import Fraction

def main(type=type, hex=hex, dumps=json.dumps, write=os.write, BaseException=BaseException, issubclass=issubclass,
         getattr=getattr, len=len, slice=slice, dict=dict, list=list, tuple=tuple, set=set, frozenset=frozenset,
         int=int, float=float, str=str, bytes=bytes, iter=iter, range=range):
    fd = int(sys.argv[1])
    PLAIN = (type(None), bool, int, float, str, bytes, list, tuple, dict, set, frozenset)

    def send(obj):
        data = (dumps(obj) + "\n").encode()
        while data:
            data = data[write(fd, data):]

    def decode(x):
        if type(x) is list:
            return [decode(v) for v in x]
        if type(x) is not dict:
            return x
        (tag, v), = x.items()
        if tag == "call":  # a candidate chain nested in another call's arguments: its value, whatever it is
            return run(v["root"], v["ops"], False)[0]
        if tag == "i":
            return int(v, 16)
        if tag == "b":
            return bytes.fromhex(v)
        if tag == "d":
            return {decode(k): decode(val) for k, val in v}
        if tag == "c":
            return complex(*v)
        if tag == "q":
            return Fraction(decode(v[0]), decode(v[1]))
        return {"t": tuple, "s": set, "f": frozenset, "it": iter}[tag]([decode(e) for e in v])

    def run(root, ops, stop_at_plain):
        """Walk a chain from the candidate's name; the outermost chain stops at plain data (the parent applies
        the rest), a nested one hands its value on as it is."""
        if root not in ns:
            raise NameError("name %r is not defined by the code" % root)
        value, done = ns[root], 0
        for op in ops:
            if stop_at_plain and type(value) in PLAIN:
                break
            if op[0] == "attr":
                value = getattr(value, op[1])
            else:
                value = value(*[decode(a) for a in op[1]], **{k: decode(w) for k, w in op[2]})
            done += 1
        return value, done

    def base_content(x, t):
        """A subclass of a plain type as its base type, read with the base type's own C methods."""
        for base, copy in ((dict, lambda v: {k: w for k, w in dict.items(v)}), (bool, None),
                           (int, lambda v: int.__add__(v, 0)), (float, lambda v: float.__mul__(v, 1.0)),
                           (str, lambda v: str.__getitem__(v, slice(None))),
                           (bytes, lambda v: bytes.__getitem__(v, slice(None))),
                           (list, lambda v: list.__getitem__(v, slice(None))),
                           (tuple, lambda v: tuple.__getitem__(v, slice(None))),
                           (frozenset, lambda v: frozenset(frozenset.__iter__(v))),
                           (set, lambda v: set(set.__iter__(v)))):
            if copy is not None and issubclass(t, base):
                return copy(x)
        raise TypeError("unserialisable")

    def encode(x, depth):
        t = type(x)
        if x is None or t is bool or t is str or t is float:
            return x
        if t is int:
            return x if -(1 << 53) < x < (1 << 53) else {"i": hex(x)}  # hex: no int/str digit limit
        if depth > 100:
            raise ValueError("too deep")
        if t is list:
            return [encode(v, depth + 1) for v in x]
        if t is tuple:
            return {"t": [encode(v, depth + 1) for v in x]}
        if t is dict:
            return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in x.items()]}
        if t is set or t is frozenset:
            return {"s" if t is set else "f": [encode(v, depth + 1) for v in x]}
        if t is bytes:
            return {"b": x.hex()}
        if t is complex:
            return {"c": [x.real, x.imag]}
        if t is Fraction:
            return {"q": [encode(x.numerator, depth + 1), encode(x.denominator, depth + 1)]}
        if issubclass(t, PLAIN):
            return encode(base_content(x, t), depth + 1)
        if getattr(t, "__next__", None) is not None:  # a generator or other iterator: drain it, bounded
            items = []
            for v in x:
                if len(items) >= 100000:
                    raise ValueError("iterator longer than 100000 items")
                items.append(v)
            return {"it": [encode(v, depth + 1) for v in items]}
        raise TypeError("unserialisable")

    def describe(err):
        try:
            return str(type(err).__name__)[:80] + ": " + str(err)[:200]
        except BaseException:
            return "exception"

    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    calls = payload["calls"]
    send({"ready": True})
    module = type(sys)("solution")  # a real module, so pickle (multiprocessing) can find its functions
    sys.modules["solution"] = module
    ns = module.__dict__  # run() reads it through its closure
    try:
        exec(compile(payload["code"], "solution.py", "exec"), ns)
    except BaseException as err:
        send({"load": describe(err)})
        os._exit(0)
    if payload.get("entry") in ns:
        ns["candidate"] = ns[payload["entry"]]
    for i, call in enumerate(calls):
        try:
            value, done = run(call["root"], call["ops"], True)
        except BaseException as err:
            send({"i": i, "ok": False, "error": "raised " + describe(err)})
            continue
        try:
            line = {"i": i, "ok": True, "value": encode(value, 0), "done": done}
        except BaseException as err:
            line = {"i": i, "ok": False, "error": "unserialisable result (only plain built-in types count): "
                                                  + describe(err)}
        send(line)
    os._exit(0)  # skip atexit handlers and finalizers the candidate may have registered

main()
'''


@dataclass(frozen=True)
class AssertTest:
    source: str  # the assert as written, for details
    test: ast.expr  # its condition, checked by code_forms.check_supported


@dataclass(frozen=True)
class CodeTests:
    asserts: tuple[AssertTest, ...]
    io: tuple[tuple[str, str], ...]  # (stdin, expected stdout)
    entry: str | None
    time_limit_s: float | None


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
    entry, limit = spec.get("entry"), spec.get("time_limit_s")
    if not isinstance(asserts, list) or not all(isinstance(a, str) for a in asserts):
        raise BadReference("'asserts' must be a list of strings")
    if not isinstance(io, list) or not all(isinstance(c, dict) and isinstance(c.get("input", ""), str)
                                           and isinstance(c.get("output"), str) for c in io):
        raise BadReference("'io' must be a list of {'input': str, 'output': str}")
    if entry is not None and not (isinstance(entry, str) and entry.isidentifier()):
        raise BadReference(f"'entry' must be an identifier, got {entry!r}")
    if limit is not None and not (isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0):
        raise BadReference(f"'time_limit_s' must be a positive number, got {limit!r}")
    tests = []
    for source in asserts:
        for stmt in _assert_statements(source):
            text = ast.unparse(stmt)
            check_supported(stmt.test, text, entry)
            tests.append(AssertTest(text, stmt.test))
    if not tests and not io:
        raise BadReference("no assert statements and no io cases")
    return CodeTests(tuple(tests), tuple((c.get("input", ""), c["output"]) for c in io), entry,
                     None if limit is None else min(float(limit), MAX_TIME_LIMIT_S))


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
def harness_files(code: str, calls: list[CandidateCall], entry: str | None) -> dict[str, bytes]:
    """Files for the sandbox's work dir: the harness and its payload (code and call chains, no expected values)."""
    payload = json.dumps({"code": code, "calls": [{"root": c.root, "ops": c.ops} for c in calls], "entry": entry})
    return {"harness.py": HARNESS.encode(), "payload.json": payload.encode()}


def read_results(channel: bytes, calls: list[CandidateCall]) -> tuple[dict[int, CallResult], bool, str]:
    """(per call index: its result; harness ready?; load error or "").

    Unreadable lines (forged, or cut at the output cap) are skipped, and an index reported twice counts as
    failed, so writing extra lines to the pipe gains nothing.
    """
    results: dict[int, CallResult] = {}
    ready, load_error = False, ""
    for raw in channel.split(b"\n"):
        try:
            line = json.loads(raw)
            if line.get("ready") is True:
                ready = True
            elif "load" in line:
                load_error = f"code failed to load: {_printable(str(line['load']))[:200]}"
            elif type(line.get("i")) is int and 0 <= line["i"] < len(calls):
                i, done = line["i"], line.get("done", 0)
                if line.get("ok") is True and type(done) is int and 0 <= done <= len(calls[i].ops):
                    result = CallResult(True, decode(line["value"]), done)
                else:
                    result = CallResult(False, _printable(str(line.get("error")))[:200])
                results[i] = CallResult(False, "duplicated result line") if i in results else result
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError):
            continue
    return results, ready, load_error


# ---------------------------------------------------------------- judging, round by round
class AssertRounds:
    """The asserts of one reference against one candidate: `calls()` says what the sandbox must run next,
    `record()` stores its answers, `outcomes()` judges every assert (code_eval.Evaluator, in this process)."""

    def __init__(self, tests: CodeTests):
        self.tests = tests
        self.known: dict[str, CallResult] = {}
        self.decided: dict[int, tuple[bool, str]] = {}
        self.rounds = 0
        self.stopped = ""  # why no further round was run, when it was cut short

    def calls(self) -> list[CandidateCall]:
        """Every not-yet-run call that an undecided assert needs and whose arguments are known. Calls that
        Python's order certainly makes come first; those gathered by walking untaken branches come last, so
        one of them hanging cannot cost a needed call its result."""
        if self.rounds >= MAX_ROUNDS:
            return []
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
                    Evaluator(self.known, speculative, self.tests.entry, collect=True, site=index).eval(test.test, {})
                except Exception:
                    pass
        ordered = {**needed, **{k: c for k, c in speculative.items() if k not in needed}}
        return [call for key, call in ordered.items() if key not in self.known]

    def record(self, calls: list[CandidateCall], results: dict[int, CallResult]) -> None:
        self.rounds += 1
        for i, call in enumerate(calls):
            self.known[call.key] = results.get(i, CallResult(False, MISSING))

    def outcomes(self) -> list[tuple[bool, str]]:
        """(passed, why not) per assert, in order."""
        out = []
        for index, test in enumerate(self.tests.asserts):
            verdict = self.decided.get(index) or self._judge(index, {})
            why = self.stopped or f"candidate calls nested more than {MAX_ROUNDS} deep"
            out.append(verdict or (False, f"{test.source[:80]}: not evaluated ({why})"))
        return out

    def _judge(self, index: int, requests: dict[str, CandidateCall]) -> tuple[bool, str] | None:
        test = self.tests.asserts[index]
        evaluator = Evaluator(self.known, requests, self.tests.entry, site=index)
        try:
            passed = bool(evaluator.eval(test.test, {}))
        except Pending:
            return None
        except Failed as err:
            return False, f"{test.source[:80]}: {err}"
        except Exception as err:  # any error on candidate values fails the test, as the assert would in Python
            return False, f"{test.source[:80]}: raised {type(err).__name__}: {_printable(str(err))[:120]}"
        got = f"got {short(evaluator.first_value[0])}" if evaluator.first_value else "false"
        return passed, "" if passed else f"{test.source[:80]}: {got}"


def _printable(text: str) -> str:
    """Lone surrogates (a candidate's `raise ValueError('\\ud800')`) cannot be written as UTF-8: escape them."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def short(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int past the str-digit limit, a deep list
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
