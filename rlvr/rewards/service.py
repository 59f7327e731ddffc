"""Reward service: the verifiers run in a pool of worker processes, overlapped with the trainer (issue #3, item 5).

    future = service.submit(prompts, completions)  # returns at once; the trainer computes ref log-probs...
    scored = future.result()                       # ...then waits: a ScoredBatch, weighted by Rewarder.score

Every sample gets a verdict from every verifier in bounded time, and every failure is a counted verdict: no
answer within `deadline_s` -> TIMEOUT (the worker is killed with its process group and replaced); a worker
that dies (segfault, os._exit, OOM kill) -> its sample is retried on a fresh worker up to `retries` times,
then ERROR. Samples behind it in its chunk never ran: they are re-queued, uncharged.

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
import collections
import contextlib
import logging
import math
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from rlvr.types import Outcome, Verdict
from rlvr.verifiers import build_verifiers, safe_verify
from rlvr.verifiers.base import error_verdict

if TYPE_CHECKING:
    from rlvr.types import Prompt, RolloutBatch, ScoredBatch

log = logging.getLogger(__name__)
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # so rlvr imports from any cwd
_WORKER_COMMAND = (f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
                   "from rlvr.rewards.service import _worker_main; _worker_main()")
STARTUP_TIMEOUT_S = 60.0  # interpreter, imports and verifier set-up; not charged to any sample
MAX_START_FAILURES = 3  # consecutive failed starts (not crashes) mean a broken set-up: stop respawning
MAX_CHUNK = 16  # samples per task: fewer messages, while small chunks still balance uneven costs


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
            for index, (completion, reference) in enumerate(samples):
                # One reply per sample: the deadline is per sample, and a crash is blamed on one sample.
                verdicts = [safe_verify(v, completion, reference) for v in verifiers.values()]
                replies.send(("verdicts", index, verdicts))


def combine(prompts: Sequence[Prompt], completions: Sequence[str], verdicts: Mapping[str, Sequence[Verdict]],
            weights: Mapping[str, float], reward_functions: Mapping[str, tuple[Callable, float]] | None = None
            ) -> ScoredBatch:
    """Verdicts computed elsewhere, plus TRL-style reward functions run here -> ScoredBatch."""
    from rlvr.rewards.rewarder import call_reward_function, weigh  # imports torch: parent only

    functions = reward_functions or {}
    all_verdicts = {**verdicts, **{name: call_reward_function(fn, prompts, completions)
                                   for name, (fn, _) in functions.items()}}
    return weigh(all_verdicts, {**weights, **{name: w for name, (_, w) in functions.items()}})


class ScoreFuture:
    """The pending ScoredBatch of one `submit`; `result()` waits for every sample's verdicts."""

    def __init__(self, service: RewardService, prompts: Sequence[Prompt], completions: Sequence[str]):
        self._service, self._scored = service, None
        self.prompts, self.completions = list(prompts), list(completions)
        self.references = [prompt.reference for prompt in self.prompts]
        n = self._missing = len(self.completions)
        self.attempts = [0] * n  # worker crashes charged to each sample
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
            svc = self._service
            by_name = {name: [row[k] for row in self._verdicts] for k, name in enumerate(svc.names)}
            self._scored = combine(self.prompts, self.completions, by_name, svc.weights, svc.reward_functions)
        return self._scored


@dataclass
class _Task:
    future: ScoreFuture
    rows: list[int]  # sample indices into the future's batch


class _Worker:
    """One verifier process, leader of its own session, and the task it holds."""

    def __init__(self, init_message: tuple):
        child_requests, self.requests = Pipe(duplex=False)
        self.replies, child_replies = Pipe(duplex=False)
        fds = (child_requests.fileno(), child_replies.fileno())
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER_COMMAND, *map(str, fds)], pass_fds=fds,
                                     stdin=subprocess.DEVNULL, stdout=2, start_new_session=True)
        child_requests.close()
        child_replies.close()  # so that its death reads as EOF here
        self.fd, self.ready, self.task = self.replies.fileno(), False, None  # task: the _Task it holds
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
    """The verifiers of `task_config` in `workers` processes; TRL-style `reward_functions` in the parent.

    `verifier_factory(task_config) -> {name: Verifier}` runs in each worker: an importable top-level function
    (pickled by name) that builds exactly the names of `task_config.verifiers`, whose values are the weights.
    `reward_functions`: name -> (f(prompts, completions, **columns) -> list[float | None], weight)."""

    def __init__(self, task_config: Any, workers: int = 2, deadline_s: float = 30.0, retries: int = 1, *,
                 reward_functions: Mapping[str, tuple[Callable, float]] | None = None,
                 verifier_factory: Callable[[Any], Mapping[str, Any]] = build_verifiers):
        if workers < 0 or retries < 0 or not deadline_s > 0:
            raise ValueError(f"need workers >= 0, retries >= 0, deadline_s > 0; got {workers}, {retries}, {deadline_s}")
        self.names = list(task_config.verifiers)
        self.weights = {name: float(weight) for name, weight in task_config.verifiers.items()}
        self.reward_functions = dict(reward_functions or {})
        if set(self.names) & set(self.reward_functions):
            raise ValueError(f"reward function names {list(self.reward_functions)} clash with verifiers")
        self.workers, self.deadline_s, self.retries = workers, float(deadline_s), retries
        # Each counter has one writer (submitted: the caller; the rest: the supervisor), so += needs no lock.
        self._counts = dict.fromkeys("submitted completed timeouts crashes errors retries restarts".split(), 0)
        self._lock = threading.Lock()  # no task may be queued after close() drained the queue
        self._closed = self._closing = False
        self._pool: list[_Worker] = []
        self._queue: collections.deque[_Task] = collections.deque()  # submit appends, the supervisor pops
        if workers == 0:
            self._verifiers = dict(verifier_factory(task_config))
            if list(self._verifiers) != self.names:
                raise ValueError(f"verifier_factory built {list(self._verifiers)}, expected {self.names}")
            return
        try:
            payload = pickle.dumps((verifier_factory, task_config))
        except Exception as err:
            raise TypeError("verifier_factory must be an importable top-level function and task_config "
                            f"picklable: {type(err).__name__}: {err}") from err
        self._init_message = (list(sys.path), os.getpid(), payload)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._start_failures, self._start_error, self._startup_failed, self._started = 0, "", False, threading.Event()
        self._pool = [_Worker(self._init_message) for _ in range(workers)]
        self._thread = threading.Thread(target=self._supervise, name="reward-service", daemon=True)
        self._thread.start()
        atexit.register(self.close)
        self._started.wait()  # bounded: a worker not ready within STARTUP_TIMEOUT_S has failed
        if self._startup_failed:
            self.close()
            raise RuntimeError(f"reward worker failed to start: {self._start_error}")

    def submit(self, prompts: Sequence[Prompt], completions: Sequence[str]) -> ScoreFuture:
        """Queue completion i against prompts[i]; returns at once (with workers=0, once scored)."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
        future, n = ScoreFuture(self, prompts, completions), len(completions)
        size = min(MAX_CHUNK, max(1, math.ceil(n / (4 * max(self.workers, 1)))))
        with self._lock:
            if self._closed:
                raise RuntimeError("reward service is closed")
            self._counts["submitted"] += n
            if self.workers:
                self._queue.extend(_Task(future, list(range(i, min(i + size, n)))) for i in range(0, n, size))
        if self.workers:
            self._wake()
            return future
        for row, (completion, reference) in enumerate(zip(future.completions, future.references)):
            self._finish(future, row, [safe_verify(v, completion, reference) for v in self._verifiers.values()])
        return future

    def submit_rollout(self, batch: RolloutBatch) -> ScoreFuture:  # row i is checked against batch.prompt_of(i)
        return self.submit([batch.prompt_of(row) for row in range(batch.size)], batch.completions)

    def score(self, prompts: Sequence[Prompt], completions: Sequence[str]) -> ScoredBatch:
        return self.submit(prompts, completions).result()  # blocking, as Rewarder.score

    def score_rollout(self, batch: RolloutBatch) -> ScoredBatch:  # as Rewarder.score_rollout (e.g. evaluate())
        return self.submit_rollout(batch).result()

    def stats(self) -> dict[str, int]:
        """Cumulative counts for metrics.jsonl, in samples (crashes, restarts: in processes); workers ready now."""
        return {**self._counts, "workers": sum(w.ready for w in list(self._pool))}

    def pids(self) -> list[int]:  # the current workers' process ids (tests, debugging)
        return [w.proc.pid for w in list(self._pool)]

    def close(self) -> None:
        """Stop the workers and their children; unfinished samples get ERROR verdicts. Idempotent."""
        with self._lock:
            closed, self._closed = self._closed, True
        if closed:
            return
        atexit.unregister(self.close)
        if self.workers and self._init_message[1] == os.getpid():  # a forked child does not own the pool
            self._closing = True
            self._wake()
            self._thread.join()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def __enter__(self) -> RewardService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _supervise(self) -> None:  # the supervisor thread: it alone touches the pool
        try:
            while not self._closing:
                self._dispatch()
                fds = {w.fd: w for w in self._pool}
                deadlines = [w.deadline for w in self._pool if w.deadline is not None]
                wait_s = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                for fd in select.select([self._wake_r, *fds], [], [], wait_s)[0]:
                    if fd == self._wake_r:
                        os.read(self._wake_r, 4096)
                    elif fds[fd] in self._pool:
                        self._receive(fds[fd])
                self._expire(time.monotonic())
        finally:  # also after a bug here: fail what is pending and refuse new work, rather than hang result()
            self._closed = True
            self._shutdown()

    def _dispatch(self) -> None:
        if not self._pool:  # no worker could be restarted: answer rather than stall the trainer
            self._fail_queued(error_verdict(f"reward workers cannot start: {self._start_error}"))
        for worker in [w for w in self._pool if w.ready and w.task is None]:
            if not self._queue:
                return
            task = self._queue.popleft()
            try:
                worker.requests.send([(task.future.completions[r], task.future.references[r]) for r in task.rows])
            except OSError:  # it died since its last reply: the task never reached it, so nothing is charged
                self._queue.appendleft(task)
                self._lost(worker)
                continue
            worker.task, worker.answered, worker.deadline = task, 0, time.monotonic() + self.deadline_s

    def _receive(self, worker: _Worker) -> None:
        while worker in self._pool:
            try:
                message = worker.replies.recv() if worker.replies.poll() else None
            except Exception:  # EOF (it died) or a garbled reply: a crash, rather than trust what it says
                return self._lost(worker)
            if message is None:
                return
            self._handle(worker, message)

    def _handle(self, worker: _Worker, message: tuple) -> None:
        if message[0] == "verdicts":
            task = worker.task
            if task is None or message[1] != worker.answered or len(message[2]) != len(self.names):
                return self._lost(worker)  # cannot happen with our worker; never misattribute a verdict
            worker.answered += 1
            done = worker.answered == len(task.rows)
            worker.task, worker.deadline = (None, None) if done else (task, time.monotonic() + self.deadline_s)
            self._finish(task.future, task.rows[message[1]], message[2])
        elif message[0] == "ready" and message[1] == self.names:
            worker.ready, worker.deadline, self._start_failures = True, None, 0
            if all(w.ready for w in self._pool):
                self._started.set()
        else:  # an init_error, or verifiers other than the configured ones
            self._replace(worker, message[1] if message[0] == "init_error" else
                               f"verifier_factory built {message[1]}, expected {self.names}")

    def _expire(self, now: float) -> None:
        for worker in [w for w in self._pool if w.deadline is not None and now >= w.deadline]:
            if not worker.ready:
                self._replace(worker, f"not ready within {STARTUP_TIMEOUT_S:g}s")
                continue
            task, position = worker.task, worker.answered
            self._counts["timeouts"] += 1
            self._replace(worker)  # before the verdict, so whoever waits on the future sees the counts
            self._requeue(task, position + 1)
            self._finish(task.future, task.rows[position], Verdict(
                Outcome.TIMEOUT, 0.0, f"reward service: no verdict within {self.deadline_s:g}s"))

    def _lost(self, worker: _Worker) -> None:  # it died on its own, or someone else killed it
        code = worker.kill()
        if not worker.ready:
            return self._replace(worker, f"exited with code {code} during start-up")
        self._counts["crashes"] += 1
        log.warning("reward worker %d died with exit code %s; replacing it", worker.proc.pid, code)
        task, position = worker.task, worker.answered
        self._replace(worker)
        if task is None:
            return
        row = task.rows[position]
        task.future.attempts[row] += 1
        if task.future.attempts[row] <= self.retries:
            self._counts["retries"] += 1
            return self._requeue(task, position)
        self._counts["errors"] += 1
        self._requeue(task, position + 1)
        self._finish(task.future, row, error_verdict(f"reward worker crashed (exit code {code})"))

    def _replace(self, worker: _Worker, start_error: str | None = None) -> None:
        worker.kill()
        self._pool.remove(worker)
        if start_error is not None:
            self._start_failures, self._start_error = self._start_failures + 1, start_error
            log.error("reward worker failed to start: %s", start_error)
            self._startup_failed = not self._started.is_set()  # the first start: __init__ raises it
            self._started.set()
        if not (self._closing or self._startup_failed or self._start_failures >= MAX_START_FAILURES):
            self._pool.append(_Worker(self._init_message))
            self._counts["restarts"] += 1

    def _requeue(self, task: _Task, start: int) -> None:
        if start < len(task.rows):  # ahead of newer work: this batch's result() is already waited on
            self._queue.appendleft(_Task(task.future, task.rows[start:]))

    def _finish(self, future: ScoreFuture, row: int, verdicts: list[Verdict] | Verdict) -> None:
        self._counts["completed"] += 1  # a service failure is one verdict for every verifier:
        future._set(row, verdicts if isinstance(verdicts, list) else [verdicts] * len(self.names))

    def _fail_queued(self, verdict: Verdict) -> None:
        while self._queue:
            task = self._queue.popleft()
            self._counts["errors"] += len(task.rows)
            for row in task.rows:
                self._finish(task.future, row, verdict)

    def _shutdown(self) -> None:
        for worker in self._pool:
            if worker.task is not None:
                self._requeue(worker.task, worker.answered)
        self._fail_queued(error_verdict("reward service closed before this sample was verified"))
        for worker in self._pool:  # EOF to all first, so each can exit and reap its children (math-verify)
            worker.requests.close()
        for worker in self._pool:
            worker.kill(grace_s=1.0)
        self._pool.clear()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # a full pipe: the supervisor is awake anyway
            os.write(self._wake_w, b"x")
