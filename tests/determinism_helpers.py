"""Verifier factories for tests/test_determinism.py.

They live in an importable, torch-free module (not the test file) because a reward worker imports the factory by
name, and a worker that imported torch would take seconds to start. A random tiny model never writes a correct
answer, so every group would tie and nothing would be learned: this verifier, put under the task's verifier name,
rewards completions that open with a digit (about one in ten of a random model's), so some groups tie (dynamic
sampling draws again) and the others teach something (the weights move).
"""
from __future__ import annotations

import os
import random
import time

from rlvr.types import Outcome, Verdict

DELAY_LOG = "RLVR_TEST_DELAY_LOG"  # environment variable: the file the slow verifier appends "pid seconds" lines to
MAX_DELAY_S = 0.03  # far below reward.deadline_s (30 s): a delay may reorder verdicts, never time one out


class OpensWithDigit:
    name = "math"

    def verify(self, completion: str, reference: str) -> Verdict:
        if completion[:1].isdigit():
            return Verdict(Outcome.CORRECT, 1.0, "opens with a digit")
        return Verdict(Outcome.WRONG, 0.0, "opens with no digit")


class SlowOpensWithDigit(OpensWithDigit):
    """The same verdicts after a real sleep of 0 to MAX_DELAY_S, drawn from the OS's entropy (unseeded), so the two
    workers finish their chunks in an order that changes from run to run."""

    def verify(self, completion: str, reference: str) -> Verdict:
        delay = random.SystemRandom().uniform(0.0, MAX_DELAY_S)
        time.sleep(delay)
        with open(os.environ[DELAY_LOG], "a") as log:
            log.write(f"{os.getpid()} {delay:.4f}\n")
        return super().verify(completion, reference)


def digit_factory(task) -> dict:
    return {name: OpensWithDigit() for name in task.verifiers}


def slow_digit_factory(task) -> dict:
    return {name: SlowOpensWithDigit() for name in task.verifiers}
