"""Test-only verifier factories for tests/test_reward_service.py.

They live in an importable module (not the test file) because a worker process imports the factory by name.
The trap wraps the real "math" verifier and misbehaves only on magic completions.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

from rlvr.verifiers import build_verifiers

HANG = "<<hang forever>>"  # optionally followed by a file path, touched once the hang has begun
CRASH = "<<crash always>>"
CRASH_ONCE = "<<crash once>>"  # followed by a flag-file path, then the real completion on the next line


class TrapVerifier:
    name = "math"

    def __init__(self, inner):
        self.inner = inner

    def verify(self, completion: str, reference: str):
        if completion.startswith(HANG):
            if completion != HANG:
                Path(completion[len(HANG):]).touch()
            threading.Event().wait()  # sleeps forever without using CPU
        if completion == CRASH:
            os._exit(1)
        if completion.startswith(CRASH_ONCE):
            flag, _, completion = completion[len(CRASH_ONCE):].partition("\n")
            if not Path(flag).exists():  # the first worker to see it leaves a mark, then dies
                Path(flag).touch()
                os._exit(3)
        return self.inner.verify(completion, reference)


def trap_factory(task):
    verifiers = build_verifiers(task)
    verifiers["math"] = TrapVerifier(verifiers["math"])
    return verifiers


def failing_factory(task):
    raise RuntimeError("no verifiers for you")
