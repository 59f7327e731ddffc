"""The verifier pool's core, shared by its two transports (it was written twice and drifted).

    pool = RewardService.start(task_config, workers=2)  # worker processes (rlvr/rewards/service.py), or
    pool = RayRewardService.start(config.ray, config.task, config.reward, functions)  # Ray actors (cluster/)
    future = pool.submit(prompts, completions)  # returns at once; the trainer computes ref log-probs...
    scored = future.result()                    # ...then waits: a ScoredBatch, weighted by Rewarder.score

The core owns what does not depend on where a verifier runs: a batch cut into jobs of consecutive rows and
queued, the pending ScoreFuture of each submit, the counts stats() reports, and what a timeout, a crash or
close() makes of a sample. A `Transport` owns only how a job reaches a verifier and how its verdicts come
back; the core's supervisor thread calls `serve` in a loop and is the only thread that touches the workers.

Every sample gets a verdict from every verifier in bounded time, and every failure is a counted verdict: no
answer within `deadline_s` of dispatch -> TIMEOUT (the transport replaces the worker); a worker that dies ->
its sample is retried up to `retries` times, then ERROR. Rows of a job behind a failed one never ran: they go
back to the head of the queue, uncharged. Torch-free: worker processes import it."""
from __future__ import annotations

import atexit
import collections
import math
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, Sequence

from rlvr.types import Outcome, Verdict
from rlvr.verifiers.base import error_verdict

if TYPE_CHECKING:
    from rlvr.types import Prompt, RolloutBatch, ScoredBatch

COUNTS = ("submitted", "completed", "timeouts", "crashes", "errors", "retries", "restarts")  # stats() keys


def combine(prompts: Sequence[Prompt], completions: Sequence[str], verdicts: Mapping[str, Sequence[Verdict]],
            weights: Mapping[str, float], reward_functions: Mapping[str, tuple[Callable, float]] | None = None,
            completion_ids: Sequence[list[int]] | None = None) -> ScoredBatch:
    """Verdicts computed elsewhere, plus TRL-style reward functions run here (the trainer process: functions.py says
    why) -> ScoredBatch."""
    from rlvr.rewards.rewarder import call_reward_function, weigh  # imports torch: parent only

    functions = reward_functions or {}
    all_verdicts = {**verdicts, **{name: call_reward_function(fn, prompts, completions, completion_ids)
                                   for name, (fn, _) in functions.items()}}
    return weigh(all_verdicts, {**weights, **{name: w for name, (_, w) in functions.items()}})


@dataclass(frozen=True)
class PoolSettings:
    """What the core needs of the run's config (not the whole RunConfig); built where a service is."""

    weights: Mapping[str, float]  # verifier name -> weight (task.verifiers): the order of each sample's verdicts
    deadline_s: float  # per sample, from dispatch
    retries: int  # worker deaths one sample may cause before its verdict is ERROR
    workers: int  # processes or actors; 0: verified in the caller's thread, in submit
    max_chunk: int  # samples per job at most: fewer messages, while small jobs still balance uneven costs


class ScoreFuture:
    """The pending ScoredBatch of one `submit`; `result()` waits for every sample's verdicts."""

    def __init__(self, pool: VerifierPool, prompts: Sequence[Prompt], completions: Sequence[str],
                 completion_ids: Sequence[list[int]] | None = None, truncated: Sequence[bool] | None = None):
        self._pool, self._scored = pool, None
        self.prompts, self.completions, self.completion_ids = list(prompts), list(completions), completion_ids
        self.references = [prompt.reference for prompt in self.prompts]
        n = self._missing = len(self.completions)
        self.truncated = [False] * n if truncated is None else list(truncated)  # cut at max_new_tokens
        self.attempts = [0] * n  # worker deaths charged to each sample
        self._verdicts: list[list[Verdict] | None] = [None] * n
        self._done = threading.Event()  # set by the supervisor when _missing reaches 0

    def _set(self, row: int, verdicts: list[Verdict]) -> None:
        self._verdicts[row] = verdicts
        self._missing -= 1
        if not self._missing:
            self._done.set()

    def done(self) -> bool:
        return not self._missing

    def result(self, timeout: float | None = None) -> ScoredBatch:
        """Wait for the verdicts (bounded by the per-sample deadlines), then weight them into a ScoredBatch."""
        if self._missing and not self._done.wait(timeout):
            raise TimeoutError(f"{self._missing} of {len(self.completions)} samples still being verified")
        if self._scored is None:
            pool = self._pool
            by_name = {name: [row[k] for row in self._verdicts] for k, name in enumerate(pool.names)}
            self._scored = combine(self.prompts, self.completions, by_name, pool.weights, pool.reward_functions,
                                   self.completion_ids)
        return self._scored


@dataclass
class Job:
    future: ScoreFuture
    rows: list[int]  # sample indices into the future's batch, verified in this order


class Transport(Protocol):
    """How a job reaches a verifier and its verdicts come back: worker processes or Ray actors."""

    def serve(self, pool: VerifierPool) -> None:
        """One round of the supervisor: hand `pool.next_job()`s to idle workers, wait for replies or the next
        deadline, report each to the pool (finish, timed_out, crashed, failed). Without a supervisor thread
        (workers=0) it runs in submit and verifies the whole queue."""

    def wake(self) -> None:
        """A job was queued or the pool is closing: end serve's wait now (called from any thread)."""

    def ready(self) -> int:
        """Workers ready now."""

    def in_flight(self) -> list[tuple[Job, int]]:
        """At shutdown, each job a worker holds and the position of its first row without a verdict."""

    def stop(self) -> None:
        """End every worker (the supervisor's last act)."""

    def close(self) -> None:
        """Free what outlives the supervisor (pipes, the cluster); after it has stopped."""


class VerifierPool:
    """A reward service: the verifiers of a task behind a Transport; TRL-style `reward_functions`
    (name -> (f(prompts, completions, **columns) -> list[float | None], weight)) run here, in `result()`."""

    def __init__(self, settings: PoolSettings, reward_functions: Mapping[str, tuple[Callable, float]] | None = None):
        self.names = list(settings.weights)  # ScoreFuture reads names, weights, reward_functions
        self.weights = {name: float(weight) for name, weight in settings.weights.items()}
        self.reward_functions = dict(reward_functions or {})
        if set(self.names) & set(self.reward_functions):
            raise ValueError(f"reward function names {list(self.reward_functions)} clash with verifiers")
        self.settings = settings
        self.transport: Transport  # set by start, once the workers exist
        # Each counter has one writer (submitted: the caller; the rest: the supervisor), so += needs no lock.
        self._counts = dict.fromkeys(COUNTS, 0)
        self._lock = threading.Lock()  # no job may be queued after close() drained the queue
        self._closed = self.closing = False
        self._queue: collections.deque[Job] = collections.deque()  # submit appends, the supervisor pops
        self._thread: threading.Thread | None = None
        self._owner = os.getpid()  # a forked child does not own the workers

    def start(self, transport: Transport, thread_name: str | None) -> None:
        """Serve through `transport`: in a supervisor thread named `thread_name`, or (None) in submit."""
        self.transport = transport
        if thread_name is not None:
            self._thread = threading.Thread(target=self._supervise, name=thread_name, daemon=True)
            self._thread.start()

    def submit(self, prompts: Sequence[Prompt], completions: Sequence[str],
               completion_ids: Sequence[list[int]] | None = None, truncated: Sequence[bool] | None = None
               ) -> ScoreFuture:
        """Queue completion i against prompts[i]; returns at once (without a supervisor, once scored).
        completion_ids: handed to the reward functions (TRL's argument), when known."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
        future = ScoreFuture(self, prompts, completions, completion_ids, truncated)
        n, s = len(completions), self.settings
        size = min(s.max_chunk, max(1, math.ceil(n / (4 * max(s.workers, 1)))))
        with self._lock:
            if self._closed:
                raise RuntimeError("reward service is closed")
            self._counts["submitted"] += n
            self._queue.extend(Job(future, list(range(i, min(i + size, n)))) for i in range(0, n, size))
        if self._thread is None:
            self.transport.serve(self)
        else:
            self.transport.wake()
        return future

    def submit_rollout(self, batch: RolloutBatch) -> ScoreFuture:  # row i is checked against batch.prompt_of(i)
        from rlvr.rewards.rewarder import completion_id_lists  # imports torch: parent only

        ids = completion_id_lists(batch) if self.reward_functions else None
        return self.submit([batch.prompt_of(row) for row in range(batch.size)], batch.completions, ids,
                           batch.truncated.tolist())

    def score(self, prompts: Sequence[Prompt], completions: Sequence[str],
              completion_ids: Sequence[list[int]] | None = None, truncated: Sequence[bool] | None = None
              ) -> ScoredBatch:
        return self.submit(prompts, completions, completion_ids, truncated).result()  # blocking, as Rewarder.score

    def score_rollout(self, batch: RolloutBatch) -> ScoredBatch:  # as Rewarder.score_rollout (e.g. evaluate())
        return self.submit_rollout(batch).result()

    def stats(self) -> dict[str, int]:
        """Cumulative counts for metrics.jsonl, in samples (crashes, restarts: in workers); workers ready now."""
        return {**self._counts, "workers": self.transport.ready()}

    def close(self) -> None:
        """Stop the workers; unfinished samples get ERROR verdicts; free the transport. Idempotent."""
        with self._lock:
            closed, self._closed = self._closed, True
        if closed:
            return
        atexit.unregister(self.close)  # registered by RewardService.start: worker processes end with the trainer
        if self._thread is not None and self._owner == os.getpid():
            self.closing = True
            self.transport.wake()
            self._thread.join()
            self.transport.close()

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _supervise(self) -> None:
        try:
            while not self.closing:
                self.transport.serve(self)
        finally:  # also after a bug: fail what is pending and refuse new work, rather than hang result()
            self._closed = True
            for job, start in reversed(self.transport.in_flight()):  # requeue prepends: keep the workers' order
                self.requeue(job, start)
            self.fail_queued(error_verdict("reward service closed before this sample was verified"))
            self.transport.stop()

    # --- the transport's side: called from the supervisor thread (or from submit without one) -------------
    def next_job(self) -> Job | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def requeue(self, job: Job, start: int) -> None:
        """Rows from `start` on go back, ahead of newer work: this batch's result() is already waited on."""
        if start < len(job.rows):
            with self._lock:
                self._queue.appendleft(Job(job.future, job.rows[start:]))

    def count(self, name: str) -> None:  # e.g. "restarts", which only the transport sees
        self._counts[name] += 1

    def finish(self, future: ScoreFuture, row: int, verdicts: list[Verdict] | Verdict) -> None:
        self._counts["completed"] += 1  # a service failure is one verdict for every verifier:
        future._set(row, verdicts if isinstance(verdicts, list) else [verdicts] * len(self.names))

    def timed_out(self, job: Job, position: int) -> None:
        """No verdict for job.rows[position] within the deadline (its worker already replaced)."""
        self._counts["timeouts"] += 1
        self.requeue(job, position + 1)
        self.finish(job.future, job.rows[position], Verdict(
            Outcome.TIMEOUT, 0.0, f"reward service: no verdict within {self.settings.deadline_s:g}s"))

    def crashed(self, job: Job | None, position: int, detail: str) -> None:
        """A worker died (already replaced) on job.rows[position], or idle (job None): retry or ERROR."""
        self._counts["crashes"] += 1
        if job is None:
            return
        row = job.rows[position]
        job.future.attempts[row] += 1
        if job.future.attempts[row] <= self.settings.retries:
            self._counts["retries"] += 1
            return self.requeue(job, position)
        self.failed(job, position, error_verdict(detail))

    def failed(self, job: Job, position: int, verdict: Verdict) -> None:
        """job.rows[position] gets an ERROR verdict; the rows behind it go back to the queue."""
        self._counts["errors"] += 1
        self.requeue(job, position + 1)
        self.finish(job.future, job.rows[position], verdict)

    def fail_queued(self, verdict: Verdict) -> None:
        with self._lock:
            jobs, self._queue = list(self._queue), collections.deque()
        self._counts["errors"] += sum(len(job.rows) for job in jobs)
        for job in jobs:
            for row in job.rows:
                self.finish(job.future, row, verdict)
