"""The parent (the trainer) spends <= 0.2 s of CPU per code completion, whatever the candidate outputs.

The adversarial set is bench/verifiers.py's own (`--adversarial` prints the same measurements), so the bench and
this check cannot drift apart. CPU is time.process_time() of the verifying process around verify(): the sandbox's
work is in other processes and not counted. Every completion in the set is wrong, so each must also score below 1.
The measurement runs in a child process of its own: process_time() counts every thread of a process, and in the
full suite a thread left running by an earlier test was charged to the verifier (0.55 s for a case that costs
0.10 s alone; seen once, 2026-11-26).
"""
from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.code.sandbox import probe

_PROBE = probe()  # cached; the `sandbox` mark decides skip or fail
pytestmark = pytest.mark.sandbox  # skips without bubblewrap, fails under CI=true (conftest.py)
_BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "verifiers.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_verifiers", _BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
CASES = BENCH.adversarial_code_cases()


_CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("bench_verifiers", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
from rlvr.verifiers.code.verifier import CodeVerifier
from rlvr.verifiers.code.sandbox import SandboxConfig
verifier = CodeVerifier(sandbox=SandboxConfig(time_limit_s=1.0))
verifier.verify(bench.CODE, bench.REFERENCE)  # warm: first-call imports are not the candidate's doing
table = bench.parent_cpu(verifier, bench.adversarial_code_cases())
print(json.dumps({name: [cpu, v.outcome.value, v.score, v.detail] for name, (cpu, _, v) in table.items()}))
"""


@pytest.fixture(scope="module")
def measured() -> dict[str, list]:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(_BENCH)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(CASES))
def test_parent_cpu_per_adversarial_completion(measured, name):
    cpu, outcome, score, detail = measured[name]
    assert outcome != Outcome.CORRECT.value and score < 1, (outcome, score, detail)
    assert cpu <= BENCH.PARENT_CPU_GOAL_S, f"{name}: {cpu:.3f} s of parent CPU ({detail})"
