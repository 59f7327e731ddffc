"""Math answer verifier: extract a final answer, compare it with the reference.

Pipeline per completion:
  1. extract the final answer: last \\boxed{...} / \\fbox{...} (balanced braces), else the last
     'Answer: X' / 'answer is X' line, else the last '#### X'; in `last_number` mode, else the last number.
  2. extract the reference the same way (GSM8K '#### 42', MATH '\\boxed{..}' or plain '42'). A reference
     that cannot be read is an ERROR, never a reward: open-r1 PR#566 found unparseable gold answers
     scored 1.0, silently rewarding whatever the model wrote.
  3. plain numbers on both sides -> exact Fraction comparison ("7" == "7.0" == "7.00", "0.5" == "1/2").
     This is the training hot path: microseconds, no sympy, no process hop.
  4. otherwise math-verify (sympy) in a worker process with a deadline. math-verify's own timeouts use
     signal.alarm, which only works in the main thread (verl PR#5635: signal timeouts fail off the main
     thread), and sympy can hang for minutes on inputs like 9^{9^{9^{9^9}}}. So we disable its timeouts
     and run it in a child process that we kill and replace when the budget runs out.
"""
from __future__ import annotations

import atexit
import importlib.util
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from fractions import Fraction
from typing import Literal

from rlvr.types import Outcome, Verdict
from rlvr.verifiers.base import error_verdict

_HAVE_MATH_VERIFY = importlib.util.find_spec("math_verify") is not None
MAX_ANSWER_CHARS = 2000  # longer extracted answers are not sent to sympy (parse time grows with length)
_CACHE_SIZE = 4096  # math-verify replies remembered per MathVerifier (cleared when full)
NO_ANSWER = "no final answer found (expected \\boxed{}, 'Answer:' or '####')"
NO_ANSWER_OR_NUMBER = "no final answer found (no \\boxed{}, 'Answer:', '####' or number)"

_BOXED_START = re.compile(r"\\(?:boxed|fbox)[ \t]*\{")
_BOXED_BARE = re.compile(r"\\(?:boxed|fbox) +([^\s{}$]+)")  # MATH also writes "\boxed 5"
_ANSWER_MARK = re.compile(r"\banswer(?:[ \t]*:|[ \t]+is\b[ \t]*:?)", re.IGNORECASE)
_NEXT_LINE = re.compile(r"\s*([^\n]*)")  # first non-blank line from a position, without copying the text
_HASHES = re.compile(r"####[ \t]*([^\n]*)")
# A number in running text: thousands commas, decimals, simple fractions; '-' is a sign only when it
# does not follow a word character (so '3-5' yields 5, not -5). Every branch is linear-time.
_NUMBER_IN_TEXT = re.compile(
    r"(?<![\w.])(?:(?<![\w)])-)?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?|(?<![\w.])-?\.\d+")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:/\d+)?")


# ---------------------------------------------------------------- extraction
def last_boxed(text: str) -> str | None:
    """Content of the last complete \\boxed{...} or \\fbox{...} (or brace-less \\boxed 5); None if none."""
    starts = [m.end() for m in _BOXED_START.finditer(text)]
    bare = list(_BOXED_BARE.finditer(text))
    if bare and (not starts or bare[-1].start() > starts[-1]):
        return bare[-1].group(1).rstrip(".")
    limit = len(text)
    for start in reversed(starts):
        # A box left open after a later box start cannot close after it (the later one would close it
        # first), so each scan stops at the next start: the whole search stays linear.
        depth = 1
        for i in range(start, limit):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i]
        limit = start
    return None


def _clean(answer: str) -> str:
    """Strip the wrapping models put around a final answer: spaces, **bold**, $..$, \\(..\\), final '.'."""
    previous = None
    answer = answer.strip()
    while answer != previous:
        previous = answer
        for wrapper in ("**", "$", "\\(", "\\)", "\\[", "\\]"):
            answer = answer.removeprefix(wrapper).removesuffix(wrapper).strip()
        answer = answer.removesuffix(".").strip()
    return answer


def last_answer_line(text: str) -> str | None:
    """Rest of the line after the last 'Answer:' / 'answer is' (next non-empty line if that is empty)."""
    for match in reversed(list(_ANSWER_MARK.finditer(text))):
        line_end = text.find("\n", match.end())
        rest = _clean(text[match.end():] if line_end < 0 else text[match.end():line_end])
        if rest:
            return rest
        following = _clean(_NEXT_LINE.match(text, line_end).group(1)) if line_end >= 0 else ""
        if following:
            return following
    return None


def last_hashes(text: str) -> str | None:
    """GSM8K style: the rest of the line after the last '####'."""
    matches = list(_HASHES.finditer(text))
    if not matches:
        return None
    return _clean(matches[-1].group(1)) or None


def last_number(text: str) -> str | None:
    """The last number in the text (ints, decimals, negatives, 3/4, 1,234), or None."""
    last = None
    for last in _NUMBER_IN_TEXT.finditer(text):
        pass
    return last.group(0) if last else None


def extract_answer(text: str, mode: Literal["strict", "last_number"] = "strict") -> str | None:
    """The final answer of a completion, by precedence: \\boxed > 'Answer:' > '####' > (last number)."""
    for extract in (last_boxed, last_answer_line, last_hashes):
        found = extract(text)
        if found is not None and found.strip():
            return _clean(found) or found.strip()
    return last_number(text) if mode == "last_number" else None


def extract_reference(reference: str) -> str | None:
    """The gold answer: marked the same way as completions, else the whole (plain) reference text."""
    found = extract_answer(reference, "strict")
    found = found if found is not None else _clean(reference)
    return found or None


def as_number(answer: str) -> Fraction | None:
    """Exact value of a plain number ('1,234', '-7.0', '.5', '3/4', '\\$5'), or None for anything else."""
    text = answer.strip().replace("\u2212", "-").replace("{,}", ",").removeprefix("\\$").removeprefix("$")
    text = text.removesuffix(".") if not text.endswith("..") else text
    if not _PLAIN_NUMBER.fullmatch(text):
        return None
    try:
        return Fraction(text.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


# ---------------------------------------------------------------- math-verify worker process
# Runs in a fresh `python -c` interpreter: it imports only math_verify (no torch, no user __main__,
# which 'spawn' would re-import) and answers one JSON request per line. Library output is sent to
# stderr so stray prints cannot corrupt the protocol on stdout.
_WORKER_SOURCE = r"""
import json, logging, signal, sys, time
logging.disable(logging.WARNING)  # math-verify warns that its signal timeout is off; the parent enforces one
out, sys.stdout = sys.stdout, sys.stderr
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it kills us at exit
try:
    import resource
except ImportError:
    resource = None

def cap_resources(cpu_s):
    # Kernel-enforced backstops for when the parent cannot kill us (it died): a CPU-time limit per
    # request (SIGXCPU terminates even while sympy holds the GIL in C code) and an address-space cap
    # so a runaway expansion raises MemoryError instead of taking the host's memory.
    if resource is None:
        return
    try:
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        soft = int(time.process_time() + cpu_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30 if hard == resource.RLIM_INFINITY else min(4 << 30, hard), hard))
    except (ValueError, OSError):
        pass

from math_verify import parse, verify

def check(gold, pred):
    g = parse("\\boxed{" + gold + "}", parsing_timeout=None)
    if not g:
        return {"status": "gold_unparseable"}
    p = parse("\\boxed{" + pred + "}", parsing_timeout=None)
    if not p:
        return {"status": "pred_unparseable"}
    return {"status": "equal" if verify(g, p, timeout_seconds=None) else "different"}

out.write("ready\n"); out.flush()
for line in sys.stdin:
    request = json.loads(line)
    cap_resources(request.get("cpu_s", 60.0))
    try:
        reply = check(request["gold"], request["pred"])
    except Exception as err:
        reply = {"status": "error", "detail": f"{type(err).__name__}: {err}"}
    out.write(json.dumps(reply) + "\n"); out.flush()
"""


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
            line = self._read_line(time.monotonic() + timeout_s)
            if line is None:
                self._restart()
                return {"status": "timeout"}
            if line == b"":
                self._restart()
                return {"status": "error", "detail": "math-verify worker exited; restarted"}
            return json.loads(line)

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
def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class MathVerifier:
    """Final-answer math checker; registered as "math" (see rlvr.verifiers.VERIFIERS)."""

    name = "math"

    def __init__(self, mode: Literal["strict", "last_number"] = "strict", timeout_s: float = 5.0,
                 worker: MathVerifyWorker | None = None):
        if mode not in ("strict", "last_number"):
            raise ValueError(f"mode must be 'strict' or 'last_number', got {mode!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.mode = mode
        self.timeout_s = float(timeout_s)
        self.worker = worker or _WORKER
        # A group of G samples often repeats an answer; a repeated pathological one would otherwise cost
        # the full budget (plus a worker restart) each time. Replies are deterministic given the budget.
        self._replies: dict[tuple[str, str], dict] = {}

    def verify(self, completion: str, reference: str) -> Verdict:
        try:
            return self._verify(completion, reference)
        except Exception as err:  # total: a verifier bug is an ERROR verdict, never a crash or a reward
            return error_verdict("math verifier failed", err)

    def _verify(self, completion: str, reference: str) -> Verdict:
        if not isinstance(completion, str) or not isinstance(reference, str):
            return error_verdict(f"expected str inputs, got {type(completion).__name__}, "
                                 f"{type(reference).__name__}")
        gold = extract_reference(reference)
        if gold is None or len(gold) > MAX_ANSWER_CHARS:
            return error_verdict(f"reference answer unparseable: {_short(repr(reference))}", scorable=False)
        pred = extract_answer(completion, self.mode)
        if pred is None:
            return Verdict(Outcome.UNPARSEABLE, 0.0, NO_ANSWER if self.mode == "strict" else NO_ANSWER_OR_NUMBER)
        if len(pred) > MAX_ANSWER_CHARS:
            return Verdict(Outcome.UNPARSEABLE, 0.0,
                           f"extracted answer has {len(pred)} chars (limit {MAX_ANSWER_CHARS}); not checked")
        gold_value, pred_value = as_number(gold), as_number(pred)
        if gold_value is not None and pred_value is not None:
            return self._judge(gold_value == pred_value, pred, gold)
        if " ".join(pred.split()) == " ".join(gold.split()):
            return self._judge(True, pred, gold)
        return self._math_verify(pred, gold)

    def _math_verify(self, pred: str, gold: str) -> Verdict:
        if not _HAVE_MATH_VERIFY:
            return error_verdict("math-verify is not installed (pip install math-verify)")
        key = (gold, pred)
        reply = self._replies.get(key)
        if reply is None:
            reply = self.worker.check(gold, pred, self.timeout_s)
            if len(self._replies) >= _CACHE_SIZE:
                self._replies.clear()
            if reply.get("status") != "error":  # a crashed worker is transient; everything else repeats
                self._replies[key] = reply
        status = reply.get("status")
        if status in ("equal", "different"):
            return self._judge(status == "equal", pred, gold)
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
