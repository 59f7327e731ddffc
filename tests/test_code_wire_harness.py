"""Mutation testing: the harness program's own loop and start-up, run in this process.

code/harness_main.py runs inside the sandbox as a program of its own, where coverage cannot see it; here its
functions run in the test process with its I/O stood in for: `_serve` reads request lines from a fake `read`,
`main` runs with `os.dup2`/`os.dup` recorded and `_serve` replaced, and the decoder, runner and answerer answer the
requests the parent's chains (code/chains.py) send.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from code_judging import judge_code as judge
from rlvr.verifiers.code import harness_main


class Exited(Exception):
    """The harness called its `exit`: the parent closed the requests."""


def serve(chunks: list[bytes]) -> list[tuple[bytes, int]]:
    """The (line, n) pairs _serve answers when the parent's requests arrive in these read() chunks."""
    answered: list[tuple[bytes, int]] = []
    sent: list[object] = []
    pending = list(chunks)

    def read(fd: int, size: int) -> bytes:
        assert fd == 7 and size == 1 << 16
        return pending.pop(0) if pending else b""

    def exit_(code: int) -> None:
        raise Exited(code)

    def answer(line: bytes, n: int) -> dict:
        answered.append((line, n))
        return {"n": n}

    with pytest.raises(Exited) as done:
        harness_main._serve(7, sent.append, answer, read=read, exit=exit_)
    assert done.value.args == (0,)
    assert sent == [{"n": n} for n in range(len(answered))]  # one result line per request, in order
    return answered


def test_serve_answers_each_request_line_once_in_order():
    # a line split across reads is answered once it is whole; two lines in one read are answered one by one
    chunks = [b'{"root": "f",', b' "ops": []}\n{"root": "g", "ops": []}\n', b'{"root"', b': "h"}\n']
    assert serve(chunks) == [(b'{"root": "f", "ops": []}', 0), (b'{"root": "g", "ops": []}', 1),
                             (b'{"root": "h"}', 2)]


def test_serve_stops_when_the_parent_closes_the_requests():
    assert serve([]) == []
    assert serve([b"\n"]) == [(b"", 0)]  # an empty line is a request too (answered as unreadable)
    assert serve([b'{"root": "f"}']) == []  # a last line without its newline is never answered


def test_main_hides_the_candidates_stdio_before_its_code_runs(tmp_path, monkeypatch):
    """main() in this process: the payload's code runs with stdin, stdout and stderr on /dev/null (the
    candidate's prints cost the trainer nothing), and the requests come from a copy of stdin taken before."""
    (tmp_path / "payload.json").write_text(json.dumps({"code": "import os\nLOADED = 1\n", "entry": None}))
    monkeypatch.chdir(tmp_path)
    channel_r, channel_w = os.pipe()
    monkeypatch.setattr(sys, "argv", ["harness.py", str(channel_w)])
    monkeypatch.setitem(sys.modules, "solution", None)  # main() installs its own; removed again afterwards
    devnull = os.stat(os.devnull).st_rdev
    events: list[tuple] = []

    def dup(fd: int) -> int:
        events.append(("dup", fd))
        return 99

    def dup2(src: int, dst: int) -> None:  # recorded, not done: pytest's own stdio stays where it is
        events.append(("dup2", os.fstat(src).st_rdev == devnull, dst))

    def fake_serve(requests: int, send, answer) -> None:
        events.append(("serve", requests, sys.modules["solution"].__dict__.get("LOADED")))

    monkeypatch.setattr(os, "dup", dup)
    monkeypatch.setattr(os, "dup2", dup2)
    monkeypatch.setattr(harness_main, "_serve", fake_serve)
    try:
        harness_main.main()
    finally:
        os.close(channel_w)
    with os.fdopen(channel_r, "rb") as channel:
        lines = channel.read().decode().splitlines()
    assert events == [("dup", 0), ("dup2", True, 0), ("dup2", True, 1), ("dup2", True, 2), ("serve", 99, 1)]
    assert [json.loads(line) for line in lines] == [{"ready": True}, {"loaded": True}]



CODE = ("n = 0\ndef nxt():\n    global n\n    n += 1\n    return n\ndef ident(x):\n    return x\n"
        "def lst():\n    return [1, 2, 2]\ndef triple(a, b, c):\n    return (a, b, c)\n")


def test_a_nested_chain_runs_to_its_end_in_the_sandbox():
    # ident(lst().count(2)) is one request: the sandbox runs lst().count(2) whole (2), though lst() is plain data
    # by itself; stopping there would hand ident the list [1, 2, 2]
    oks, sent = judge(CODE, "assert ident(lst().count(2)) == 2", "assert ident(lst().count(2)) != [1, 2, 2]")
    assert oks == [True, True]
    assert len(sent) == 2 and sent[0]["ops"][0][1][0]["call"]["root"] == "lst"


def test_a_handle_after_other_arguments_refers_to_its_own_request():
    # nxt() before a loud argument (nxt() * 10) runs first and is kept in the sandbox: each handle names the
    # request that made it, whatever its position. Python: nxt() = 1, then nxt() * 10 = 20; then 3, 4 and 50
    oks, sent = judge(CODE, "assert triple(7, nxt(), nxt() * 10) == (7, 1, 20)",
                      "assert triple(nxt(), nxt(), nxt() * 10) == (3, 4, 50)")
    assert oks == [True, True]
    # requests: nxt (kept, 0), nxt (plain, 1), triple (2); then nxt (3), nxt (4), nxt (5), triple (6)
    assert sent[2]["ops"][0][1] == [7, {"ref": 0}, 20]
    assert sent[6]["ops"][0][1] == [{"ref": 3}, {"ref": 4}, 50]
