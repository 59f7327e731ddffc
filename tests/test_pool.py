"""The verifier pool's core (rlvr/rewards/pool.py) behind a scripted transport: how a batch is cut into jobs,
and what close() makes of samples a worker still holds. The real transports: test_reward_service.py, test_ray.py."""
from __future__ import annotations

import threading

from rlvr.rewards.pool import PoolSettings, VerifierPool
from rlvr.types import Outcome, Prompt, Verdict


class Holding:
    """Takes every job, answers its first row and then nothing: stuck workers, as the core sees them."""

    def __init__(self):
        self.held, self.stopped, self._wake = [], False, threading.Event()

    def serve(self, pool):
        while (job := pool.next_job()) is not None:
            self.held.append(job)
            pool.finish(job.future, job.rows[0], [Verdict(Outcome.CORRECT, 1.0)])
        self._wake.wait()
        self._wake.clear()

    def wake(self):
        self._wake.set()

    def ready(self):
        return 0 if self.stopped else 1

    def in_flight(self):
        return [(job, 1) for job in self.held]  # each job's first row answered

    def stop(self):
        self.stopped = True

    def close(self):
        pass


def test_close_gives_every_held_sample_an_error_verdict_and_keeps_the_answered_ones():
    pool = VerifierPool(PoolSettings({"math": 1.0}, deadline_s=1.0, retries=1, workers=1, max_chunk=16))
    transport = Holding()
    pool.start(transport, thread_name="test-pool")
    future = pool.submit([Prompt("p", (), "1")] * 10, ["Answer: 1"] * 10)
    # one worker: jobs of ceil(10 / 4) = 3 consecutive rows, so that uneven costs still balance
    for _ in range(500):  # the supervisor thread takes the queue at once; wait 5 s at most
        if sum(len(job.rows) for job in transport.held) == 10:
            break
        threading.Event().wait(0.01)
    assert [job.rows for job in transport.held] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    pool.close()
    outcomes = [v.outcome for v in future.result(timeout=5).verdicts["math"]]
    assert outcomes == [Outcome.CORRECT if row in (0, 3, 6, 9) else Outcome.ERROR for row in range(10)]
    assert future.result().verdicts["math"][1].detail.startswith("reward service closed before")
    assert pool.stats() == {"submitted": 10, "completed": 10, "timeouts": 0, "crashes": 0, "errors": 6,
                            "retries": 0, "restarts": 0, "workers": 0}
    assert transport.stopped


class Scripted:
    """Serves in submit (no thread), one row at a time: the rows in `script` time out or crash their worker
    (one action per attempt), every other row is answered. Without a thread, the pool calls only serve and ready."""

    def __init__(self, script: dict[int, list[str]]):
        self.script = script

    def serve(self, pool):
        while (job := pool.next_job()) is not None:
            row, actions = job.rows[0], self.script.get(job.rows[0], [])
            if actions:
                pool.count("restarts")  # a transport replaces the worker before it reports
                if actions.pop(0) == "timeout":
                    pool.timed_out(job, 0)
                else:
                    pool.crashed(job, 0, "worker crashed")
                continue
            pool.requeue(job, 1)  # the rest of the job waits at the head, as a worker's unanswered rows do
            pool.finish(job.future, row, [Verdict(Outcome.CORRECT, 1.0)])

    def ready(self):
        return 1


def test_timeouts_and_crashes_become_counted_verdicts_and_the_rows_behind_them_still_run():
    pool = VerifierPool(PoolSettings({"math": 1.0}, deadline_s=2.5, retries=1, workers=1, max_chunk=16))
    pool.start(Scripted({0: ["timeout"], 2: ["crash"], 4: ["crash", "crash"]}), thread_name=None)
    # jobs of ceil(8 / 4) = 2 rows: [0, 1] [2, 3] [4, 5] [6, 7]; rows 1 and 5 sit behind a failure
    verdicts = pool.submit([Prompt("p", (), "1")] * 8, ["Answer: 1"] * 8).result(timeout=1).verdicts["math"]
    assert [v.outcome for v in verdicts] == [Outcome.TIMEOUT] + [Outcome.CORRECT] * 3 + [Outcome.ERROR] + [
        Outcome.CORRECT] * 3  # row 2 crashed once and was retried; row 4 twice: past retries=1
    assert (verdicts[0].detail, verdicts[4].detail) == ("reward service: no verdict within 2.5s", "worker crashed")
    assert pool.stats() == {"submitted": 8, "completed": 8, "timeouts": 1, "crashes": 3, "errors": 1,
                            "retries": 2, "restarts": 4, "workers": 1}
