"""Unit tests for model-written code, split so that expected values never enter the sandbox.

Reference format, the harness that runs inside the sandbox, the wire format of its results, and the
parent's judgement of them. Used by code.py; see its docstring for the verifier around it.

Why the split: known hacks on naive harnesses are sys.exit(0) before the asserts, an object whose __eq__ is
always True, walking stack frames or gc to forge results, patching the harness or builtins, printing the
expected output, skipping tests (issue #3). All of them act inside the process that runs the tests, so that
process must not be where a pass is decided:
  * Each assert is split in the parent with `ast`: `and` / `or` / `not` and single comparisons (==, !=, <,
    <=, >, >=, in, not in; `is` against None/True/False) stay in the parent, literal operands
    (ast.literal_eval) too; only the other operands go into the sandbox as expressions to evaluate. Anything
    else (`assert X`, `f(x) + 1 < 3` ...) is an expression whose truthiness the parent checks: its operators
    run in the sandbox, and a literal inside it is visible to the code, as a visible test is.
  * The harness evaluates each expression and writes one JSON line per expression to a private pipe (not
    stdout), through a strict encoder: only None/bool/int/float/str/bytes/list/tuple/dict/set made of
    exactly those types (`type(x) is int`, never isinstance: an int subclass with __eq__ = True is refused).
  * The parent decodes plain data and compares it with its own equality. A test passes only if its line
    arrived with the right value: exits, skips and crashes leave lines missing (= failed). The code can
    tamper with everything in its own process, harness included, but what it can report is then only what
    a function could have returned anyway: a pass still needs the expected value.
Equality: Python's on plain data, except that tuples equal lists (JSON has no tuples) and floats compare
with math.isclose(rel_tol=1e-9), so 0.1 + 0.2 == 0.3 passes; numbers mix as in Python (1 == 1.0 == True).
"""
from __future__ import annotations

import ast
import json
import math
import operator
from dataclasses import dataclass
from typing import Any

MAX_TIME_LIMIT_S = 60.0  # cap on a reference's own time_limit_s
FLOAT_REL_TOL = 1e-9
MISSING = "no result (the program exited, hung or was killed before this test)"

# Runs inside the sandbox under Debian's python3. Everything it needs is bound before the candidate runs;
# the candidate can still tamper with all of it, but can only ever report values it could have returned.
HARNESS = r'''
import json, os, sys

def main(type=type, hex=hex, dumps=json.dumps, write=os.write, BaseException=BaseException):
    fd = int(sys.argv[1])

    def send(obj):
        data = (dumps(obj) + "\n").encode()
        while data:
            data = data[write(fd, data):]

    def encode(x, depth):
        t = type(x)
        if x is None or t is bool or t is str or t is float:
            return x
        if t is int:
            return x if -(1 << 53) < x < (1 << 53) else {"i": hex(x)}  # hex: no int/str digit limit
        if depth > 100:
            raise ValueError("too deep")
        if t is list or t is tuple:
            return [encode(v, depth + 1) for v in x]
        if t is dict:
            return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in x.items()]}
        if t is set or t is frozenset:
            return {"s": [encode(v, depth + 1) for v in x]}
        if t is bytes:
            return {"b": x.hex()}
        raise TypeError("unserialisable")

    def describe(err):
        try:
            return str(type(err).__name__)[:80] + ": " + str(err)[:200]
        except BaseException:
            return "exception"

    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    exprs = [compile(src, "<test %d>" % i, "eval") for i, src in enumerate(payload["exprs"])]
    send({"ready": True})
    module = type(sys)("solution")  # a real module, so pickle (multiprocessing) can find its functions
    sys.modules["solution"] = module
    ns = module.__dict__
    try:
        exec(compile(payload["code"], "solution.py", "exec"), ns)
    except BaseException as err:
        send({"load": describe(err)})
        os._exit(0)
    if payload.get("entry") in ns:
        ns["candidate"] = ns[payload["entry"]]
    for i, expr in enumerate(exprs):
        try:
            value = eval(expr, ns)
        except BaseException as err:
            send({"i": i, "ok": False, "error": "raised " + describe(err)})
            continue
        try:
            line = {"i": i, "ok": True, "value": encode(value, 0)}
        except BaseException:
            line = {"i": i, "ok": False, "error": "unserialisable result (only plain built-in types count)"}
        send(line)
    os._exit(0)  # skip atexit handlers and finalizers the candidate may have registered

main()
'''


class BadReference(ValueError):
    """The reference tests cannot be read: the sample is unscorable."""


@dataclass(frozen=True)
class AssertTest:
    """`check` is a tree: ("cmp", op, left, right) | ("truthy", operand) | ("not", check) | ("and" | "or",
    (check, ...)); an operand is ("lit", value) or ("expr", index into the sandbox's expression list)."""

    source: str  # the assert as written, for details
    check: tuple


@dataclass(frozen=True)
class CodeTests:
    asserts: tuple[AssertTest, ...]
    exprs: tuple[str, ...]  # what the sandbox evaluates: never an expected value from a split comparison
    io: tuple[tuple[str, str], ...]  # (stdin, expected stdout)
    entry: str | None
    time_limit_s: float | None


_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
            ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
_LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)


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
    exprs: list[str] = []
    tests = [_parse_assert(stmt, exprs) for source in asserts for stmt in _assert_statements(source)]
    return CodeTests(tuple(tests), tuple(exprs), tuple((c.get("input", ""), c["output"]) for c in io), entry,
                     None if limit is None else min(float(limit), MAX_TIME_LIMIT_S))


def _assert_statements(source: str) -> list[ast.Assert]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise BadReference(f"assert {source[:80]!r} does not parse ({err})") from None
    if not tree.body or not all(isinstance(stmt, ast.Assert) for stmt in tree.body):
        raise BadReference(f"{source[:80]!r} is not a sequence of assert statements")
    return tree.body


def _parse_assert(stmt: ast.Assert, exprs: list[str]) -> AssertTest:
    source, before = ast.unparse(stmt), len(exprs)
    check = _parse_check(stmt.test, exprs)
    if len(exprs) == before:
        raise BadReference(f"{source[:80]!r} tests only constants")
    return AssertTest(source, check)


def _parse_check(node: ast.expr, exprs: list[str]) -> tuple:
    if isinstance(node, ast.BoolOp):
        return ("and" if isinstance(node.op, ast.And) else "or", tuple(_parse_check(v, exprs) for v in node.values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ("not", _parse_check(node.operand, exprs))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        op, right = _COMPARE[type(node.ops[0])], node.comparators[0]
        literal = _literal(right) if op in ("is", "is not") else None
        if op not in ("is", "is not") or (literal and any(literal[1] is c for c in (None, True, False))):
            return ("cmp", op, _operand(node.left, exprs), _operand(right, exprs))
    return ("truthy", _operand(node, exprs))


def _literal(node: ast.expr) -> tuple[str, Any] | None:
    try:
        return ("lit", ast.literal_eval(node))
    except _LITERAL_ERRORS:
        return None


def _operand(node: ast.expr, exprs: list[str]) -> tuple[str, Any]:
    literal = _literal(node)
    if literal is not None:
        return literal
    exprs.append(ast.unparse(node))
    return ("expr", len(exprs) - 1)


# ---------------------------------------------------------------- plain-data decoding and comparison
def decode(x: Any) -> Any:
    """Wire value -> plain Python value: lists; {"i": hex} big int; {"d": pairs}; {"s": items}; {"b": hex}."""
    if type(x) is list:
        return [decode(v) for v in x]
    if type(x) is not dict:
        return x
    if len(x) != 1:
        raise ValueError("bad tagged value")
    (tag, v), = x.items()
    if tag == "i" and type(v) is str:
        return int(v, 16)
    if tag == "b" and type(v) is str:
        return bytes.fromhex(v)
    if tag == "d" and type(v) is list and all(type(p) is list and len(p) == 2 for p in v):
        return {_hashable(decode(k)): decode(val) for k, val in v}
    if tag == "s" and type(v) is list:
        return {_hashable(decode(e)) for e in v}
    raise ValueError(f"bad tagged value {tag!r}")


def _hashable(x: Any) -> Any:
    """Dict keys and set items: lists (decoded tuples) back to tuples, sets to frozensets."""
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(v) for v in x)
    if isinstance(x, (set, frozenset)):
        return frozenset(x)
    if isinstance(x, dict):
        raise TypeError("unhashable dict key")
    return x


def same(got: Any, want: Any) -> bool:
    """Equality on plain data (module docstring): tuples equal lists, floats within FLOAT_REL_TOL."""
    numbers = (bool, int, float)
    if isinstance(got, numbers) and isinstance(want, numbers):
        if isinstance(got, float) or isinstance(want, float):
            try:
                return got == want or math.isclose(got, want, rel_tol=FLOAT_REL_TOL)
            except OverflowError:  # an int too large for a float: unequal to any finite float
                return False
        return got == want
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        want = {_hashable(k): v for k, v in want.items()}
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in got)
    if isinstance(got, (set, frozenset)) and isinstance(want, (set, frozenset)):
        return got == {_hashable(w) for w in want}
    return type(got) is type(want) and got == want


def _as_lists(x: Any) -> Any:
    return [_as_lists(v) for v in x] if isinstance(x, (list, tuple)) else x


_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def judge(op: str, left: Any, right: Any = None) -> bool:
    """Apply an assert's comparison to plain values, in the parent. Whatever cannot be compared fails
    (a 400-digit int against a float overflows math.isclose, a 1000-deep list overflows the stack)."""
    try:
        if op in ("truthy", "falsy"):
            return bool(left) == (op == "truthy")
        if op in ("==", "!="):
            return same(left, right) == (op == "==")
        if op in ("is", "is not"):
            return (left is right) == (op == "is")
        if op in _ORDER:
            return bool(_ORDER[op](_as_lists(left), _as_lists(right)))
        found = any(same(left, v) for v in right) if isinstance(right, (list, tuple, set, frozenset, dict)) \
            else _as_lists(left) in right
        return found == (op == "in")
    except (TypeError, ValueError, OverflowError, RecursionError):
        return False


# ---------------------------------------------------------------- the harness's side of a run
def harness_files(code: str, tests: CodeTests) -> dict[str, bytes]:
    """Files for the sandbox's work dir: the harness and its payload (code and expressions, no expected values)."""
    payload = json.dumps({"code": code, "exprs": list(tests.exprs), "entry": tests.entry})
    return {"harness.py": HARNESS.encode(), "payload.json": payload.encode()}


def read_results(channel: bytes) -> tuple[dict[int, tuple[bool, Any]], bool, str]:
    """(per expression index: (True, value) or (False, error); harness ready?; load error or "").

    Unreadable lines (forged, or cut at the output cap) are skipped, and an index reported twice counts as
    failed, so writing extra lines to the pipe gains nothing.
    """
    values: dict[int, tuple[bool, Any]] = {}
    ready, load_error = False, ""
    for raw in channel.split(b"\n"):
        try:
            line = json.loads(raw)
            if line.get("ready") is True:
                ready = True
            elif "load" in line:
                load_error = f"code failed to load: {str(line['load'])[:200]}"
            elif type(line.get("i")) is int:
                i = line["i"]
                entry = (True, decode(line["value"])) if line.get("ok") is True else \
                    (False, str(line.get("error"))[:200])
                values[i] = (False, "duplicated result line") if i in values else entry
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError):
            continue
    return values, ready, load_error


def score_asserts(tests: CodeTests, values: dict[int, tuple[bool, Any]]) -> list[tuple[bool, str]]:
    """(passed, why not) per assert, judged in the parent from the decoded values."""
    results = []
    for test in tests.asserts:
        outcome, why = _evaluate(test.check, values)
        if outcome is None:
            results.append((False, f"{test.source[:80]}: {why}"))
        else:
            results.append((outcome, "" if outcome else f"{test.source[:80]}: got {why}"))
    return results


def _evaluate(check: tuple, values: dict[int, tuple[bool, Any]]) -> tuple[bool | None, str]:
    """(truth, first sandbox value) or (None, why an operand is missing), short-circuiting like Python:
    an operand Python would not have evaluated may be missing."""
    kind = check[0]
    if kind in ("and", "or"):
        outcome, got = True, ""
        for sub in check[1]:
            outcome, why = _evaluate(sub, values)
            got = got or why
            if outcome is None or outcome == (kind == "or"):
                return outcome, why if outcome is None else got
        return outcome, got
    if kind == "not":
        outcome, why = _evaluate(check[1], values)
        return (None if outcome is None else not outcome), why
    operands = check[2:] if kind == "cmp" else check[1:]
    resolved = [(True, v) if side == "lit" else values.get(v, (False, MISSING)) for side, v in operands]
    missing = [why for ok, why in resolved if not ok]
    if missing:
        return None, missing[0]
    got = next(short(value) for (side, _), (_, value) in zip(operands, resolved) if side == "expr") \
        if any(side == "expr" for side, _ in operands) else ""
    args = [value for _, value in resolved]
    return (judge(check[1], *args) if kind == "cmp" else judge("truthy", *args)), got


def short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
