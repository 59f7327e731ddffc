"""RewardService (worker processes behind rlvr/rewards/pool.py's VerifierPool): same scores as the in-process
Rewarder; hung, crashing and killed workers become counted timeout/error verdicts, the pool is refilled, and no
worker process outlives the service or the trainer."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
import torch

from reward_service_helpers import CRASH, CRASH_ONCE, HANG, failing_factory, trap_factory
from rlvr.config.run import TaskConfig
from rlvr.rewards.pool import VerifierPool
from rlvr.rewards.rewarder import Rewarder
from rlvr.rewards.service import RewardService
from rlvr.types import Outcome, Prompt, RolloutBatch

TASK = TaskConfig(verifiers={"math": 1.0, "answer_format": 0.5})
DEADLINE_S = 1.0


def prompt(reference: str) -> Prompt:
    return Prompt(id=f"t/{reference}", messages=({"role": "user", "content": "q"},), reference=reference)


# correct, wrong, unparseable (strict: no marker), bad gold (unscorable), correct with another form
MIXED = [(prompt("7"), "3 + 4 = 7\nAnswer: 7"), (prompt("7"), "Answer: 8"), (prompt("10"), "ten, I think 10"),
         (prompt(""), "Answer: 3"), (prompt("0.5"), "so \\boxed{1/2}")] * 4


def length_bonus(prompts, completions, **_):  # a TRL-style function: runs in the parent, never pickled
    return [min(len(c) / 20, 1.0) for c in completions]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_members(pgid: int) -> list[int]:
    return [p.pid for p in psutil.process_iter() if _pgid(p.pid) == pgid and alive(p.pid)]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def wait_until(condition, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def assert_correct_batch(service: VerifierPool) -> None:
    scored = service.score([prompt("7"), prompt("9")], ["Answer: 7", "Answer: 9"])
    assert [v.outcome for v in scored.verdicts["math"]] == [Outcome.CORRECT, Outcome.CORRECT]


@pytest.fixture(scope="module")
def service():
    with RewardService.start(TASK, workers=2, deadline_s=DEADLINE_S, retries=1, verifier_factory=trap_factory,
                             reward_functions={"length": (lambda prompts, completions, **_: length_bonus(
                                 prompts, completions), 0.25)}) as svc:
        yield svc


def test_same_scores_as_in_process_rewarder(service):
    prompts, completions = zip(*MIXED)
    expected = Rewarder({**Rewarder.from_task(TASK).components, "length": (length_bonus, 0.25)}
                        ).score(prompts, completions)
    in_process = RewardService.start(TASK, workers=0, reward_functions={"length": (length_bonus, 0.25)})
    for scored in (service.submit(prompts, completions).result(timeout=30), in_process.score(prompts, completions)):
        assert scored.rewards.tolist() == expected.rewards.tolist()
        assert scored.scorable.tolist() == expected.scorable.tolist() == [True, True, True, False, True] * 4
        assert scored.verdicts == expected.verdicts
        assert list(scored.verdicts) == ["math", "answer_format", "length"]
        assert {k: v.tolist() for k, v in scored.scores.items()} == {k: v.tolist() for k, v in expected.scores.items()}
    outcomes = [v.outcome for v in expected.verdicts["math"][:5]]
    assert outcomes == [Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE, Outcome.ERROR, Outcome.CORRECT]
    assert in_process.stats()["completed"] == len(MIXED)
    assert service.score([], []).rewards.numel() == 0


def test_score_rollout_checks_row_i_against_its_group_prompt(service):
    zeros = torch.zeros(4, 3, dtype=torch.long)
    batch = RolloutBatch(prompts=[prompt("7"), prompt("10")], group_size=2, prompt_ids=zeros, prompt_mask=zeros,
                         completion_ids=zeros, completion_mask=zeros, sampling_logprobs=zeros.float(),
                         completions=["Answer: 7", "Answer: 10", "Answer: 10", "so 10"],
                         truncated=torch.zeros(4, dtype=torch.bool))
    expected = Rewarder({**Rewarder.from_task(TASK).components, "length": (length_bonus, 0.25)}).score_rollout(batch)
    assert service.score_rollout(batch).rewards.tolist() == expected.rewards.tolist()
    assert [v.outcome for v in service.submit_rollout(batch).result().verdicts["math"]] == [
        Outcome.CORRECT, Outcome.WRONG, Outcome.CORRECT, Outcome.UNPARSEABLE]


def test_workers_do_not_import_torch(service):
    for pid in service.transport.pids():
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert "libtorch" not in maps and "torch/_C" not in maps


def test_hung_verifier_times_out_and_the_pool_recovers(service):
    before, old_pids = service.stats(), service.transport.pids()
    start = time.monotonic()
    scored = service.submit([prompt("7")] * 3, ["Answer: 7", HANG, "Answer: 7"]).result(timeout=30)
    elapsed = time.monotonic() - start
    assert elapsed < DEADLINE_S + 3.0
    hung = [scored.verdicts[name][1] for name in ("math", "answer_format")]
    assert [v.outcome for v in hung] == [Outcome.TIMEOUT, Outcome.TIMEOUT]
    assert hung[0].detail == f"reward service: no verdict within {DEADLINE_S:g}s"
    assert scored.verdicts["math"][0].outcome is scored.verdicts["math"][2].outcome is Outcome.CORRECT
    assert scored.rewards[1].item() == pytest.approx(0.25 * min(len(HANG) / 20, 1.0))  # only the parent's part
    after = service.stats()
    assert after["timeouts"] == before["timeouts"] + 1 and after["restarts"] == before["restarts"] + 1
    killed = set(old_pids) - set(service.transport.pids())
    assert len(killed) == 1 and not any(alive(pid) or group_members(pid) for pid in killed)  # reaped, no orphans
    assert len(service.transport.pids()) == 2
    assert_correct_batch(service)


def test_crash_once_is_retried_on_a_fresh_worker(service, tmp_path):
    before = service.stats()
    completion = f"{CRASH_ONCE}{tmp_path / 'flag'}\nAnswer: 7"
    scored = service.score([prompt("7")] * 2, [completion, "Answer: 7"])
    assert [v.outcome for v in scored.verdicts["math"]] == [Outcome.CORRECT, Outcome.CORRECT]
    after = service.stats()
    assert (after["crashes"], after["retries"]) == (before["crashes"] + 1, before["retries"] + 1)
    assert after["errors"] == before["errors"]


def test_crash_every_time_is_an_error_verdict_and_the_pool_is_refilled(service):
    before = service.stats()
    scored = service.score([prompt("7")] * 3, ["Answer: 7", CRASH, "Answer: 7"])
    crashed = scored.verdicts["math"][1]
    assert crashed.outcome is Outcome.ERROR and crashed.detail == "reward worker crashed (exit code 1)"
    assert scored.verdicts["answer_format"][1].outcome is Outcome.ERROR
    assert scored.verdicts["math"][2].outcome is Outcome.CORRECT  # queued behind the crash: not charged
    after = service.stats()
    assert after["crashes"] == before["crashes"] + 2  # first try + one retry
    assert (after["retries"], after["errors"]) == (before["retries"] + 1, before["errors"] + 1)
    assert wait_until(lambda: service.stats()["workers"] == 2) and all(alive(pid) for pid in service.transport.pids())
    assert after["completed"] - before["completed"] == 3


def test_worker_killed_between_batches_is_replaced(service):
    assert wait_until(lambda: service.stats()["workers"] == 2)
    before = service.stats()
    victim = service.transport.pids()[0]
    os.kill(victim, signal.SIGKILL)
    assert wait_until(lambda: victim not in service.transport.pids())
    assert_correct_batch(service)
    assert service.stats()["crashes"] == before["crashes"] + 1
    assert len(service.transport.pids()) == 2 and not alive(victim)


def test_close_leaves_no_process_behind():
    svc = RewardService.start(TaskConfig(), workers=2, deadline_s=30.0)
    # \frac needs math-verify: each worker starts its own math-verify child, which must go too
    scored = svc.score([prompt("\\frac{1}{2}")] * 4, ["Answer: 0.5", "\\boxed{\\frac{2}{4}}", "Answer: 1", "x"])
    assert [v.outcome for v in scored.verdicts["math"]][:3] == [Outcome.CORRECT, Outcome.CORRECT, Outcome.WRONG]
    pids = svc.transport.pids()
    svc.close()
    assert not any(alive(pid) or group_members(pid) for pid in pids)
    assert svc.transport.pids() == [] and svc.stats()["workers"] == 0
    with pytest.raises(RuntimeError, match="closed"):
        svc.submit([prompt("1")], ["Answer: 1"])
    svc.close()  # idempotent


def test_workers_die_with_a_killed_trainer(tmp_path):
    """A SIGKILLed parent cannot clean up: idle workers see EOF, a worker stuck in a verifier polls the ppid."""
    hung = tmp_path / "hung"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from reward_service_helpers import HANG, trap_factory
        from rlvr.config.run import TaskConfig
        from rlvr.rewards.service import RewardService
        from rlvr.types import Prompt
        svc = RewardService.start(TaskConfig(), workers=2, deadline_s=60.0, verifier_factory=trap_factory)
        svc.submit([Prompt("p", (), "1")], [HANG + {str(hung)!r}])
        print(*svc.transport.pids(), flush=True)
        time.sleep(60)
    """)
    trainer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = [int(pid) for pid in trainer.stdout.readline().split()]
    assert len(pids) == 2 and all(alive(pid) for pid in pids)
    assert wait_until(hung.exists)  # one worker is now stuck in a verifier: only its watchdog can end it
    trainer.kill()
    trainer.wait()
    assert wait_until(lambda: not any(alive(pid) for pid in pids), timeout=5.0)


def test_failing_factory_raises_at_start_up():
    with pytest.raises(RuntimeError, match="no verifiers for you"):
        RewardService.start(TASK, workers=1, verifier_factory=failing_factory)
    with pytest.raises(TypeError, match="importable top-level function"):
        RewardService.start(TASK, workers=1, verifier_factory=lambda task: {})
    with pytest.raises(ValueError):
        RewardService.start(TASK, workers=1, deadline_s=0)
