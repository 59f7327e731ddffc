"""Math answer verifier: extract one final answer, compare it with the reference.

Pipeline per completion (decisions in rlvr.verifiers.math.extract and rlvr.verifiers.math.worker):
  1. the reference is read like a completion (GSM8K '#### 42', MATH '\\boxed{..}' or plain '42'). A reference
     that cannot be read is an ERROR with scorable=False, never a reward: open-r1 PR#566 found unparseable
     gold answers scored 1.0, silently rewarding whatever the model wrote.
  2. the final answer of the completion outside <think>...</think> (math_extract.final_answer; mode strict,
     last_number or latex, the last one in rlvr.verifiers.math.latex); none -> UNPARSEABLE. Too long, or
     braces that do not balance -> UNPARSEABLE. Hedged or several different final answers -> WRONG
     ("hedged: several answers"); several boxes where the reference lists several values are one list.
  3. plain numbers on both sides -> exact Fraction comparison ("7" == "7.0", "0.5" == "1/2" == "50%",
     "1e-10" != "0"; math_numbers.numbers_match). This is the training hot path: microseconds, no sympy,
     no process hop.
  4. otherwise, after cheap shape checks (nesting depth, huge exponents) and the value guards of
     math_forms (text after a number that is not a unit, arrows: math-verify drops both), math-verify
     (sympy) in a worker process with a deadline, plus guards against its false positives (math_worker).
     math-verify's own timeouts use signal.alarm, which only works in the main thread (verl PR#5635:
     signal timeouts fail off the main thread), and sympy can hang for minutes on inputs like
     9^{9^{9^{9^9}}}. So we disable its timeouts and run it in a child process that we kill and replace
     when the budget runs out.
"""
from __future__ import annotations

import atexit
import importlib.util
import json
import math
import os
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from rlvr.types import Outcome, Verdict
from rlvr.verifiers.base import error_verdict
from rlvr.verifiers.math.cut import CUT_ANSWER, cut_mid_answer
from rlvr.verifiers.math.extract import (  # noqa: F401  (re-exported: tests and rlvr.tasks.qa use them)
    EXPLICIT_KINDS,
    MAX_ANSWER_CHARS,
    MODES,
    NO_ANSWER,
    NO_ANSWER_LATEX,
    NO_ANSWER_OR_NUMBER,
    ONLY_IN_THINK,
    Mode,
    answer_text,
    as_number,
    canonical,
    extract_answer,
    extract_reference,
    final_answer,
    hedge_problem,
    last_boxed,
    number_readings,
)
from rlvr.verifiers.math.forms import counted_value, value_problem
from rlvr.verifiers.math.numbers import numbers_match, rounded_fractions
from rlvr.verifiers.math.relations import relation_problem
from rlvr.verifiers.math.units import unit_problem, without_rate
from rlvr.verifiers.math.words import approximation_problem, exact_part

_NO_ANSWER = {"strict": NO_ANSWER, "last_number": NO_ANSWER_OR_NUMBER, "latex": NO_ANSWER_LATEX}
TRUNCATED = "cut at max_new_tokens without an explicit final answer (\\boxed{}, 'Answer:', '####' or <answer>)"

_HAVE_MATH_VERIFY = importlib.util.find_spec("math_verify") is not None
MAX_NESTING = 10  # bracket depth; antlr parse time grows steeply with it (12 nested braces: ~2 s)
MAX_EXPONENT = 10_000  # 10^{10^{10}} makes sympy build a 10-billion-digit integer
STARVED_WALL_FACTOR = 3.0  # a worker starved of CPU gets up to this many budgets of wall-clock time
_CACHE_SIZE = 4096  # math-verify replies remembered per MathVerifier (cleared when full)
# The worker program is verifiers/math/worker.py itself, run as `python -c <its text>`: it needs neither rlvr on the
# child's sys.path nor an import of this package in the child.
_WORKER_SOURCE = (Path(__file__).parent / "worker.py").read_text(encoding="utf-8")


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- size and shape budget, before any parsing
def brace_problem(answer: str) -> str | None:
    """'unbalanced braces' when `{` and `}` do not pair up (malformed LaTeX), else None. Escaped braces
    (`\\{`, `\\}`) are set delimiters, not groups: `\\left\\{ x \\right.` is balanced."""
    depth = 0
    for ch in re.sub(r"\\[{}]", "", answer):
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            break
    return None if depth == 0 else f"malformed LaTeX: unbalanced braces in {_short(answer)!r}"


def shape_problem(answer: str) -> str | None:
    """Why parsing `answer` could take unbounded time (deep nesting, a huge power); None if it is safe."""
    depth = deepest = 0
    for ch in answer:
        depth += (ch in "([{") - (ch in ")]}")
        deepest = max(deepest, depth)
    if deepest > MAX_NESTING:
        return f"brackets nested {deepest} deep (limit {MAX_NESTING})"
    for match in re.finditer(r"\^", answer):
        exponent = _group(answer, match.end())
        size = _magnitude(exponent)
        if size is not None and size > MAX_EXPONENT:
            return f"exponent {_short(exponent, 30)!r} too large (limit {MAX_EXPONENT})"
    if re.search(r"\d{5,}\s*!|\d[eE][-+]?\d{4,}", answer):
        return "number too large (factorial or exponent)"
    return None


def _group(text: str, i: int) -> str:
    """The LaTeX group at `i`: a balanced {...} (without braces), a digit run, or one character."""
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] == "{":
        depth = 0
        for j in range(i, len(text)):
            depth += (text[j] == "{") - (text[j] == "}")
            if depth == 0:
                return text[i + 1:j]
        return text[i + 1:]
    run = re.match(r"\d+", text[i:i + 40])
    return run.group() if run else text[i:i + 1]


def _magnitude(exponent: str) -> float | None:
    """Value of a numeric exponent, towers included ('10^{10}' -> 1e10); None when it is not numeric."""
    exponent = exponent.strip().lstrip("-+").strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", exponent):
        return float(exponent) if len(exponent) < 300 else math.inf
    tower = re.match(r"(\d+(?:\.\d+)?)\s*\^", exponent)
    if tower is None:
        return None
    inner = _magnitude(_group(exponent, tower.end()))
    if inner is None:
        return None
    base = float(tower.group(1))
    return math.inf if base > 1 and inner * math.log10(base) > 300 else base ** min(inner, 300.0)



# ---------------------------------------------------------------- math-verify worker process
class MathVerifyWorker:
    """One long-lived math-verify process. `check` is thread-safe (requests are serialized) and enforces
    a wall-clock budget from any thread: on a missed deadline the process is killed and a new one started
    right away, so its start-up overlaps with whatever the caller does next."""

    def __init__(self, startup_timeout_s: float = 120.0, source: str = _WORKER_SOURCE):
        self.source = source  # the worker program; tests substitute one that hangs on demand
        self.startup_timeout_s = startup_timeout_s  # interpreter + sympy import; not charged to a check
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._ready = False
        self._buffer = b""
        self._pid = os.getpid()

    def check(self, gold: str, pred: str, timeout_s: float) -> dict:
        """{'status': 'equal'|'different'|'gold_unparseable'|'pred_unparseable'|'timeout'|'error', ...}"""
        with self._lock:
            proc = self._ensure_ready()
            try:
                # cpu_s: the worker's own CPU cap, above the wall-clock budget so that our kill comes first
                request = {"gold": gold, "pred": pred, "cpu_s": timeout_s + 5.0}
                proc.stdin.write((json.dumps(request) + "\n").encode())
                proc.stdin.flush()
            except OSError as err:  # the worker died since the last request
                self._restart()
                return {"status": "error", "detail": f"math-verify worker unavailable ({err}); restarted"}
            line = self._read_line_in_budget(timeout_s)
            if line is None:
                self._restart()
                return {"status": "timeout"}
            if line == b"":
                self._restart()
                return {"status": "error", "detail": "math-verify worker exited; restarted"}
            return json.loads(line)

    def _read_line_in_budget(self, timeout_s: float) -> bytes | None:
        """The reply within `timeout_s` of wall-clock time, extended while the worker is runnable yet starved of CPU (a
        loaded machine: it used under half the budget in CPU time), up to STARVED_WALL_FACTOR budgets. A worker that
        sleeps or has used its CPU budget gets no more. Measured: at load 5, comparisons under a budget of 1 s timed
        out and scored 0 though the worker had barely run."""
        started, (cpu, _) = time.monotonic(), self._cpu()
        line = self._read_line(started + timeout_s)
        while line is None and cpu is not None and time.monotonic() < started + STARVED_WALL_FACTOR * timeout_s:
            used, runnable = self._cpu()
            if used is None or not runnable or used - cpu >= timeout_s / 2:
                break
            line = self._read_line(min(started + STARVED_WALL_FACTOR * timeout_s, time.monotonic() + timeout_s / 4))
        return line

    def _cpu(self) -> tuple[float | None, bool]:
        """The worker's CPU time so far and whether it is runnable (Linux /proc); (None, False) where unreadable."""
        try:
            with open(f"/proc/{self._proc.pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), fields[0] == b"R"
        except (OSError, ValueError, IndexError, AttributeError):
            return None, False

    def close(self) -> None:
        if self._proc is not None and self._pid == os.getpid():
            self._proc.kill()
            self._proc.wait()
        self._proc, self._ready, self._buffer = None, False, b""

    def _restart(self) -> None:
        self.close()
        self._start()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._proc = subprocess.Popen([sys.executable, "-c", self.source],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def _ensure_ready(self) -> subprocess.Popen:
        if self._pid != os.getpid():  # forked child: the pipes belong to the parent's worker
            self._proc, self._ready, self._buffer = None, False, b""
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            self._start()
        if not self._ready:
            line = self._read_line(time.monotonic() + self.startup_timeout_s)
            if line != b"ready":
                self.close()
                raise RuntimeError(f"math-verify worker did not start (got {line!r}); is math-verify installed?")
            self._ready = True
        return self._proc

    def _read_line(self, deadline: float) -> bytes | None:
        """Next line without its newline; b'' if the worker exited, None if the deadline passed."""
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return b""
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line


_WORKER = MathVerifyWorker()  # one per Python process, started on the first non-numeric comparison
atexit.register(_WORKER.close)


# ---------------------------------------------------------------- the verifier
class MathVerifier:
    """Final-answer math checker; registered as "math" (see rlvr.verifiers.VERIFIERS)."""

    name = "math"
    reads_truncation = True  # verify() takes `truncated` (rlvr.verifiers.base.safe_verify passes it)

    def __init__(self, mode: Mode = "strict", timeout_s: float = 5.0, worker: MathVerifyWorker | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.mode = mode
        self.timeout_s = float(timeout_s)
        self.worker = worker or _WORKER
        # A group of G samples often repeats an answer; a repeated pathological one would otherwise cost
        # the full budget (plus a worker restart) each time. Replies are deterministic given the budget.
        self._replies: dict[tuple[str, str], dict] = {}

    def verify(self, completion: str, reference: str, truncated: bool = False) -> Verdict:
        """`truncated`: the completion was cut at max_new_tokens, not ended by the model; then only an explicit final
        answer counts (EXPLICIT_KINDS): a cut ramble ending in the right number scored 1 before."""
        try:
            return self._verify(completion, reference, truncated)
        except Exception as err:  # total: a verifier bug is an ERROR verdict, never a crash or a reward
            return error_verdict("math verifier failed", err)

    def _verify(self, completion: str, reference: str, truncated: bool) -> Verdict:
        if not isinstance(completion, str) or not isinstance(reference, str):
            return error_verdict(f"expected str inputs, got {type(completion).__name__}, "
                                 f"{type(reference).__name__}")
        gold = extract_reference(reference)
        problem = "no answer" if gold is None else brace_problem(gold)
        if gold is not None and len(gold) > MAX_ANSWER_CHARS:
            problem = f"{len(gold)} chars (limit {MAX_ANSWER_CHARS})"
        if problem:
            return error_verdict(f"reference answer unparseable ({problem}): {_short(repr(reference))}",
                                 scorable=False)
        final = final_answer(completion, self.mode)
        if final is None:  # the same search with the reasoning kept, when there is any (no second pass otherwise)
            tagged = "<think>" in completion or "</think>" in completion
            inside_think = tagged and final_answer(completion.replace("<think>", " ").replace("</think>", " "),
                                                   self.mode)
            return Verdict(Outcome.UNPARSEABLE, 0.0, ONLY_IN_THINK if inside_think else _NO_ANSWER[self.mode])
        if truncated and final.kind not in EXPLICIT_KINDS:
            return Verdict(Outcome.UNPARSEABLE, 0.0, f"{TRUNCATED}: its {final.kind.replace('_', ' ')} "
                                                     f"{_short(final.text)!r} does not count")
        if truncated and cut_mid_answer(completion, final):
            return Verdict(Outcome.UNPARSEABLE, 0.0, f"cut at max_new_tokens: {CUT_ANSWER} ({_short(final.text)!r})")
        pred = answer_text(final, gold)  # several boxes joined when the reference lists several values
        if len(pred) > MAX_ANSWER_CHARS:
            return Verdict(Outcome.UNPARSEABLE, 0.0,
                           f"extracted answer too long (limit {MAX_ANSWER_CHARS} chars); not checked")
        problem = brace_problem(pred)
        if problem:
            return Verdict(Outcome.UNPARSEABLE, 0.0, problem)
        if final.problem:  # retracted, hedged after it, or part of a larger expression (rlvr.verifiers.math.around)
            outcome = Outcome.UNPARSEABLE if final.problem.startswith("unparseable") else Outcome.WRONG
            return Verdict(outcome, 0.0, final.problem)
        problem = hedge_problem(final, gold) or unit_problem(final.written, gold)  # units
        if problem:
            return Verdict(Outcome.WRONG, 0.0, problem if problem.startswith("hedged") else
                           f"extracted {_short(pred)}, expected {_short(gold)} ({problem})")
        return self._compare(*without_rate(pred, gold, final.written))  # '5 per hour' for '5 an hour'

    def _compare(self, pred: str, gold: str) -> Verdict:
        """Exact numbers, else math-verify behind the shape checks and the value guards."""
        problem = relation_problem(pred, gold)  # '\\boxed{(\\geq 5)}', 'Answer: != 5' bound 5
        if problem:
            return Verdict(Outcome.WRONG, 0.0, f"extracted {_short(pred)}, expected {_short(gold)} ({problem})")
        pred = exact_part(pred)  # 'x = 1/3 \\approx 0.33' states 1/3
        same = numbers_match(counted_value(pred) or pred, gold)  # '\\boxed{18 dollars}' is 18
        if same is not None:
            return self._judge(same, pred, gold)
        # Identical text still goes to math-verify (cached): only it can tell that a gold answer such as
        # '\\text{}' is unreadable, and a copy of an unreadable gold must not score 1 (open-r1 PR#566).
        problem = shape_problem(pred)
        if problem:
            return Verdict(Outcome.UNPARSEABLE, 0.0, f"not checked: {problem}")
        problem = approximation_problem(pred) or value_problem(pred, gold)  # math-verify drops: '~5', '3 \\to 4'
        if problem:
            return Verdict(Outcome.WRONG, 0.0, f"extracted {_short(pred)}, expected {_short(gold)} ({problem})")
        return self._math_verify(pred, gold)

    def _math_verify(self, pred: str, gold: str) -> Verdict:
        if not _HAVE_MATH_VERIFY:
            return error_verdict("math-verify is not installed (pip install math-verify)")
        key = (canonical(gold), canonical(rounded_fractions(pred, gold)))
        reply = self._replies.get(key)
        if reply is None:
            reply = self.worker.check(*key, self.timeout_s)
            if len(self._replies) >= _CACHE_SIZE:
                self._replies.clear()
            if reply.get("status") != "error":  # a crashed worker is transient; everything else repeats
                self._replies[key] = reply
        status = reply.get("status")
        if status in ("equal", "different"):
            verdict = self._judge(status == "equal", pred, gold)
            if reply.get("detail"):  # a guard overruled math-verify's 'equal' (rlvr.verifiers.math.worker)
                verdict = Verdict(verdict.outcome, verdict.score, f"{verdict.detail} ({reply['detail']})")
            return verdict
        if status == "timeout":
            return Verdict(Outcome.TIMEOUT, 0.0,
                           f"math-verify exceeded the {self.timeout_s:g}s budget comparing "
                           f"{_short(pred)} with {_short(gold)}")
        if status == "gold_unparseable":
            return error_verdict(f"reference answer unparseable: math-verify cannot read {_short(gold)!r}",
                                 scorable=False)
        if status == "pred_unparseable":
            return Verdict(Outcome.UNPARSEABLE, 0.0, f"math-verify cannot read extracted {_short(pred)!r}")
        return error_verdict(f"math-verify failed: {reply.get('detail', reply)}")

    @staticmethod
    def _judge(equal: bool, pred: str, gold: str) -> Verdict:
        if equal:
            return Verdict(Outcome.CORRECT, 1.0, f"extracted {_short(pred)}")
        return Verdict(Outcome.WRONG, 0.0, f"extracted {_short(pred)}, expected {_short(gold)}")
