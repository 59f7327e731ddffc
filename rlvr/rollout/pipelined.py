"""Asynchronous rollouts, rollout.engine.max_staleness=1: the next step's generation runs in
the engine while this step updates.

Timeline, with the prefetch submitted before the update and every sync queued behind it in the engine:

    step n:   take batch n (sampled by weights n-2)   submit batch n+1   update -> weights n   sync(n)
    engine:   ... generating batch n+1 with weights n-1 (pushed after step n-1) ...        load n

So batch n+1 is sampled one update stale: by the weights pushed after step n-1's update, while step n+1 updates
weights n. The sampler's log-probs in the batch are those of the policy that sampled, so the rollout correction
(correction.py) reweights against exactly that behaviour policy; nothing else changes.

An engine with `submit` (rollout/process.py) queues commands in order itself. Any other engine with its own
weights is run on one background thread, and a sync first waits for that generation (`before_sync`), which gives
the same order.
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rlvr.errors import UserFacingError
from rlvr.rollout.base import SamplingParams
from rlvr.types import Prompt, RolloutBatch

WAIT_TIMEOUT_S = 600.0  # a background generation (thread fallback) that takes longer is a hang, not a slow step


class PrefetchTimeout(UserFacingError, RuntimeError):
    """The prefetched rollouts did not arrive in time: the engine looks stuck (one line, not a traceback)."""


@dataclass
class Prefetched:
    """A batch being generated for the next step."""

    pending: Any  # .result(timeout) -> RolloutBatch: the engine's own (ProcessEngine) or a thread's Future
    prompts: int  # how many prompts it took from the stream (a checkpoint counts them as not drawn)
    version: int  # the weights version that samples it: the last one pushed before it was submitted
    ordered: bool  # the engine runs commands in order (a sync cannot overtake it)
    submitted_at: float  # time.monotonic()


@dataclass(frozen=True)
class Cursor:
    """What a checkpoint saves of the prompt stream (resume.save reads `.drawn` only, as of a CountingStream)."""

    drawn: int


_threads: dict[int, ThreadPoolExecutor] = {}  # engine id -> its one generation thread (engines without submit)


def submit(engine, prompts: list[Prompt], group_size: int, sampling: SamplingParams, version: int) -> Prefetched:
    """Start generating `prompts` and return at once."""
    if hasattr(engine, "submit"):
        return Prefetched(engine.submit(prompts, group_size, sampling), len(prompts), version, True,
                          time.monotonic())
    pool = _threads.setdefault(id(engine), ThreadPoolExecutor(1, thread_name_prefix="rlvr-prefetch"))
    future: Future = pool.submit(engine.generate, prompts, group_size, sampling)
    return Prefetched(future, len(prompts), version, False, time.monotonic())


def take(prefetched: Prefetched) -> RolloutBatch:
    """Wait for the batch (usually done: it was generated during the last update)."""
    return _result(prefetched)


def before_sync(prefetched: Prefetched | None) -> None:
    """An engine without its own command queue must finish the prefetched generation before its weights change:
    the batch would otherwise be sampled by a mix of two versions."""
    if prefetched is not None and not prefetched.ordered:
        _result(prefetched)


def saved_cursor(drawn: int, prefetched: Prefetched | None) -> Cursor:
    """A checkpoint saved while the next batch is in flight counts its prompts as not drawn: the resumed run
    draws them again and samples them with the checkpoint's weights (staleness 0 on its first step). The batch
    itself is not saved (rollouts are cheap to redo, and the running run still uses it)."""
    return Cursor(drawn - (prefetched.prompts if prefetched is not None else 0))


def _result(prefetched: Prefetched) -> RolloutBatch:
    try:
        return prefetched.pending.result(timeout=WAIT_TIMEOUT_S)
    except TimeoutError:
        raise PrefetchTimeout(f"the prefetched rollouts (rollout.engine.max_staleness=1) were not ready within "
                              f"{WAIT_TIMEOUT_S:.0f} s; the engine looks stuck") from None
