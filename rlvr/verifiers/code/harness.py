"""The sandbox's side of a round of asserts: the harness that runs the candidate's calls, its payload, and
the parent's reading of its result lines (reference.py says how the rounds judge them, wire.py what a
line's value may be).
"""
from __future__ import annotations

import json
import re

from rlvr.verifiers.code.budget import DECODE_S_PER_BYTE, Failed, OverBudget, check
from rlvr.verifiers.code.evaluate import CallResult, CandidateCall
from rlvr.verifiers.code.wire import Reader

SPECULATIVE_MARK = b'{"speculative": true}\n'  # the harness's line before its first speculative call
_RESULT_START = re.compile(rb'\{"i": (\d{1,9}), "ok": true, "value": ')  # how the harness starts a result line

# Runs inside the sandbox under Debian's python3. Everything it needs is bound before the candidate runs; the
# candidate can still tamper with all of it, but can only ever report values its functions could have returned.
HARNESS = r'''
import json, os, sys
from collections import Counter, OrderedDict
from fractions import Fraction

def main(type=type, hex=hex, dumps=json.dumps, write=os.write, BaseException=BaseException, issubclass=issubclass,
         getattr=getattr, len=len, slice=slice, dict=dict, list=list, tuple=tuple, set=set, frozenset=frozenset,
         int=int, float=float, str=str, bytes=bytes, iter=iter, range=range, Counter=Counter,
         OrderedDict=OrderedDict):
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
        if tag == "o":
            return OrderedDict([(decode(k), decode(val)) for k, val in v])
        if tag == "k":
            return Counter({decode(k): decode(val) for k, val in v})
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
        if issubclass(t, OrderedDict):  # before dict: Python compares two OrderedDicts by order (C items: no overrides)
            return {"o": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in OrderedDict.items(x)]}
        if issubclass(t, Counter):  # before dict: Python compares Counters with missing keys as zero
            return {"k": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(x)]}
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
    calls, needed = payload["calls"], payload["needed"]
    send({"ready": True})
    null = os.open(os.devnull, os.O_WRONLY)  # the candidate's prints cost the trainer nothing (issue #24)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
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
        if i == needed:  # the parent gives the speculative calls that follow their own share of the time
            send({"speculative": True})
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


def harness_files(code: str, calls: list[CandidateCall], entry: str | None,
                  needed: int | None = None) -> dict[str, bytes]:
    """Files for the sandbox's work dir: the harness and its payload (code and call chains, no expected values).
    The first `needed` calls (default: all) are the ones Python makes; the harness marks where the rest begin."""
    payload = json.dumps({"code": code, "calls": [{"root": c.root, "ops": c.ops} for c in calls], "entry": entry,
                          "needed": len(calls) if needed is None else needed})
    return {"harness.py": HARNESS.encode(), "payload.json": payload.encode()}


def read_results(channel: bytes, calls: list[CandidateCall]) -> tuple[dict[int, CallResult], bool, str]:
    """(per call index: its result; harness ready?; load error or "").

    Unreadable lines (forged, or cut at the output cap) are skipped, and an index reported twice counts as
    failed, so writing extra lines to the pipe gains nothing. A result whose value trips a bound or the
    parent's budget fails its call, saying so.
    """
    results: dict[int, CallResult] = {}
    ready, load_error, reader = False, "", Reader()
    for raw in channel.split(b"\n"):
        try:
            check(len(raw) * DECODE_S_PER_BYTE)  # json.loads of one line cannot be interrupted
            line = reader.loads(raw, untagged=1)
            if line.get("ready") is True:
                ready = True
            elif "load" in line:
                load_error = f"code failed to load: {printable(str(line['load']))[:200]}"
            elif type(line.get("i")) is int and 0 <= line["i"] < len(calls):
                i, done = line["i"], line.get("done", 0)
                if line.get("ok") is True and type(done) is int and 0 <= done <= len(calls[i].ops):
                    result = CallResult(True, line["value"], done)
                else:
                    result = CallResult(False, printable(str(line.get("error")))[:200])
                results[i] = CallResult(False, "duplicated result line") if i in results else result
        except OverBudget as err:  # the rest is not read: every call still without a result fails, saying why
            results.update({i: CallResult(False, str(err)) for i in range(len(calls)) if i not in results})
            break
        except Failed as err:
            found = _RESULT_START.match(raw)
            if found and int(found[1]) < len(calls):
                i = int(found[1])
                results[i] = CallResult(False, "duplicated result line" if i in results else f"result refused: {err}")
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError):
            continue
    return results, ready, load_error


def printable(text: str) -> str:
    """Lone surrogates (a candidate's `raise ValueError('\\ud800')`) cannot be written as UTF-8: escape them."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
