"""The sandbox's side of a session: the harness program it runs (harness_main.py), its payload, the requests the
parent writes and the parent's reading of the harness's lines (code/session.py drives them; wire.py says what a
line's value may be).

Protocol (one live run per completion, calls answered one at a time in the parent's order):
harness -> parent `{"ready": true}` (the harness is up), then `{"loaded": true}` or `{"load": why}` (the code ran);
then for the n-th request line `{"root": name, "ops": [...]}` one line `{"n": n, "ok": true, "value": V,
"done": k}` or `{"n": n, "ok": false, "error": why, "exc": built-in class}`. Chains (code/chains.py): a request
may start from the value an earlier one kept (`"ref": m`) and ask to keep its own (`"keep": "prefix"` keeps a value
that is not plain data, `"handle"` keeps any, answered `{"n": n, "ok": true, "kept": true, "done": k}`); an
argument `{"ref": m}` is that kept value; and a reply lists the container arguments the call changed, `"after":
[[op, position or keyword, V], ...]`, for the parent to write back. A line that is not the one expected
next ends the session: every later call fails (a forged line can only claim a value the function could have
returned, so there is nothing to resynchronise for).
"""
from __future__ import annotations

import json
from pathlib import Path

from rlvr.verifiers.code.budget import DECODE_S_PER_BYTE, Failed, OverBudget, check
from rlvr.verifiers.code.chains import HANDLE, CallResult, CandidateCall
from rlvr.verifiers.code.wire import Reader

HARNESS = Path(__file__).with_name("harness_main.py").read_bytes()


class Desync(ValueError):
    """The line is not the one the protocol expects next: the session ends."""


def harness_files(code: str, entry: str | None) -> dict[str, bytes]:
    """Files for the sandbox's work dir: the harness and its payload (the code; no call, no expected value)."""
    return {"harness.py": HARNESS, "payload.json": json.dumps({"code": code, "entry": entry}).encode()}


def request(call: CandidateCall) -> bytes:
    line = {"root": call.root, "ops": call.ops}
    if call.ref is not None:
        line["ref"] = call.ref
    if call.keep:
        line["keep"] = call.keep
    return (json.dumps(line) + "\n").encode()


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
    done, after = line.get("done", 0), _after(line.get("after", []), call)
    if line.get("ok") is True and type(done) is int and 0 <= done <= len(call.ops):
        if "value" in line and call.keep != HANDLE:
            return CallResult(True, line["value"], done, after=after)
        if line.get("kept") is True and call.keep:
            return CallResult(True, None, done, after=after, kept=n)
    if line.get("ok") is False:
        raised = line.get("exc") if type(line.get("exc")) is str else ""
        return CallResult(False, printable(str(line.get("error")))[:200], 0, raised[:40], after)
    raise Desync("a malformed result line")


def _after(after: object, call: CandidateCall) -> tuple:
    """The reply's arguments the call changed: ((op, position or keyword, value), ...), each naming one of the
    call's own arguments; anything else is a malformed line."""
    if type(after) is not list:
        raise Desync("a malformed result line")
    for entry in after:
        if not (type(entry) is list and len(entry) == 3 and type(entry[0]) is int
                and 0 <= entry[0] < len(call.ops) and call.ops[entry[0]][0] == "call"
                and (type(entry[1]) is int and 0 <= entry[1] < len(call.ops[entry[0]][1])
                     or type(entry[1]) is str and any(k == entry[1] for k, _ in call.ops[entry[0]][2]))):
            raise Desync("a malformed result line")
    return tuple(tuple(entry) for entry in after)


def printable(text: str) -> str:
    """Lone surrogates (a candidate's `raise ValueError('\\ud800')`) cannot be written as UTF-8: escape them."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
