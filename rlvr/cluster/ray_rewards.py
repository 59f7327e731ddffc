"""The verifier pool as Ray actors: the Transport of rlvr/rewards/pool.py's VerifierPool, as
rlvr/rewards/service.py is for worker processes. Each actor builds the task's verifiers (build_verifiers) and
answers one sample per call with safe_verify; the pool queues, counts and weights the verdicts (pool.combine),
so scoring is the local service's, only placed elsewhere.

Every sample gets a verdict in bounded time, as locally: `reward.deadline_s` per sample from dispatch (the
verifiers' own budget, task.verifier_timeout_s, is applied inside them) -> TIMEOUT, and the actor is killed
and restarted by Ray (max_restarts); an actor that dies on its own -> its sample is retried on the restarted
actor up to `reward.retries` times, then ERROR. An actor that cannot restart leaves the pool; with none left,
waiting samples get ERROR verdicts rather than stall the trainer."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from rlvr.cluster.session import RayBackendError, acquire, get, release
from rlvr.rewards.pool import Job, PoolSettings, VerifierPool
from rlvr.types import Verdict
from rlvr.verifiers import build_verifiers, safe_verify
from rlvr.verifiers.base import error_verdict

if TYPE_CHECKING:
    from rlvr.config.run import RayConfig, RewardConfig, TaskConfig

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

    def verify(self, completion: str, reference: str, truncated: bool = False) -> list[Verdict]:
        return [safe_verify(v, completion, reference, truncated) for v in self.verifiers.values()]


@dataclass
class _Slot:
    actor: Any
    ready: bool = False
    ref: Any = None  # the call in flight: ready() while (re)starting, else verify()
    job: Job | None = None  # of one row
    deadline: float = 0.0  # time.monotonic() by which `ref` must answer
    probe_at: float | None = None  # while restarting: when to ask again whether it is back (ready())
    failed_probes: int = 0  # consecutive; reset once it answers


class RayRewardService:
    """`config.ray.verifier_actors` actors: `start` returns their VerifierPool (submit_rollout, score_rollout,
    stats, close); TRL-style `reward_functions` run in the driver, in `result()`, as locally."""

    @classmethod
    def start(cls, cluster: RayConfig, task: TaskConfig, reward: RewardConfig,
              reward_functions: Mapping[str, tuple[Callable, float]]) -> VerifierPool:
        """cluster: Ray's address and the actor count; task: the verifiers and their weights; reward: the
        deadline and retries of each sample."""
        # max_chunk=1: one sample per call, so a deadline and a crash concern one sample
        pool = VerifierPool(PoolSettings(task.verifiers, float(reward.deadline_s), reward.retries,
                                         cluster.verifier_actors, 1), reward_functions)
        ray = acquire(cluster.address)
        try:
            pool.start(cls(ray, task, cluster.verifier_actors, pool.names), thread_name="ray-reward-service")
        except BaseException:
            release()
            raise
        return pool

    def __init__(self, ray: Any, task_config: TaskConfig, actors: int, names: list[str]):
        self._ray, self._wake, self.names = ray, threading.Event(), names
        # No num_cpus: Ray's actor default (1 CPU to be placed, none held while running) keeps the verifiers from
        # starving the engine's reservation on a small cluster; a verifier is mostly idle between batches.
        # max_task_retries=0: a sample that crashed its actor is retried by the pool, counted, at most
        # reward.retries times.
        remote = ray.remote(max_restarts=MAX_RESTARTS, max_task_retries=0)(VerifierActor)
        self._slots = [_Slot(remote.remote(task_config)) for _ in range(actors)]  # the supervisor alone touches them
        try:  # start-up errors (an unknown verifier, a missing package) are the user's: one clear error
            built = [get(ray, s.actor.names.remote(), STARTUP_TIMEOUT_S, "starting a Ray verifier actor")
                     for s in self._slots]
        except RayBackendError:
            self.stop()
            raise
        if any(built_names != names for built_names in built):
            self.stop()
            raise RayBackendError(f"Ray verifier actors built {built[0]}, expected {names}")
        for slot in self._slots:
            slot.ready = True

    def serve(self, pool: VerifierPool) -> None:
        self._dispatch(pool)
        busy = {s.ref: s for s in self._slots if s.ref is not None}
        if not busy:
            probes = [s.probe_at for s in self._slots if s.probe_at is not None]
            self._wake.wait(max(0.0, min(probes) - time.monotonic()) if probes else None)
            self._wake.clear()
            return
        wait_s = min(POLL_S, max(0.0, min(s.deadline for s in busy.values()) - time.monotonic()))
        done, _ = self._ray.wait(list(busy), num_returns=len(busy), timeout=wait_s)
        for ref in done:
            self._receive(pool, busy[ref])
        self._expire(pool, time.monotonic())

    def wake(self) -> None:
        self._wake.set()

    def ready(self) -> int:
        return sum(s.ready for s in list(self._slots))

    def in_flight(self) -> list[tuple[Job, int]]:
        return [(s.job, 0) for s in self._slots if s.job is not None]

    def stop(self) -> None:
        for slot in self._slots:
            self._ray.kill(slot.actor, no_restart=True)
        self._slots.clear()

    def close(self) -> None:
        release()

    def _dispatch(self, pool: VerifierPool) -> None:
        if not self._slots:
            pool.fail_queued(error_verdict("no Ray verifier actor could be restarted"))
        now = time.monotonic()
        for slot in [s for s in self._slots if s.probe_at is not None and now >= s.probe_at]:
            # Not charged to any sample: ready() first, with the start-up deadline.
            slot.probe_at, slot.deadline, slot.ref = None, now + STARTUP_TIMEOUT_S, slot.actor.names.remote()
        for slot in [s for s in self._slots if s.ready and s.ref is None]:
            job = pool.next_job()
            if job is None:
                return
            (row,) = job.rows
            slot.job, slot.deadline = job, time.monotonic() + pool.settings.deadline_s
            slot.ref = slot.actor.verify.remote(job.future.completions[row], job.future.references[row],
                                                job.future.truncated[row])

    def _receive(self, pool: VerifierPool, slot: _Slot) -> None:
        from ray import exceptions as rex

        ref, job, slot.ref, slot.job = slot.ref, slot.job, None, None
        try:
            value = self._ray.get(ref, timeout=0)
        except rex.RayActorError:  # it died (its verifier crashed it, OOM, node lost): Ray restarts it
            return self._lost(pool, slot, job)
        except Exception as err:  # raised inside the actor (cannot happen: safe_verify catches), or garbled
            if job is None:
                return self._drop(slot, f"{type(err).__name__}: {err}")
            return pool.failed(job, 0, error_verdict("Ray verifier actor failed", err))
        if job is None:  # ready() of a restarted actor
            slot.ready, slot.failed_probes = True, 0
        elif not (isinstance(value, list) and len(value) == len(self.names)):
            pool.failed(job, 0, error_verdict(f"Ray verifier actor returned {type(value).__name__}"))
        else:
            pool.finish(job.future, job.rows[0], value)

    def _expire(self, pool: VerifierPool, now: float) -> None:
        for slot in [s for s in self._slots if s.ref is not None and now >= s.deadline]:
            job = slot.job
            if job is None:
                self._drop(slot, f"not ready within {STARTUP_TIMEOUT_S:g}s")
                continue
            self._ray.kill(slot.actor, no_restart=False)  # a stuck verifier: Ray restarts the actor
            self._restarting(pool, slot)
            pool.timed_out(job, 0)

    def _lost(self, pool: VerifierPool, slot: _Slot, job: Job | None) -> None:
        if job is None:  # not back yet, died again while restarting, or out of restarts
            slot.failed_probes += 1
            if slot.failed_probes > MAX_RESTARTS:
                return self._drop(slot, f"not back after {slot.failed_probes} probes")
            slot.probe_at = time.monotonic() + PROBE_BACKOFF_S * slot.failed_probes
            return None
        log.warning("Ray verifier actor died; Ray restarts it")
        self._restarting(pool, slot)
        pool.crashed(job, 0, "Ray verifier actor died on this sample")

    def _restarting(self, pool: VerifierPool, slot: _Slot) -> None:
        pool.count("restarts")
        slot.ready, slot.job, slot.ref, slot.probe_at = False, None, None, time.monotonic()

    def _drop(self, slot: _Slot, reason: str) -> None:
        log.error("Ray verifier actor leaves the pool: %s", reason)
        self._ray.kill(slot.actor, no_restart=True)
        self._slots.remove(slot)
