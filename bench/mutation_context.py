"""pytest plugin for bench/mutate_change.py's coverage run: which test ran each line.

Loaded with `-p mutation_context` while coverage measures the suite. Before each test it switches coverage's
dynamic context to the test's id in this process and exports the id as RLVR_MUTANT_CONTEXT, which the coverage
configuration names as its static context: a subprocess the test starts (`rlvr train`, torchrun ranks, a
reward-service worker) starts coverage from that configuration and records its lines under the same test.
At the end it writes each test's duration and outcome to the JSON file RLVR_MUTANT_OUTCOMES names.
"""
from __future__ import annotations

import json
import os
import time

import pytest

_durations: dict[str, float] = {}
_failed: set[str] = set()


def _switch(context: str) -> None:
    import coverage
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(context)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    os.environ["RLVR_MUTANT_CONTEXT"] = item.nodeid
    _switch(item.nodeid)
    started = time.monotonic()
    try:
        yield
    finally:
        _durations[item.nodeid] = time.monotonic() - started
        os.environ.pop("RLVR_MUTANT_CONTEXT", None)
        _switch("")


def pytest_runtest_logreport(report):
    if report.failed:
        _failed.add(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    target = os.environ.get("RLVR_MUTANT_OUTCOMES")
    if target:
        with open(target, "w") as handle:
            json.dump({"durations": _durations, "failed": sorted(_failed)}, handle)
