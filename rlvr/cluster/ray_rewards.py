"""The verifier pool as Ray actors (issue #11, item 5): rlvr/rewards/service.py's contract with actors for worker
processes. Each actor builds the task's verifiers (build_verifiers) and answers one sample per call with
safe_verify; the driver's ScoreFuture weights the verdicts (reward_service.combine), so scoring is the local
service's, only placed elsewhere.

Every sample gets a verdict in bounded time, as locally: `reward.deadline_s` per sample from dispatch (the
verifiers' own budget, task.verifier_timeout_s, is applied inside them) -> TIMEOUT, and the actor is killed
and restarted by Ray (max_restarts); an actor that dies on its own -> its sample is retried on the restarted
actor up to `reward.retries` times, then ERROR. An actor that cannot restart leaves the pool; with none left,
waiting samples get ERROR verdicts rather than stall the trainer."""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from rlvr.cluster.session import RayBackendError, acquire, get, release
from rlvr.rewards.service import ScoreFuture
from rlvr.types import Outcome, Verdict
from rlvr.verifiers import build_verifiers, safe_verify
from rlvr.verifiers.base import error_verdict

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig
    from rlvr.types import Prompt, RolloutBatch

log = logging.getLogger(__name__)
STARTUP_TIMEOUT_S = 120.0  # placement, interpreter, imports and verifier set-up; not charged to any sample
MAX_RESTARTS = 8  # per actor (Ray restarts it); a verifier that keeps killing its actor ends up as ERROR verdicts
POLL_S = 0.05  # how soon a new submission reaches an idle actor while others are busy
PROBE_BACKOFF_S = 0.5  # between ready() probes of a restarting actor (a call may fail until Ray has restarted it)


class VerifierActor:
    """What runs inside each actor: the task's verifiers, one sample per call."""

    def __init__(self, task_config: Any):
        self.verifiers = dict(build_verifiers(task_config))

    def names(self) -> list[str]:
        return list(self.verifiers)

    def verify(self, completion: str, reference: str) -> list[Verdict]:
        return [safe_verify(v, completion, reference) for v in self.verifiers.values()]


@dataclass
class _Row:
    future: ScoreFuture
    row: int  # index into the future's batch


@dataclass
class _Slot:
    actor: Any
    ready: bool = False
    ref: Any = None  # the call in flight: ready() while (re)starting, else verify()
    job: _Row | None = None
    deadline: float = 0.0  # time.monotonic() by which `ref` must answer
    probe_at: float | None = None  # while restarting: when to ask again whether it is back (ready())
    failed_probes: int = 0  # consecutive; reset once it answers


class RayRewardService:
    """RewardService's interface (submit_rollout, score_rollout, stats, close) over `verifier_actors` actors;
    TRL-style `reward_functions` run in the driver, in `result()`, as locally."""

    def __init__(self, ray: Any, config: RunConfig, reward_functions: Mapping[str, tuple[Callable, float]]):
        task = config.task
        self.names = list(task.verifiers)  # ScoreFuture reads names, weights, reward_functions
        self.weights = {name: float(weight) for name, weight in task.verifiers.items()}
        self.reward_functions = dict(reward_functions or {})
        if set(self.names) & set(self.reward_functions):
            raise ValueError(f"reward function names {list(self.reward_functions)} clash with verifiers")
        self.deadline_s, self.retries = float(config.reward.deadline_s), config.reward.retries
        self._ray, self._queue = ray, collections.deque()  # _Row; submit appends, the supervisor pops
        self._counts = dict.fromkeys("submitted completed timeouts crashes errors retries restarts".split(), 0)
        self._lock, self._wake = threading.Lock(), threading.Event()
        self._closed = self._closing = False
        # No num_cpus: Ray's actor default (1 CPU to be placed, none held while running) keeps the verifiers from
        # starving the engine's reservation on a small cluster; a verifier is mostly idle between batches.
        # max_task_retries=0: a sample that crashed its actor is retried here, counted, at most reward.retries times.
        remote = ray.remote(max_restarts=MAX_RESTARTS, max_task_retries=0)(VerifierActor)
        self._pool = [_Slot(remote.remote(task)) for _ in range(config.ray.verifier_actors)]
        try:  # start-up errors (an unknown verifier, a missing package) are the user's: one clear error
            built = [get(ray, s.actor.names.remote(), STARTUP_TIMEOUT_S, "starting a Ray verifier actor")
                     for s in self._pool]
        except RayBackendError:
            self._kill_all()
            raise
        if any(names != self.names for names in built):
            self._kill_all()
            raise RayBackendError(f"Ray verifier actors built {built[0]}, expected {self.names}")
        for slot in self._pool:
            slot.ready = True
        self._thread = threading.Thread(target=self._supervise, name="ray-reward-service", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, config: RunConfig, reward_functions: Mapping[str, tuple[Callable, float]]) -> RayRewardService:
        ray = acquire(config.ray.address)
        try:
            return cls(ray, config, reward_functions)
        except BaseException:
            release()
            raise

    def submit(self, prompts: Sequence[Prompt], completions: Sequence[str]) -> ScoreFuture:
        """Queue completion i against prompts[i]; returns at once."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
        future = ScoreFuture(self, prompts, completions)
        with self._lock:
            if self._closed:
                raise RuntimeError("reward service is closed")
            self._counts["submitted"] += len(future.completions)
            self._queue.extend(_Row(future, row) for row in range(len(future.completions)))
        if not future.completions:
            future._done.set()
        self._wake.set()
        return future

    def submit_rollout(self, batch: RolloutBatch) -> ScoreFuture:  # row i is checked against batch.prompt_of(i)
        return self.submit([batch.prompt_of(row) for row in range(batch.size)], batch.completions)

    def score(self, prompts: Sequence[Prompt], completions: Sequence[str]):
        return self.submit(prompts, completions).result()

    def score_rollout(self, batch: RolloutBatch):
        return self.submit_rollout(batch).result()

    def stats(self) -> dict[str, int]:
        """RewardService.stats' keys; `workers`: actors ready now."""
        return {**self._counts, "workers": sum(s.ready for s in list(self._pool))}

    def close(self) -> None:
        """Stop the actors; unfinished samples get ERROR verdicts; release the cluster. Idempotent."""
        with self._lock:
            closed, self._closed = self._closed, True
        if closed:
            return
        self._closing = True
        self._wake.set()
        self._thread.join()
        release()

    def __enter__(self) -> RayRewardService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The supervisor thread alone touches the pool and the queue's head.
    def _supervise(self) -> None:
        try:
            while not self._closing:
                self._dispatch()
                busy = {s.ref: s for s in self._pool if s.ref is not None}
                if not busy:
                    probes = [s.probe_at for s in self._pool if s.probe_at is not None]
                    self._wake.wait(max(0.0, min(probes) - time.monotonic()) if probes else None)
                    self._wake.clear()
                    continue
                wait_s = min(POLL_S, max(0.0, min(s.deadline for s in busy.values()) - time.monotonic()))
                done, _ = self._ray.wait(list(busy), num_returns=len(busy), timeout=wait_s)
                for ref in done:
                    self._receive(busy[ref])
                self._expire(time.monotonic())
        finally:  # also after a bug here: fail what is pending and refuse new work, rather than hang result()
            self._closed = True
            self._shutdown()

    def _dispatch(self) -> None:
        if not self._pool:
            self._fail_queued(error_verdict("no Ray verifier actor could be restarted"))
        now = time.monotonic()
        for slot in [s for s in self._pool if s.probe_at is not None and now >= s.probe_at]:
            # Not charged to any sample: ready() first, with the start-up deadline.
            slot.probe_at, slot.deadline, slot.ref = None, now + STARTUP_TIMEOUT_S, slot.actor.names.remote()
        for slot in [s for s in self._pool if s.ready and s.ref is None]:
            with self._lock:
                if not self._queue:
                    return
                job = self._queue.popleft()
            slot.job, slot.deadline = job, time.monotonic() + self.deadline_s
            slot.ref = slot.actor.verify.remote(job.future.completions[job.row], job.future.references[job.row])

    def _receive(self, slot: _Slot) -> None:
        from ray import exceptions as rex

        ref, job, slot.ref, slot.job = slot.ref, slot.job, None, None
        try:
            value = self._ray.get(ref, timeout=0)
        except rex.RayActorError:  # it died (its verifier crashed it, OOM, node lost): Ray restarts it
            return self._lost(slot, job)
        except Exception as err:  # raised inside the actor (cannot happen: safe_verify catches), or garbled
            if job is None:
                return self._drop(slot, f"{type(err).__name__}: {err}")
            self._counts["errors"] += 1
            return self._finish(job, error_verdict("Ray verifier actor failed", err))
        if job is None:  # ready() of a restarted actor
            slot.ready, slot.failed_probes = True, 0
        elif not (isinstance(value, list) and len(value) == len(self.names)):
            self._counts["errors"] += 1
            self._finish(job, error_verdict(f"Ray verifier actor returned {type(value).__name__}"))
        else:
            self._finish(job, value)

    def _expire(self, now: float) -> None:
        for slot in [s for s in self._pool if s.ref is not None and now >= s.deadline]:
            job = slot.job
            if job is None:
                self._drop(slot, f"not ready within {STARTUP_TIMEOUT_S:g}s")
                continue
            self._counts["timeouts"] += 1
            self._ray.kill(slot.actor, no_restart=False)  # a stuck verifier: Ray restarts the actor
            self._restarting(slot)
            self._finish(job, Verdict(Outcome.TIMEOUT, 0.0, f"reward service: no verdict within {self.deadline_s:g}s"))

    def _lost(self, slot: _Slot, job: _Row | None) -> None:
        if job is None:  # not back yet, died again while restarting, or out of restarts
            slot.failed_probes += 1
            if slot.failed_probes > MAX_RESTARTS:
                return self._drop(slot, f"not back after {slot.failed_probes} probes")
            slot.probe_at = time.monotonic() + PROBE_BACKOFF_S * slot.failed_probes
            return None
        self._counts["crashes"] += 1
        log.warning("Ray verifier actor died; Ray restarts it")
        self._restarting(slot)
        attempts = job.future.attempts
        attempts[job.row] += 1
        if attempts[job.row] <= self.retries:
            self._counts["retries"] += 1
            with self._lock:
                self._queue.appendleft(job)  # ahead of newer work: this batch's result() is already waited on
            return
        self._counts["errors"] += 1
        self._finish(job, error_verdict("Ray verifier actor died on this sample"))

    def _restarting(self, slot: _Slot) -> None:
        self._counts["restarts"] += 1
        slot.ready, slot.job, slot.ref, slot.probe_at = False, None, None, time.monotonic()

    def _drop(self, slot: _Slot, reason: str) -> None:
        log.error("Ray verifier actor leaves the pool: %s", reason)
        self._ray.kill(slot.actor, no_restart=True)
        self._pool.remove(slot)

    def _finish(self, job: _Row, verdicts: list[Verdict] | Verdict) -> None:
        self._counts["completed"] += 1  # a service failure is one verdict for every verifier:
        job.future._set(job.row, verdicts if isinstance(verdicts, list) else [verdicts] * len(self.names))

    def _fail_queued(self, verdict: Verdict) -> None:
        with self._lock:
            jobs, self._queue = list(self._queue), collections.deque()
        self._counts["errors"] += len(jobs)
        for job in jobs:
            self._finish(job, verdict)

    def _shutdown(self) -> None:
        with self._lock:
            self._queue.extendleft(reversed([s.job for s in self._pool if s.job is not None]))
        self._fail_queued(error_verdict("reward service closed before this sample was verified"))
        self._kill_all()

    def _kill_all(self) -> None:
        for slot in self._pool:
            self._ray.kill(slot.actor, no_restart=True)
        self._pool.clear()
