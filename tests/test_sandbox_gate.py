"""The `sandbox` mark (tests/conftest.py): without bubblewrap, sandbox tests skip off CI and FAIL under CI=true,
so CI can never pass with the security suite skipped. Needs no sandbox itself."""
from __future__ import annotations

import os


def _run_marked_test_without_sandbox(tmp_path, ci: str | None) -> tuple[int, str]:
    """A `sandbox`-marked test in a scratch pytest run where the probe reports no sandbox."""
    import subprocess
    import sys
    from pathlib import Path

    conftest = Path(__file__).with_name("conftest.py").read_text().replace("from __future__ import annotations", "")
    (tmp_path / "conftest.py").write_text(
        "from rlvr.verifiers.code import sandbox\n"
        "sandbox._probe = sandbox.Probe(False, 'simulated: no bwrap')\n" + conftest)
    (tmp_path / "test_needs_sandbox.py").write_text(
        "import pytest\npytestmark = pytest.mark.sandbox\n\ndef test_x():\n    assert True\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci else {})
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
                          str(tmp_path)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    return run.returncode, run.stdout + run.stderr


def test_sandbox_tests_fail_not_skip_under_ci(tmp_path):
    code, out = _run_marked_test_without_sandbox(tmp_path, "true")
    assert code == 1 and "1 error" in out and "simulated: no bwrap" in out, out  # fails in setup: an error


def test_sandbox_tests_skip_off_ci(tmp_path):
    code, out = _run_marked_test_without_sandbox(tmp_path, None)
    assert code == 0 and "1 skipped" in out and "error" not in out, out
