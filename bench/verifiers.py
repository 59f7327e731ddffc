"""Verifier throughput on this machine: sandboxed code verifications/s (sequential and with parallel threads),
the same harness as a bare subprocess (no bwrap, cgroup, rlimits, seccomp) for the sandbox's overhead, and
math verifications/s (numeric fast path, and LaTeX through math-verify in its worker process).

    .venv/bin/python bench/verifiers.py [--n 40] [--threads 2 4] [--math-n 2000] [--latex-n 100]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from rlvr.verifiers.code import CodeVerifier
from rlvr.verifiers.code_tests import AssertRounds, harness_files, parse_reference, read_results
from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.sandbox import SYSTEM_PYTHON, SandboxConfig, probe

CODE = "```python\ndef add(a, b):\n    return a + b\n```"
REFERENCE = json.dumps({"asserts": ["assert add(1, 2) == 3", "assert add(-5, 5) == 0", "assert add(10, 32) == 42"]})
IO_CODE = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
IO_REFERENCE = json.dumps({"io": [{"input": "1 2\n", "output": "3\n"}]})


def rate(fn, n: int, threads: int = 1) -> float:
    """Calls per second of fn() over n calls, spread over `threads` threads."""
    start = time.perf_counter()
    if threads == 1:
        for _ in range(n):
            fn()
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda _: fn(), range(n)))
    return n / (time.perf_counter() - start)


def bare_verify() -> bool:
    """The assert harness as a plain subprocess in a temp dir: what the sandbox layers are compared with."""
    rounds = AssertRounds(parse_reference(REFERENCE))
    while calls := rounds.calls():
        with tempfile.TemporaryDirectory() as work:
            for name, content in harness_files("def add(a, b):\n    return a + b", calls, None).items():
                with open(os.path.join(work, name), "wb") as f:
                    f.write(content)
            r, w = os.pipe()
            proc = subprocess.Popen([SYSTEM_PYTHON, "-I", "-B", "harness.py", str(w)], cwd=work, pass_fds=(w,),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            os.close(w)
            chunks = []
            while chunk := os.read(r, 1 << 16):
                chunks.append(chunk)
            os.close(r)
            proc.wait()
        rounds.record(calls, read_results(b"".join(chunks), calls)[0])
    return all(ok for ok, _ in rounds.outcomes())


def bench_code(n: int, threads: list[int]) -> None:
    state = probe()
    print(f"sandbox: {state.reason}")
    if not state.ok:
        print("code: skipped (no sandbox)")
        return
    verifier = CodeVerifier(sandbox=SandboxConfig(time_limit_s=10.0))
    assert verifier.verify(CODE, REFERENCE).score == 1.0 and verifier.verify(IO_CODE, IO_REFERENCE).score == 1.0
    assert bare_verify()
    sandboxed = rate(lambda: verifier.verify(CODE, REFERENCE), n)
    bare = rate(bare_verify, n)
    io_rate = rate(lambda: verifier.verify(IO_CODE, IO_REFERENCE), n)
    print(f"code, 3-assert function, sequential: {sandboxed:6.1f} verifications/s sandboxed "
          f"({1000 / sandboxed:.0f} ms each), {bare:6.1f}/s bare subprocess -> overhead x{bare / sandboxed:.2f} "
          f"(+{1000 / sandboxed - 1000 / bare:.0f} ms per run)")
    print(f"code, one stdin/stdout case, sequential: {io_rate:6.1f} verifications/s sandboxed")
    for t in threads:
        par, par_bare = rate(lambda: verifier.verify(CODE, REFERENCE), n, t), rate(bare_verify, n, t)
        print(f"code, 3-assert function, {t} threads: {par:6.1f} verifications/s sandboxed, {par_bare:6.1f}/s bare "
              f"-> overhead x{par_bare / par:.2f}")
    step = 32  # default rollout: 4 prompts x G=8
    print(f"a step of {step} code completions: {step / sandboxed:.2f} s sequential, "
          f"{step / max(rate(lambda: verifier.verify(CODE, REFERENCE), n, max(threads)), 1e-9):.2f} s "
          f"with {max(threads)} threads ({os.cpu_count()} CPUs here)")


def bench_math(n: int, latex_n: int) -> None:
    verifier = MathVerifier()
    assert verifier.verify("so the answer is \\boxed{42}", "#### 42").score == 1.0
    numeric = rate(lambda: verifier.verify("6 * 7 = 42. Answer: 42", "#### 42"), n)
    print(f"math, numeric fast path: {numeric:8.0f} verifications/s")
    assert verifier.verify("\\boxed{2\\sqrt{2}}", "\\sqrt{8}").score == 1.0  # starts the math-verify worker
    # Distinct pairs (the verifier caches repeated ones) that need sympy: \frac of numbers is a fast path.
    pairs = iter([(f"\\boxed{{{k}\\sqrt{{2}}}}", f"\\sqrt{{{2 * k * k}}}") for k in range(3, 3 + latex_n)])
    calls = []
    check = verifier.worker.check
    verifier.worker.check = lambda *a, **k: calls.append(1) or check(*a, **k)

    def latex():
        completion, reference = next(pairs)
        assert verifier.verify(completion, reference).score == 1.0

    latex_rate = rate(latex, latex_n)
    verifier.worker.check = check
    assert len(calls) == latex_n, "the LaTeX case must reach math-verify"
    print(f"math, LaTeX through math-verify (k\\sqrt{{2}} vs \\sqrt{{2k^2}}, worker process, no cache hits): "
          f"{latex_rate:8.1f} verifications/s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40, help="code verifications per measurement")
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--math-n", type=int, default=2000)
    parser.add_argument("--latex-n", type=int, default=100)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    bench_code(args.n, args.threads)
    bench_math(args.math_n, args.latex_n)


if __name__ == "__main__":
    main()
