"""The sandbox's side of a session: the harness program it runs (harness_main.py), its payload, the requests the
parent writes and the parent's reading of the harness's lines (code/session.py drives them; wire.py says what a
line's value may be).

Protocol (issue 43: one live run per completion, calls answered one at a time in the parent's order):
harness -> parent `{"ready": true}` (the harness is up), then `{"loaded": true}` or `{"load": why}` (the code ran);
then for the n-th request line `{"root": name, "ops": [...]}` one line `{"n": n, "ok": true, "value": V,
"done": k}` or `{"n": n, "ok": false, "error": why, "exc": built-in class}`. A line that is not the one expected
next ends the session: every later call fails (a forged line can only claim a value the function could have
returned, so there is nothing to resynchronise for).
"""
from __future__ import annotations

import json
from pathlib import Path

from rlvr.verifiers.code.budget import DECODE_S_PER_BYTE, Failed, OverBudget, check
from rlvr.verifiers.code.evaluate import CallResult, CandidateCall
from rlvr.verifiers.code.wire import Reader

HARNESS = Path(__file__).with_name("harness_main.py").read_bytes()


class Desync(ValueError):
    """The line is not the one the protocol expects next: the session ends."""


def harness_files(code: str, entry: str | None) -> dict[str, bytes]:
    """Files for the sandbox's work dir: the harness and its payload (the code; no call, no expected value)."""
    return {"harness.py": HARNESS, "payload.json": json.dumps({"code": code, "entry": entry}).encode()}


def request(call: CandidateCall) -> bytes:
    return (json.dumps({"root": call.root, "ops": call.ops}) + "\n").encode()


def read_start(raw: bytes, expected: str) -> str:
    """The harness's `ready` or `loaded` line -> "" when it is the expected one, the load error for `load`."""
    try:
        line = json.loads(raw)
    except (ValueError, RecursionError):
        raise Desync("unreadable line from the harness") from None
    if not isinstance(line, dict) or len(line) != 1:
        raise Desync("unexpected line from the harness")
    if line.get(expected) is True:
        return ""
    if expected == "loaded" and "load" in line:
        return f"code failed to load: {printable(str(line['load']))[:200]}"
    raise Desync("unexpected line from the harness")


def read_reply(raw: bytes, n: int, call: CandidateCall) -> CallResult:
    """The reply to request `n`. A value that trips a bound or the parent's budget fails the call (the line was
    read whole, so the session stays in step; OverBudget propagates); any other line raises Desync."""
    check(len(raw) * DECODE_S_PER_BYTE)  # json.loads of one line cannot be interrupted
    try:
        line = Reader().loads(raw, untagged=1)
    except OverBudget:
        raise
    except Failed as err:
        if raw.startswith(b'{"n": %d, "ok": true, "value": ' % n):  # how the harness starts a reply
            return CallResult(False, f"result refused: {err}")
        raise Desync("unreadable result line") from None
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError):
        raise Desync("unreadable result line") from None
    if not isinstance(line, dict) or line.get("n") != n or type(line.get("n")) is not int:
        raise Desync("a result line out of order")
    done = line.get("done", 0)
    if line.get("ok") is True and "value" in line and type(done) is int and 0 <= done <= len(call.ops):
        return CallResult(True, line["value"], done)
    if line.get("ok") is False:
        raised = line.get("exc") if type(line.get("exc")) is str else ""
        return CallResult(False, printable(str(line.get("error")))[:200], 0, raised[:40])
    raise Desync("a malformed result line")


def printable(text: str) -> str:
    """Lone surrogates (a candidate's `raise ValueError('\\ud800')`) cannot be written as UTF-8: escape them."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
