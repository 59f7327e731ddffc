"""A pytest runner that imports the heavy libraries once and forks a fresh child per mutant.

bench/mutate_change.py starts one per scratch copy (cwd and PYTHONPATH: the copy). Most of a small test run is
importing torch and transformers (~3-5 s on this machine); here that happens once. The parent never imports rlvr:
each child imports it from the copy on disk, after the mutant was written there, and so does every subprocess a
test starts. The parent never runs a torch operation either, so no thread pool exists to be broken by fork.

Protocol, one JSON object a line: in {"tests": [...], "timeout": seconds}; out {"code": exit status or null when it
timed out, "output": the last 4000 characters the tests printed}.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time

PRELOADED = ("torch", "transformers", "numpy", "pytest", "safetensors", "jsonschema", "pydantic", "yaml")


def _preload() -> None:
    for name in PRELOADED:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a library the project lacks is imported (or not) by the tests themselves
            pass


def _child(tests: list[str], output: int) -> None:
    os.setsid()  # its own group: a timeout kills the trainers and workers its tests started too
    os.dup2(output, 1)
    os.dup2(output, 2)
    import pytest
    code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", *tests])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    return None


def run(tests: list[str], timeout: float) -> dict:
    with tempfile.TemporaryFile() as output:
        pid = os.fork()
        if pid == 0:
            try:
                _child(tests, output.fileno())
            finally:
                os._exit(70)
        code = _wait(pid, timeout)
        output.seek(0)
        text = output.read().decode(errors="replace")
    return {"code": code, "output": text[-4000:]}


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # bench/'s modules shadow nothing
    _preload()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(run(request["tests"], float(request["timeout"]))), flush=True)


if __name__ == "__main__":
    main()
