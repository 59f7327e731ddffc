"""A reference's `check(candidate)` program, as HumanEval writes its tests.

Reference: {"check": "<Python source that defines check(candidate)>", "entry": "<the function under test>"}.
HumanEval's `test` field is such a program; so is the problem's prompt followed by it (helpers like HumanEval/32's
`poly` or /38's `encode_cyclic` are then the reference's own, trusted code, never the candidate's).

The program is trusted reference code, run as Python in the parent, as the asserts are judged there; the
candidate's code still runs only in the sandbox. `candidate` (and the entry's name, bound after the program's own
definitions run) is a proxy: each call encodes its arguments (code/wire), goes to the completion's live sandbox
session (code/session.py) in the order the program makes it, and returns the decoded plain value, so `==`, `is`,
`type()` act on the parent's own objects (a forged `__eq__` never runs here). When the candidate raised, the proxy
raises the first built-in class of that exception (`except ValueError:` in the program catches it); any other
failure (timeout, exit, unreadable or unserialisable result, a value over a bound) raises Stop, which
`except Exception` does not catch, and fails the test whatever the program does next. The program's costly
operations are bounded (code/check_guard.py) and all of it counts against the completion's CPU budget.

A check program is one test: it passes when check(candidate) returns, at least one candidate call was answered,
and nothing tripped. A constant `assert True, "..."` in it simply runs.
"""
from __future__ import annotations

import ast
import builtins
import random
import traceback
import types
from dataclasses import dataclass
from types import CodeType
from typing import Any

from rlvr.verifiers.code.budget import Failed, spent, trips
from rlvr.verifiers.code.chains import write_back
from rlvr.verifiers.code.check_guard import PREFIX, Guards, Rewrite, Stop
from rlvr.verifiers.code.evaluate import BadReference, CallResult, CandidateCall, Resolve
from rlvr.verifiers.code.harness import printable
from rlvr.verifiers.code.wire import encode

MAX_CHECK_BYTES = 256 << 10
_ENDS_LOOPS = (StopIteration, StopAsyncIteration)  # never re-raised: a failure (_rebuilt)
_FILENAME = "<check program>"


@dataclass(frozen=True)
class CheckProgram:
    source: str
    code: CodeType  # the rewritten program (code/check_guard.Rewrite), compiled once when the reference is read


def parse_check(source: Any, entry: str | None) -> CheckProgram:
    """The compiled program; BadReference says why when it cannot be one."""
    if not isinstance(source, str) or not source.strip() or len(source.encode("utf-8", "replace")) > MAX_CHECK_BYTES:
        raise BadReference(f"'check' must be a non-empty program of Python source up to {MAX_CHECK_BYTES} bytes")
    if entry is None:
        raise BadReference("a 'check' program needs an 'entry': the candidate's function that `candidate` stands for")
    try:
        tree = ast.parse(source, _FILENAME)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise BadReference(f"the check program does not parse ({err})") from None
    if not any(isinstance(stmt, ast.FunctionDef) and stmt.name == "check" and stmt.args.args + stmt.args.posonlyargs
               for stmt in tree.body):
        raise BadReference("the check program defines no `def check(candidate):` at its top level")
    names = {getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None) or ""
             for node in ast.walk(tree)} | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    # an import's alias and a global/nonlocal statement bind names that the nodes' id/attr/name do not show
    names |= {node.asname for node in ast.walk(tree) if isinstance(node, ast.alias) and node.asname}
    names |= {name for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal)) for name in node.names}
    if any(name.startswith(PREFIX) for name in names if isinstance(name, str)):
        raise BadReference(f"the check program uses a name starting with {PREFIX!r}, which rlvr reserves")
    try:
        code = compile(ast.fix_missing_locations(Rewrite().visit(tree)), _FILENAME, "exec")
    except (SyntaxError, ValueError, RecursionError) as err:
        raise BadReference(f"the check program does not compile ({err})") from None
    return CheckProgram(source, code)


class Candidate:
    """`candidate` in a check program: each call runs in the sandbox, in order (module docstring)."""

    def __init__(self, entry: str, resolve: Resolve, guards: Guards):
        self._entry, self._resolve, self._guards = entry, resolve, guards
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            ops = [["call", [encode(a) for a in args], [[k, encode(v)] for k, v in kwargs.items()]]]
        except Failed as err:
            raise self._guards.stop(err) from None
        result = self._resolve(CandidateCall(self._entry, ops))
        try:
            for _, key, value in result.after:  # what the call changed in its arguments, as Python would see it
                write_back(args[key] if type(key) is int else kwargs[key], value)
        except Failed as err:
            raise self._guards.stop(err) from None
        self.calls += result.ok or bool(result.raised)  # answered: a value, or an exception the candidate raised
        if result.ok:
            return result.value
        raise _rebuilt(result) or self._guards.stop(Failed(f"{self._entry}: {result.value}"))

    def __repr__(self) -> str:
        return f"<the candidate's {self._entry}>"


def _rebuilt(result: CallResult) -> Exception | None:
    """The candidate's exception as a built-in one the program can catch, or None when it is not one: not a
    BaseException outside Exception (KeyboardInterrupt would end the trainer), and not StopIteration, which would
    silently end the program's own loop (before, `all(map(lambda x: candidate(x) == ..., xs))` passed
    when the candidate raised it)."""
    cls = getattr(builtins, result.raised, None) if result.raised else None
    if not (isinstance(cls, type) and issubclass(cls, Exception)) or issubclass(cls, _ENDS_LOOPS):
        return None
    message = result.value.split(": ", 1)[1] if ": " in result.value else result.value
    for base in cls.__mro__:  # UnicodeDecodeError takes five arguments: the nearest class that takes one
        try:
            return base(message)
        except Exception:
            continue
    return None


def run_check(program: CheckProgram, entry: str, resolve: Resolve) -> tuple[bool, str]:
    """(passed, why not) of one check program against the candidate behind `resolve`."""
    guards, tripped_before = Guards(), trips()
    candidate = Candidate(entry, resolve, guards)
    namespace: dict[str, Any] = {"__builtins__": _own_builtins(), "__name__": "rlvr_check", **guards.namespace()}
    try:
        exec(program.code, namespace)  # trusted: defines check() and its helpers
        namespace[entry] = candidate  # the entry's name is the candidate's, whatever the program defined
        namespace["check"](candidate)
    except (Exception, Stop, SystemExit) as err:
        return False, _why(err, program, guards, candidate)
    if guards.tripped or spent() or trips() != tripped_before:
        return False, f"check(candidate) stopped: {guards.tripped or 'the CPU budget is spent or a bound tripped'}"
    if candidate.calls == 0:
        return False, "check(candidate) returned without calling the candidate"
    return True, ""


def _own_builtins() -> dict[str, Any]:
    """Python's builtins, whose `import random` gives the program a `random` module of its own: its functions bound
    to a new random.Random(0) (before, HumanEval/53's unseeded draws moved the trainer's global
    generator, so the next random.random() depended on the candidate). A program's draws are then the same on
    every run, and nobody else's."""
    own = types.ModuleType("random", random.__doc__)
    generator = random.Random(0)
    for name, value in vars(random).items():
        if not name.startswith("__"):
            setattr(own, name, getattr(generator, name) if getattr(value, "__self__", None) is random._inst else value)
    own._inst = generator
    real = builtins.__import__

    def import_(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        return own if name == "random" and level == 0 else real(name, globals, locals, fromlist, level)
    return {**vars(builtins), "__import__": import_}


def _why(err: BaseException, program: CheckProgram, guards: Guards, candidate: Candidate) -> str:
    if guards.tripped:
        return f"check(candidate) stopped: {guards.tripped}"
    line = next((frame.lineno for frame in reversed(traceback.extract_tb(err.__traceback__))
                 if frame.filename == _FILENAME), None)
    text = program.source.splitlines()[line - 1].strip() if line and line <= len(program.source.splitlines()) else ""
    where = f" at line {line}: {text[:120]}" if line else ""
    message = printable(str(err))[:150]
    return f"check(candidate) raised {type(err).__name__}{': ' + message if message else ''}{where}"
