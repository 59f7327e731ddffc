"""Reward service on worker processes: the verifiers run beside the trainer, overlapped with it.
This module is the processes' Transport; rlvr/rewards/pool.py (VerifierPool) queues, counts and turns
timeouts and crashes into verdicts, as for Ray actors.

    pool = RewardService.start(task_config, workers=2)  # a VerifierPool: submit/score/stats/close

No answer within `deadline_s` -> the worker is killed with its process group and replaced (TIMEOUT); a
worker that dies (segfault, os._exit, OOM kill) is replaced and its sample retried (pool.py).

Workers are `python -c` interpreters: forking the trainer, which runs torch threads, can deadlock the child,
and multiprocessing's spawn/forkserver re-import the parent's `__main__` in every worker (for `rlvr train` or
a user script: torch, seconds and hundreds of MB each). A worker imports only torch-free modules, leads its
own session (one killpg ends it and its children, e.g. math-verify) and dies with the trainer: EOF on its
request pipe when idle, a parent-pid watchdog when stuck in a verifier.

TRL-style reward functions run in the parent, in `result()`, without a deadline (closures and lambdas cannot
be sent to another interpreter); so does everything with `workers=0`, in `submit`. Keep `deadline_s` well
above the verifiers' own budgets (a worker's first math-verify call also imports sympy). On 2 cores workers
and trainer share the CPU: cheap numeric checks gain nothing (a few ms of IPC a batch), slow ones (sympy,
sandboxed code, a stuck verifier) stop blocking the step."""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection, Pipe
from typing import Any, Callable, Mapping

from rlvr.rewards.pool import Job, PoolSettings, VerifierPool
from rlvr.verifiers import build_verifiers, safe_verify
from rlvr.verifiers.base import error_verdict

log = logging.getLogger(__name__)
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # so rlvr imports from any cwd
_WORKER_COMMAND = (f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
                   "from rlvr.rewards.service import _worker_main; _worker_main()")
STARTUP_TIMEOUT_S = 60.0  # interpreter, imports and verifier set-up; not charged to any sample
MAX_START_FAILURES = 3  # consecutive failed starts (not crashes) mean a broken set-up: stop respawning
MAX_CHUNK = 16  # samples per job: fewer messages, while small jobs still balance uneven costs


def _exit_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    # A worker stuck in a verifier never reads its pipe, so it would not see the trainer die; poll instead.
    while os.getppid() == parent_pid:
        time.sleep(poll_s)
    os.killpg(0, signal.SIGKILL)  # this worker's whole group: itself and e.g. its math-verify child


def _worker_main() -> None:
    """Worker entry (`python -c ... REQUEST_FD REPLY_FD`; not stdin/stdout, which verifiers may print to)."""
    requests, replies = Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False)
    try:
        sys_path, parent_pid, payload = requests.recv()
        sys.path[:] = sys_path  # as spawn does: the factory may live in a test or user module
        threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()
        factory, task_config = pickle.loads(payload)
        verifiers = dict(factory(task_config))
    except EOFError:
        return
    except Exception as err:  # sent to the parent, which raises it at start-up
        return replies.send(("init_error", f"{type(err).__name__}: {err}"))
    replies.send(("ready", list(verifiers)))
    with contextlib.suppress(EOFError):  # EOF: closed by the parent, or the parent is gone
        for samples in iter(requests.recv, None):
            for index, (completion, reference, truncated) in enumerate(samples):
                # One reply per sample: the deadline is per sample, and a crash is blamed on one sample.
                verdicts = [safe_verify(v, completion, reference, truncated) for v in verifiers.values()]
                replies.send(("verdicts", index, verdicts))


class _Worker:
    """One verifier process, leader of its own session, and the job it holds."""

    def __init__(self, init_message: tuple):
        child_requests, self.requests = Pipe(duplex=False)
        self.replies, child_replies = Pipe(duplex=False)
        fds = (child_requests.fileno(), child_replies.fileno())
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER_COMMAND, *map(str, fds)], pass_fds=fds,
                                     stdin=subprocess.DEVNULL, stdout=2, start_new_session=True)
        child_requests.close()
        child_replies.close()  # so that its death reads as EOF here
        self.fd, self.ready, self.task = self.replies.fileno(), False, None  # task: the Job it holds
        self.answered = 0  # samples of `task` answered so far: the worker is on task.rows[answered]
        self.deadline: float | None = time.monotonic() + STARTUP_TIMEOUT_S
        with contextlib.suppress(OSError):  # if it died at once, the EOF on its reply pipe reports that
            self.requests.send(init_message)

    def kill(self, grace_s: float = 0.0) -> int:
        """End it and its process group; its exit code. A grace period first asks it to exit (EOF)."""
        if self.proc.returncode is None:
            self.requests.close()
            with contextlib.suppress(subprocess.TimeoutExpired):  # a clean exit has reaped its own children
                self.proc.wait(grace_s) if grace_s else None
            if self.proc.returncode is None:  # unreaped, even if dead: its group id names our group only
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.replies.close()
        return self.proc.returncode


class RewardService:
    """The verifiers of `task_config` in `workers` processes: `start` returns their VerifierPool.

    `verifier_factory(task_config) -> {name: Verifier}` runs in each worker: an importable top-level function
    (pickled by name) that builds exactly the names of `task_config.verifiers`, whose values are the weights.
    `reward_functions`: name -> (f(prompts, completions, **columns) -> list[float | None], weight)."""

    @classmethod
    def start(cls, task_config: Any, workers: int = 2, deadline_s: float = 30.0, retries: int = 1, *,
              reward_functions: Mapping[str, tuple[Callable, float]] | None = None,
              verifier_factory: Callable[[Any], Mapping[str, Any]] = build_verifiers) -> VerifierPool:
        if workers < 0 or retries < 0 or not deadline_s > 0:
            raise ValueError(f"need workers >= 0, retries >= 0, deadline_s > 0; got {workers}, {retries}, {deadline_s}")
        pool = VerifierPool(PoolSettings(task_config.verifiers, float(deadline_s), retries, workers, MAX_CHUNK),
                            reward_functions)
        if workers == 0:
            pool.start(_InProcess(dict(verifier_factory(task_config)), pool.names), thread_name=None)
            return pool
        try:
            payload = pickle.dumps((verifier_factory, task_config))
        except Exception as err:
            raise TypeError("verifier_factory must be an importable top-level function and task_config "
                            f"picklable: {type(err).__name__}: {err}") from err
        service = cls((list(sys.path), os.getpid(), payload), workers, pool.names)
        pool.start(service, thread_name="reward-service")
        atexit.register(pool.close)
        service._started.wait()  # bounded: a worker not ready within STARTUP_TIMEOUT_S has failed
        if service._startup_failed:
            pool.close()
            raise RuntimeError(f"reward worker failed to start: {service._start_error}")
        return pool

    def __init__(self, init_message: tuple, workers: int, names: list[str]):
        self._init_message, self.names = init_message, names
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._start_failures, self._start_error, self._startup_failed, self._started = 0, "", False, threading.Event()
        self._workers = [_Worker(init_message) for _ in range(workers)]  # the supervisor alone touches them

    def serve(self, pool: VerifierPool) -> None:
        self._dispatch(pool)
        fds = {w.fd: w for w in self._workers}
        deadlines = [w.deadline for w in self._workers if w.deadline is not None]
        wait_s = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        for fd in select.select([self._wake_r, *fds], [], [], wait_s)[0]:
            if fd == self._wake_r:
                os.read(self._wake_r, 4096)
            elif fds[fd] in self._workers:
                self._receive(pool, fds[fd])
        self._expire(pool, time.monotonic())

    def wake(self) -> None:
        with contextlib.suppress(OSError):  # a full pipe: the supervisor is awake anyway
            os.write(self._wake_w, b"x")

    def ready(self) -> int:
        return sum(w.ready for w in list(self._workers))

    def pids(self) -> list[int]:  # the current workers' process ids (tests, debugging)
        return [w.proc.pid for w in list(self._workers)]

    def in_flight(self) -> list[tuple[Job, int]]:
        return [(w.task, w.answered) for w in self._workers if w.task is not None]

    def stop(self) -> None:
        for worker in self._workers:  # EOF to all first, so each can exit and reap its children (math-verify)
            worker.requests.close()
        for worker in self._workers:
            worker.kill(grace_s=1.0)
        self._workers.clear()

    def close(self) -> None:
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _dispatch(self, pool: VerifierPool) -> None:
        if not self._workers:  # no worker could be restarted: answer rather than stall the trainer
            pool.fail_queued(error_verdict(f"reward workers cannot start: {self._start_error}"))
        for worker in [w for w in self._workers if w.ready and w.task is None]:
            job = pool.next_job()
            if job is None:
                return
            try:
                f = job.future
                worker.requests.send([(f.completions[r], f.references[r], f.truncated[r]) for r in job.rows])
            except OSError:  # it died since its last reply: the job never reached it, so nothing is charged
                pool.requeue(job, 0)
                self._lost(pool, worker)
                continue
            worker.task, worker.answered, worker.deadline = job, 0, time.monotonic() + pool.settings.deadline_s

    def _receive(self, pool: VerifierPool, worker: _Worker) -> None:
        while worker in self._workers:
            try:
                message = worker.replies.recv() if worker.replies.poll() else None
            except Exception:  # EOF (it died) or a garbled reply: a crash, rather than trust what it says
                return self._lost(pool, worker)
            if message is None:
                return
            self._handle(pool, worker, message)

    def _handle(self, pool: VerifierPool, worker: _Worker, message: tuple) -> None:
        if message[0] == "verdicts":
            job = worker.task
            if job is None or message[1] != worker.answered or len(message[2]) != len(self.names):
                return self._lost(pool, worker)  # cannot happen with our worker; never misattribute a verdict
            worker.answered += 1
            done = worker.answered == len(job.rows)
            worker.task, worker.deadline = (None, None) if done else (job, time.monotonic() + pool.settings.deadline_s)
            pool.finish(job.future, job.rows[message[1]], message[2])
        elif message[0] == "ready" and message[1] == self.names:
            worker.ready, worker.deadline, self._start_failures = True, None, 0
            if all(w.ready for w in self._workers):
                self._started.set()
        else:  # an init_error, or verifiers other than the configured ones
            self._replace(pool, worker, message[1] if message[0] == "init_error" else
                          f"verifier_factory built {message[1]}, expected {self.names}")

    def _expire(self, pool: VerifierPool, now: float) -> None:
        for worker in [w for w in self._workers if w.deadline is not None and now >= w.deadline]:
            if not worker.ready:
                self._replace(pool, worker, f"not ready within {STARTUP_TIMEOUT_S:g}s")
                continue
            job, position = worker.task, worker.answered
            self._replace(pool, worker)  # before the verdict, so whoever waits on the future sees the counts
            pool.timed_out(job, position)

    def _lost(self, pool: VerifierPool, worker: _Worker) -> None:  # it died on its own, or someone killed it
        code = worker.kill()
        if not worker.ready:
            return self._replace(pool, worker, f"exited with code {code} during start-up")
        log.warning("reward worker %d died with exit code %s; replacing it", worker.proc.pid, code)
        job, position = worker.task, worker.answered
        self._replace(pool, worker)
        pool.crashed(job, position, f"reward worker crashed (exit code {code})")

    def _replace(self, pool: VerifierPool, worker: _Worker, start_error: str | None = None) -> None:
        worker.kill()
        self._workers.remove(worker)
        if start_error is not None:
            self._start_failures, self._start_error = self._start_failures + 1, start_error
            log.error("reward worker failed to start: %s", start_error)
            self._startup_failed = not self._started.is_set()  # the first start: start() raises it
            self._started.set()
        if not (pool.closing or self._startup_failed or self._start_failures >= MAX_START_FAILURES):
            self._workers.append(_Worker(self._init_message))
            pool.count("restarts")


class _InProcess:
    """workers=0: the verifiers in this process, run by submit itself (no thread, no deadline)."""

    def __init__(self, verifiers: dict[str, Any], names: list[str]):
        if list(verifiers) != names:
            raise ValueError(f"verifier_factory built {list(verifiers)}, expected {names}")
        self.verifiers = verifiers

    def serve(self, pool: VerifierPool) -> None:
        while (job := pool.next_job()) is not None:
            for row in job.rows:
                sample = job.future.completions[row], job.future.references[row], job.future.truncated[row]
                pool.finish(job.future, row, [safe_verify(v, *sample) for v in self.verifiers.values()])

    def ready(self) -> int:
        return 0

    def in_flight(self) -> list[tuple[Job, int]]:
        return []

    def wake(self) -> None:  # never called, as stop and close: without a supervisor there is nothing to wake
        pass

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass
