"""Verifier throughput on this machine: sandboxed code verifications/s (sequential and with parallel threads),
the same harness as a bare subprocess (no bwrap, cgroup, rlimits, seccomp) for the sandbox's overhead, and
math verifications/s (numeric fast path, and LaTeX through math-verify in its worker process).

`--adversarial` instead measures the parent's CPU (time.process_time of this process: the trainer's share, not
the sandbox's) per completion over adversarial completions built to make the parent work: the
code set (`adversarial_code_cases`) and the math set (`adversarial_math_cases`). Goal: <= 0.2 s each.

    .venv/bin/python bench/verifiers.py [--n 40] [--threads 2 4] [--math-n 2000] [--latex-n 100]
    .venv/bin/python bench/verifiers.py --adversarial [--time-limit 2]
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

from rlvr.verifiers.base import Verifier
from rlvr.verifiers.code.harness import harness_files, read_reply, read_start, request
from rlvr.verifiers.code.reference import judge_asserts, parse_reference
from rlvr.verifiers.code.sandbox import SYSTEM_PYTHON, SandboxConfig, probe
from rlvr.verifiers.code.verifier import CodeVerifier
from rlvr.verifiers.math.extract import MODES
from rlvr.verifiers.math.verifier import MathVerifier

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
    """The assert harness as a plain subprocess in a temp dir, through the same protocol as the sandboxed session
    (code/harness.py): what the sandbox layers are compared with."""
    with tempfile.TemporaryDirectory() as work:
        for name, content in harness_files("def add(a, b):\n    return a + b", None).items():
            with open(os.path.join(work, name), "wb") as f:
                f.write(content)
        r, w = os.pipe()
        proc = subprocess.Popen([SYSTEM_PYTHON, "-I", "-B", "harness.py", str(w)], cwd=work, pass_fds=(w,),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.PIPE)
        os.close(w)
        with os.fdopen(r, "rb") as lines:
            assert read_start(lines.readline().rstrip(b"\n"), "ready") == ""
            assert read_start(lines.readline().rstrip(b"\n"), "loaded") == ""
            sent = []

            def resolve(call):
                proc.stdin.write(request(call))
                proc.stdin.flush()
                sent.append(call)
                return read_reply(lines.readline().rstrip(b"\n"), len(sent) - 1, call)

            outcomes = judge_asserts(parse_reference(REFERENCE), resolve)
            proc.stdin.close()
            proc.wait()
    return all(ok for ok, _ in outcomes)


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


# ---------------------------------------------------------------- adversarial completions
PARENT_CPU_GOAL_S = 0.2


def _asserts(*tests: str, **extra) -> str:
    return json.dumps({"asserts": list(tests), **extra})


def _check(body: str) -> str:
    return json.dumps({"check": f"def check(candidate):\n    {body}\n", "entry": "f"})


def _io(n: int = 1) -> str:
    return json.dumps({"io": [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(n)]})


_BIG = "(1 << 65535) + 12345"  # an int at the parent's 65,536-bit bound
ADVERSARIAL_CODE = {  # name -> (completion, reference); none of them is a right answer
    "fraction_sum": ("from fractions import Fraction\ndef f(n):\n    return [Fraction(1, k) for k in range(1, 30000)]",
                     _asserts("assert sum(f(1)) == 1")),
    "fraction_sum_made_here": ("def f(n):\n    return list(range(2, 30000))",
                               _asserts("assert sum(Fraction(1, k) for k in f(1)) == 1")),
    "fraction_sorted_big": ("from fractions import Fraction\nimport random\ndef f(n):\n    random.seed(n)\n"
                            "    return [Fraction(random.getrandbits(2000), random.getrandbits(2000) | 1) "
                            "for _ in range(1000)]", _asserts("assert sorted(f(1)) == []")),
    "fraction_exponent": ("from fractions import Fraction\ndef f(n):\n    return Fraction(10 ** 7)",
                          _asserts("assert 3 ** f(1) == 1")),
    "fraction_base_power": ("from fractions import Fraction\ndef f(n):\n    return Fraction(3, 2)",
                            _asserts("assert f(1) ** 200000 == 1")),
    "modular_power": (f"def f(n):\n    return ({_BIG}) >> (45000 if n == 1 else 0)",
                      _asserts("assert pow(3, f(1), f(2)) == 1")),
    "comb": ("def f(n):\n    return 100000", _asserts("assert math.comb(f(1), f(1) // 2) == 1")),
    "bigint_divisions": (f"def f(n):\n    return [({_BIG}) - k for k in range(16)]",
                         _asserts("assert all(x % (y >> 30000) == 1 for x in f(1) for y in f(1))")),
    "generator_iteration": ("def f(n):\n    return iter(range(100000))",
                            _asserts("assert sum(1 for x in f(1) if x >= 0) == 5")),
    "comprehension_over_result": ("def f(n):\n    return list(range(120000))",
                                  _asserts("assert [x * 2 for x in f(1)] == []")),
    "list_sum_quadratic": ("def f(n):\n    return [[k] for k in range(100000)]",
                           _asserts("assert sum(f(1), []) == []")),
    "hash_collisions": ("def f(n):\n    return [k * ((1 << 61) - 1) for k in range(1, 40000)]",
                        _asserts("assert len(set(f(1))) == 1")),
    "tuples_one_mib": ("def f(n):\n    return [(k,) for k in range(100000)]", _asserts("assert f(1) == []")),
    "floats_repr": ("def f(n):\n    return [k / 7 for k in range(60000)]", _asserts("assert str(f(1)) == ''")),
    "tolerant_compare": ("def f(n):\n    return [[k / 7] for k in range(50000)] + [n]",
                         _asserts("assert f(1) == f(2)", rel_tol=1e-9)),
    "deep_nesting": ("def f(n):\n    x = []\n    for _ in range(99):\n        x = [x, x]\n    return x",
                     _asserts("assert f(1) == []")),
    "stderr_and_stdout_flood": ("import sys\nsys.stderr.write('x' * (50 << 20))\nsys.stdout.write('y' * (50 << 20))\n"
                                "def f(n):\n    return 0", _asserts("assert f(1) == 1")),
    "channel_flood": ("import os, sys\nwhile True:\n    os.write(int(sys.argv[1]), b'{\"i\": 0}\\n' * 4096)",
                      _asserts("assert f(1) == 1")),
    "stdout_flood_io": ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", _io()),
    "stdout_drip_io": ("import os\nwhile True:\n    os.write(1, b'x')", _io()),
    "newlines_io_cases": ("import sys\nsys.stdout.write('\\n' * ((1 << 20) - 8) + 'x')", _io(8)),  # under the cap
    # a hanging call in a branch Python does not take: never made (it was run last, "speculatively")
    "speculative_hang": ("def ok(x):\n    while x < 0:\n        pass\n    return True\ndef g(x):\n    return x",
                         _asserts("assert any(ok(x) for x in [1, -1])", "assert g(g(1) + 1) == 0")),
    # a live session per completion, and check(candidate) programs run in the parent
    "channel_drip_in_a_call": ("import os, sys, time\ndef f(n):\n    while True:\n"
                               "        os.write(int(sys.argv[1]), b'1')\n        time.sleep(0.0005)",
                               _asserts("assert f(1) == 1")),
    "check_many_calls": ("def f(n):\n    return n",
                         _check("for i in range(100000):\n        assert candidate(i) == i")),
    "check_costly_value": ("def f(n):\n    return 10 ** 7",
                           _check("try:\n        x = 3 ** candidate(1)\n    except BaseException:\n        pass")),
    "check_loop_over_result": ("def f(n):\n    return list(range(60000))",
                               _check("assert sum(x * y for x in candidate(1) for y in range(20)) == 0")),
    # a range result is 30 bytes on the wire however many items it stands for
    "range_result_set": ("def f(n):\n    return range(2 ** 63, 2 ** 63 + 10 ** 6)",
                         _asserts("assert set(f(1)) == {1}")),
    "range_result_sent_back": ("def f(n):\n    return range(2 ** 126, 2 ** 126 + 10 ** 6) if n == 0 else 0",
                               _asserts("assert f(list(f(0))) == 1")),
    "largest_range_counted": ("def f(n):\n    return range(349000)",
                                     _asserts("assert Counter(f(1)) == Counter([1])")),
    "largest_range_sent_back": ("def f(n):\n    return range(349000) if n == 0 else 0",
                                       _check("r = candidate(0)\n    assert candidate(list(r)) == 1")),
    "parent_range_sent_back": ("def f(n):\n    return 10 ** 6 if n == 0 else 0",
                               _asserts("assert f(list(range(f(0)))) == 1")),
    "channel_drip_for_ten_seconds": ("import os, sys, time\ndef f(n):\n    while True:\n"
                                     "        os.write(int(sys.argv[1]), b'1')\n        time.sleep(0.0005)",
                                     _asserts("assert f(1) == 1", time_limit_s=10)),
}



def adversarial_code_cases() -> dict[str, tuple[str, str]]:
    """Code completions that try to make the *parent* (the trainer) work: big or costly results, floods."""
    return dict(ADVERSARIAL_CODE)


def adversarial_math_cases() -> dict[str, tuple[str, str]]:
    """Math completions that try to make the parent work (about 1 MB each), run in every answer mode: the set of
    bench/math_adversarial.py, one definition for both scripts."""
    from math_adversarial import math_adversarial_cases

    return {case.name: (case.completion, case.reference) for case in math_adversarial_cases()}


def parent_cpu(verifier: Verifier, cases: dict[str, tuple[str, str]]) -> dict[str, tuple[float, float, object]]:
    """name -> (parent CPU s, wall s, verdict): CPU of this process only, so the sandbox's own work is excluded."""
    out = {}
    for name, (completion, reference) in cases.items():
        cpu, wall = time.process_time(), time.perf_counter()
        verdict = verifier.verify(completion, reference)
        out[name] = (time.process_time() - cpu, time.perf_counter() - wall, verdict)
    return out


def _print_cpu(kind: str, table: dict[str, tuple[float, float, object]]) -> None:
    for name, (cpu, wall, verdict) in table.items():
        flag = "" if cpu <= PARENT_CPU_GOAL_S else f"  OVER the {PARENT_CPU_GOAL_S:g} s goal"
        print(f"  {kind} {name:28s} parent CPU {1000 * cpu:7.1f} ms  wall {wall:5.2f} s  "
              f"{verdict.outcome.value:9s} {verdict.score:.2f}{flag}")
    worst = max(table.items(), key=lambda item: item[1][0])
    print(f"{kind}: worst parent CPU {1000 * worst[1][0]:.1f} ms ({worst[0]}) over {len(table)} completions")


def bench_adversarial(time_limit_s: float) -> None:
    state = probe()
    print(f"sandbox: {state.reason}")
    if state.ok:
        code = CodeVerifier(sandbox=SandboxConfig(time_limit_s=time_limit_s))
        code.verify(CODE, REFERENCE)  # warm: imports and the first sandbox run
        _print_cpu("code", parent_cpu(code, adversarial_code_cases()))
    else:
        print("code: skipped (no sandbox)")
    for mode in MODES:
        _print_cpu(f"math {mode}", parent_cpu(MathVerifier(mode), adversarial_math_cases()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40, help="code verifications per measurement")
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--math-n", type=int, default=2000)
    parser.add_argument("--latex-n", type=int, default=100)
    parser.add_argument("--adversarial", action="store_true", help="parent CPU per adversarial completion instead")
    parser.add_argument("--time-limit", type=float, default=2.0, help="sandbox time limit for --adversarial")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    if args.adversarial:
        bench_adversarial(args.time_limit)
        return
    bench_code(args.n, args.threads)
    bench_math(args.math_n, args.latex_n)


if __name__ == "__main__":
    main()
