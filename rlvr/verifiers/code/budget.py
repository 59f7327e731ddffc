"""The parent's CPU budget for one completion: what the trainer may spend on one candidate's values.

The parent (the process that calls `CodeVerifier.verify`, the trainer or its reward workers) decodes the
candidate's results and evaluates the asserts on them. Size bounds (code/values) keep each single operation
small, but a candidate can still make the parent loop: 30,000 Fractions summed took 18 s, iterating a 100,000-item
generator result 2-3 s. So every loop the parent runs over candidate data (evaluation steps, builtin
calls and their callbacks, decoding, `sum`) checks the thread's CPU time against a deadline taken when the
completion's judging began; past it, the test fails with a detail saying so, never a pass. A budget hit
depends on this machine's speed, as the sandbox's time limit does; honest asserts use a few milliseconds.

The budget is reached through a context variable because the checks sit deep in helpers (hash_bound, the wire
decoder, the guarded iterators) that should not all carry it as a parameter.

While a budget is active Python's cyclic garbage collector is paused, except while the parent waits for the
sandbox (Budget.waiting). The parent's values there are acyclic and freed by reference counting, but allocating
100,000 of them triggered a full collection of the whole trainer heap: 0.135 s of the 0.204 s one completion
cost with torch loaded (bench's list_sum_quadratic under pytest). Paused, that collection never happens while
judging; during a wait the collector runs as usual (paused throughout, a candidate that slept kept the trainer's
collector off for up to the 60 s time limit), and a full collection then is not charged to the candidate: the
wait's CPU time is given back to the budget (gc.callbacks crashed the interpreter in a test run; gc.get_stats
counts the collections instead).
"""
from __future__ import annotations

import gc
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from fractions import Fraction
from typing import Any, Iterable, Iterator

PARENT_CPU_S = 0.1  # per completion; with the sandbox's own overhead, the total stays under 0.2 s (bench)
FRACTION_BITS = 1 << 17  # Fractions per completion, each counted as max(64, numerator + denominator bits)
CHECK_EVERY = 64  # items between two clock reads in guarded loops (a clock read costs ~0.5 us)
DECODE_S_PER_BYTE = 5e-8  # json.loads of a 1 MB result line took 25-45 ms here: decoded only if the budget has it
# `Decimal == int` converts the int to a Decimal each time, quadratic in its bits: 5.4 ms at
# 65,536 bits here (1.2 us at 1,024, 24 us at 4,096), inside whatever single C call compares the two (a set of 16
# Decimals and 16 big ints sharing one hash took 1.95 s). So every (Decimal, int or Fraction over COSTLY_BITS) pair
# a completion holds is paid for once, when its second member arrives: TO_DECIMAL_S * (bits / 65,536) ** 2.
TO_DECIMAL_S = 6e-3
COSTLY_BITS = 1024


class Failed(ValueError):
    """The test fails; the message says why (a candidate value the parent cannot use, or a bound hit). A
    ValueError, so a result line whose decoding trips a bound is dropped like any unreadable line."""


class OverBudget(Failed):
    """The completion's budget is spent: every later evaluation fails too, so walks stop at once."""


class Budget:
    """The CPU the parent may still spend on one completion, and the Fraction bits it may still hold.

    Fractions are counted apart: their arithmetic runs as Python code inside single C calls (sorted() of 1,000
    Fractions of 4,000 bits took 146 ms here), where no clock check can interrupt it.
    """

    def __init__(self, seconds: float = PARENT_CPU_S, fraction_bits: int = FRACTION_BITS):
        if not seconds > 0 or not fraction_bits > 0:
            raise ValueError(f"Budget needs seconds > 0 and fraction_bits > 0, got {seconds!r}, {fraction_bits!r}")
        self.seconds, self.fraction_bits = seconds, fraction_bits
        self.deadline = time.thread_time() + seconds
        self.trips = 0  # failures raised where a check program could catch them (trip())
        self.decimals, self.converting = 0, 0.0  # Decimals seen; seconds one comparison with each costly number costs
        self._tokens: list = []

    def check(self, cost_s: float = 0.0) -> None:
        """Fail once the budget is spent, or when `cost_s` more (an uninterruptible step) would overspend it."""
        if time.thread_time() + cost_s > self.deadline:
            raise OverBudget(f"the parent's CPU budget for one completion ({self.seconds:g} s) is spent: the "
                             "candidate's values cost too much to evaluate")

    def fraction(self, value: Fraction) -> None:
        self.fraction_bits -= max(64, value.numerator.bit_length() + value.denominator.bit_length())
        if self.fraction_bits < 0:
            raise OverBudget(f"more Fractions than the parent evaluates for one completion ({FRACTION_BITS} bits)")

    def number(self, value: Any) -> None:
        """Pay for the comparisons `value` (a Decimal, or an int or Fraction over COSTLY_BITS) could make with the
        other kind already held: the cost is taken off the deadline, and the test fails once it is spent."""
        if isinstance(value, Decimal):
            self.decimals += 1
            cost = self.converting
        else:
            bits = value.numerator.bit_length() + (value.denominator.bit_length() if isinstance(value, Fraction) else 0)
            if bits <= COSTLY_BITS:
                return
            each = TO_DECIMAL_S * (bits / 65536) ** 2
            self.converting += each
            cost = self.decimals * each
        if cost:
            self.deadline -= cost
            self.check()

    def __enter__(self) -> Budget:
        self._tokens.append(_ACTIVE.set(self))
        _pause_gc(+1)
        return self

    def __exit__(self, *exc: Any) -> None:
        _pause_gc(-1)
        _ACTIVE.reset(self._tokens.pop())

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Waiting for the sandbox: the collector runs (unless another thread is judging). A full collection then
        is the trainer's, not the candidate's: the wait's CPU is given back to the budget when one ran."""
        _pause_gc(-1)
        full, cpu = gc.get_stats()[2]["collections"], time.thread_time()
        try:
            yield
        finally:
            _pause_gc(+1)
            if gc.get_stats()[2]["collections"] != full:
                self.deadline += time.thread_time() - cpu


_gc_lock = threading.Lock()
_gc_state = {"pauses": 0, "was_enabled": False}  # across threads: the collector resumes when the last one leaves


def _pause_gc(step: int) -> None:
    with _gc_lock:
        if step > 0 and _gc_state["pauses"] == 0:
            _gc_state["was_enabled"] = gc.isenabled()
            gc.disable()
        _gc_state["pauses"] += step
        if _gc_state["pauses"] == 0 and _gc_state["was_enabled"]:
            gc.enable()


_ACTIVE: ContextVar[Budget | None] = ContextVar("rlvr_code_budget", default=None)


@contextmanager
def waiting() -> Iterator[None]:
    """Budget.waiting() of the active budget (none active: nothing to do)."""
    budget = _ACTIVE.get()
    if budget is None:
        yield
    else:
        with budget.waiting():
            yield


def check(cost_s: float = 0.0) -> None:
    """Fail the test when the active budget is spent, or cannot pay for `cost_s` more (no budget active: no
    limit, e.g. in unit tests)."""
    budget = _ACTIVE.get()
    if budget is not None:
        budget.check(cost_s)


def trip() -> None:
    """Count, on the active budget, a failure raised where a check program may catch it (a defaultdict's
    unknown default_factory), so that the run fails all the same (code/check_program.run_check)."""
    budget = _ACTIVE.get()
    if budget is not None:
        budget.trips += 1


def trips() -> int:
    budget = _ACTIVE.get()
    return 0 if budget is None else budget.trips


def remaining() -> float | None:
    """Seconds the active budget has left (negative once spent); None when no budget is active."""
    budget = _ACTIVE.get()
    return None if budget is None else budget.deadline - time.thread_time()


def spent() -> bool:
    """The active budget is spent (time or Fractions): a check program that caught the failure still fails."""
    budget = _ACTIVE.get()
    return budget is not None and (time.thread_time() > budget.deadline or budget.fraction_bits < 0)


def produced(value: Any) -> Any:
    """Count a Fraction, a Decimal or an int over COSTLY_BITS the parent made or decoded against the active budget
    (Budget.fraction, Budget.number); other values pass."""
    if isinstance(value, (Fraction, Decimal)) or (isinstance(value, int) and value.bit_length() > COSTLY_BITS):
        budget = _ACTIVE.get()  # a subclass too (code/stdtypes)
        if budget is not None:
            if isinstance(value, Fraction):
                budget.fraction(value)
            budget.number(value)
    return value


def decimals_seen() -> bool:
    """The completion has produced a Decimal: comparisons of numbers may then convert (values.order_bound)."""
    budget = _ACTIVE.get()
    return budget is not None and budget.decimals > 0


_CHEAP = (bool, int, float, complex)  # adding two of them costs at most microseconds (ints are size-bounded)


def guarded(items: Iterable[Any]) -> Iterator[Any]:
    """`items` with budget checks, for C loops whose per-item work can be large (sum() concatenating lists or
    adding Fractions): before every such item, and every CHECK_EVERY cheap ones."""
    for i, item in enumerate(items):
        if i % CHECK_EVERY == 0 or type(item) not in _CHEAP:
            check()
        yield item
