"""Code verifier: run model-written Python against unit tests in the local sandbox.

Reference (a JSON string): {"asserts": ["assert add(1, 2) == 3", ...]}, {"check": "def check(candidate): ..."}
(a HumanEval test program; needs "entry") and/or {"io": [{"input": "1 2\\n", "output": "3\\n"}, ...]},
optional "entry" (the function under test, also bound as `candidate`, HumanEval style), "prompt" (the code the
answer completes, HumanEval's signature and docstring: code/prompted.py; needs "entry"), "time_limit_s" (per
sandbox run, capped at 60 s) and "rel_tol" (two floats then match within math.isclose(rel_tol=...); without it,
`==` is exactly Python's). docs/verifiers.md (its Code section) lists what is read and what is refused.

  * Code: the last ```python / ```py / bare ``` block of the completion, else the whole completion.
  * Asserts and a check program: judged in this process on plain data; the sandbox only runs the candidate's
    own calls, on arguments computed here, in one live sandboxed run per completion that answers each call when
    Python's evaluation reaches it (code/session.py), so calls run in the order the asserts make them
    and a branch Python does not take makes no call (verifiers/code/reference.py says why).
    The parent spends at most code/budget.PARENT_CPU_S of CPU judging one completion.
  * stdin/stdout: one sandboxed run per case; a case passes when stdout equals the expected output
    (trailing whitespace per line and trailing blank lines ignored), the program exited 0, within time.
    The exit status alone never passes anything.
  * Score: passed / total ("fraction") or 1 only when all pass ("all"). CORRECT only when all pass, WRONG
    otherwise (possibly with partial score), TIMEOUT when the wall-clock kill fired before any result,
    ERROR when the sandbox failed, UNPARSEABLE without code; an unreadable reference is unscorable.
The sandbox (sandbox.py) is probed at construction: without one, CodeVerifier refuses to exist unless the
user opted into unsandboxed runs (SandboxConfig.allow_unsandboxed), which is logged loudly.
"""
from __future__ import annotations

import textwrap
from dataclasses import replace
from typing import Literal

from rlvr.types import Outcome, Verdict
from rlvr.verifiers.base import error_verdict
from rlvr.verifiers.code.budget import Budget
from rlvr.verifiers.code.check_program import run_check
from rlvr.verifiers.code.prompted import after_prompt
from rlvr.verifiers.code.reference import BadReference, CodeTests, judge_asserts, parse_reference, short
from rlvr.verifiers.code.sandbox import SandboxConfig, SandboxUnavailable, probe, run_sandboxed, warn_unsandboxed
from rlvr.verifiers.code.session import Session

MAX_CODE_BYTES = 256 << 10  # longer extracted code is not run
IO_SLACK_BYTES = 64 << 10  # an io case reads at most twice its expected output plus this (trailing spaces)
_PYTHON_FENCES = ("python", "py", "python3", "")


def extract_code(completion: str) -> str | None:
    """The last ```python / ```py / bare ``` block (an unclosed last block counts: truncated generations);
    the whole completion when it has no fence at all; None when there is nothing to run, including when
    every block is in another language."""
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in completion.splitlines():
        if line.strip().startswith("```"):
            if current is None:
                current = []
                blocks.append((line.strip()[3:].replace(" ", "").lower(), current))  # "Python 3": python3
            else:
                current = None
        elif current is not None:
            current.append(line)
    if blocks:
        python = [lines for lang, lines in blocks if lang in _PYTHON_FENCES]
        code = _dedented(python[-1]) if python else ""
    else:
        code = completion
    return code if code.strip() else None


def _dedented(lines: list[str]) -> str:
    """A block fenced inside a Markdown list is indented as a whole: dedented. Code whose first
    line starts at column 0 is left exactly as written (dedent also blanks whitespace-only lines)."""
    code = "\n".join(lines)
    first = next((line for line in lines if line.strip()), "")
    return textwrap.dedent(code) if first[:1].isspace() else code


class CodeVerifier:
    """Unit-test reward for Python code; registered as "code" (see rlvr.verifiers.VERIFIERS)."""

    name = "code"

    def __init__(self, mode: Literal["fraction", "all"] = "fraction", sandbox: SandboxConfig | None = None):
        if mode not in ("fraction", "all"):
            raise ValueError(f"mode must be 'fraction' or 'all', got {mode!r}")
        self.mode = mode
        self.sandbox = sandbox or SandboxConfig()
        state = probe()
        if not state.ok:
            if not self.sandbox.allow_unsandboxed:
                from rlvr.config.run import ConfigError

                raise ConfigError(
                    f"code rewards need a working sandbox, and this machine has none: {state.reason}. Install "
                    "bubblewrap (apt-get install bubblewrap, or run scripts/setup.sh as root), or set "
                    "task.code_unsandboxed=true to run model-written code WITHOUT isolation (trusted models only)")
            warn_unsandboxed(state.reason)

    def verify(self, completion: str, reference: str) -> Verdict:
        try:
            return self._verify(completion, reference)
        except SandboxUnavailable as err:
            return error_verdict(f"sandbox unavailable: {err}")
        except Exception as err:  # total: a verifier bug is an ERROR verdict, never a crash or a reward
            return error_verdict("code verifier failed", err)

    def _verify(self, completion: str, reference: str) -> Verdict:
        if not isinstance(completion, str) or not isinstance(reference, str):
            return error_verdict(f"expected str inputs, got {type(completion).__name__}, {type(reference).__name__}")
        try:
            tests = parse_reference(reference)
        except BadReference as err:
            return error_verdict(f"reference tests unparseable: {err}", scorable=False)
        code = extract_code(completion)
        if code is None:
            return Verdict(Outcome.UNPARSEABLE, 0.0, "no Python code found (expected a ```python block)")
        if len(code.encode("utf-8", "replace")) > MAX_CODE_BYTES:
            return Verdict(Outcome.UNPARSEABLE, 0.0, f"code longer than {MAX_CODE_BYTES} bytes; not run")
        if tests.prompt is not None:  # HumanEval's form: the whole function, or the body continuing the prompt
            code = after_prompt(tests.prompt, code, tests.entry)
        config = self.sandbox if tests.time_limit_s is None else replace(self.sandbox, time_limit_s=tests.time_limit_s)
        results: list[tuple[bool, str]] = []  # (passed, what went wrong) per test
        problems: list[str] = []  # per run: "timeout", "sandbox failed: ...", "code failed to load: ..."
        if tests.asserts or tests.check is not None:
            results += self._run_asserts(code, tests, config, problems)
        for i, (stdin, expected) in enumerate(tests.io):
            if self.mode == "all" and not all(ok for ok, _ in results):  # the score is 0 already
                results.append((False, f"io case {i}: not run (an earlier test failed)"))
                continue
            results.append(self._run_io(code, i, stdin, expected, config, problems))
        return self._verdict(results, problems)

    @staticmethod
    def _run_asserts(code: str, tests: CodeTests, config: SandboxConfig,
                     problems: list[str]) -> list[tuple[bool, str]]:
        """The asserts in order, then the check program, against one live sandboxed run (code/session.py), within
        one CPU budget for the parent (code/budget.py). A load error, a sandbox failure or the time limit is
        added to `problems`; every test whose calls it left unanswered has failed."""
        with Session(code, tests.entry, config) as session, Budget():
            results = judge_asserts(tests, session.call)
            if tests.check is not None:
                results.append(run_check(tests.check, tests.entry, session.call))
        if session.problem:
            problems.append(session.problem)
        return results

    @staticmethod
    def _run_io(code: str, index: int, stdin: str, expected: str, config: SandboxConfig,
                problems: list[str]) -> tuple[bool, str]:
        # Output more than twice the expected size (plus slack for trailing spaces) can never normalise to it: it
        # is not read, so 100 cases printing 1 MiB each cost the parent reads of 64 KiB (0.34 s).
        cap = min(config.max_output_bytes, 2 * len(expected.encode("utf-8")) + IO_SLACK_BYTES)
        run = run_sandboxed(code, stdin.encode(), replace(config, max_output_bytes=cap))
        if not run.started:
            problems.append(f"sandbox failed: {run.stderr.decode(errors='replace').strip()[-300:]}")
            return False, f"io case {index}: sandbox failed"
        if run.timed_out:
            problems.append("timeout")
            return False, f"io case {index}: timed out after {config.time_limit_s:g}s"
        try:  # strict: 1 MiB of invalid bytes decoded with errors="replace" cost 8 ms a case
            got = run.stdout.decode("utf-8").replace("\r\n", "\n").rstrip()
        except UnicodeDecodeError:
            return False, f"io case {index}: printed bytes that are not UTF-8"
        want = _normalise(expected)
        if "stdout" in run.truncated or not _same_output(got, want):
            return False, f"io case {index}: printed {short(got)}, expected {short(want)}"
        if run.exit_code != 0:
            return False, f"io case {index}: right output but exit {run.exit_code} (signal {run.signal})"
        return True, ""

    def _verdict(self, results: list[tuple[bool, str]], problems: list[str]) -> Verdict:
        passed, total = sum(ok for ok, _ in results), len(results)
        if passed == total:
            return Verdict(Outcome.CORRECT, 1.0, f"{passed}/{total} tests passed")
        first = next(why for ok, why in results if not ok)
        detail = f"{passed}/{total} tests passed; first failure: {first}" + (f" [{problems[0]}]" if problems else "")
        if passed == 0 and any(p.startswith("sandbox failed") for p in problems):
            return Verdict(Outcome.ERROR, 0.0, detail[:500])
        if passed == 0 and problems and all(p == "timeout" for p in problems):
            return Verdict(Outcome.TIMEOUT, 0.0, detail[:500])
        return Verdict(Outcome.WRONG, passed / total if self.mode == "fraction" else 0.0, detail[:500])


def _normalise(text: str) -> str:
    """Trailing whitespace per line and trailing blank lines dropped."""
    return "\n".join(map(str.rstrip, text.replace("\r\n", "\n").split("\n"))).rstrip("\n")


def _same_output(got: str, want: str) -> bool:
    """`got` (already rstripped) normalises to `want`. Lines are only split when the counts agree, so the work
    is the reference's size, not the candidate's: normalising 1 MiB of newlines took 140 ms."""
    return got.count("\n") == want.count("\n") and _normalise(got) == want
