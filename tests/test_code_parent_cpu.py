"""Issue #24: the parent (the trainer) spends <= 0.2 s of CPU per code completion, whatever the candidate outputs.

The adversarial set is bench/verifiers.py's own (`--adversarial` prints the same measurements), so the bench and
this check cannot drift apart. CPU is time.process_time() of this process around verify(): the sandbox's work is
in other processes and not counted. Every completion in the set is wrong, so each must also score below 1.
"""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.sandbox import SandboxConfig, probe

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


@pytest.fixture(scope="module")
def verifier():
    from rlvr.verifiers.code import CodeVerifier

    verifier = CodeVerifier(sandbox=SandboxConfig(time_limit_s=1.0))
    verifier.verify(BENCH.CODE, BENCH.REFERENCE)  # warm: first-call imports are not the candidate's doing
    return verifier


@pytest.mark.parametrize("name", sorted(CASES))
def test_parent_cpu_per_adversarial_completion(verifier, name):
    (cpu, _, verdict), = BENCH.parent_cpu(verifier, {name: CASES[name]}).values()
    assert verdict.outcome is not Outcome.CORRECT and verdict.score < 1, verdict
    assert cpu <= BENCH.PARENT_CPU_GOAL_S, f"{name}: {cpu:.3f} s of parent CPU ({verdict.detail})"
