"""Ray back-end on a local two-CPU Ray cluster: a run with the engine and the verifiers as
actors equals the in-process run (the trainer seeds every generate call), a weight sync reaches the actor, and
failures are clear errors."""
from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

ray = pytest.importorskip("ray")

from rlvr.cluster.ray_backend import RayBackendError, RayEngine, RayRewardService  # noqa: E402
from rlvr.config.run import load_config  # noqa: E402
from rlvr.errors import UserFacingError  # noqa: E402
from rlvr.grpo.backends import host_settings  # noqa: E402
from rlvr.grpo.loop import train  # noqa: E402
from rlvr.model.load import load_model, load_tokenizer  # noqa: E402
from rlvr.rollout.base import SamplingParams  # noqa: E402
from rlvr.tasks import build_task  # noqa: E402
from rlvr.types import Outcome  # noqa: E402
from test_train_tiny import tiny_overrides  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    # Started by the test, so the back-end joins it and leaves it running between tests (session.acquire).
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _run(tiny_model_dir, out, extra):
    config = load_config(None, tiny_overrides(tiny_model_dir, out, steps=2) + ["eval.at_end=false", *extra])
    out.mkdir()
    final = train(config, out)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return final, records, samples


def test_ray_run_equals_local_run(tiny_model_dir, tmp_path):
    # No cluster yet: the back-end starts a local one sized to this machine, and shuts down only that one.
    assert not ray.is_initialized()
    # the random model earns no reward (zero advantages): the entropy bonus is what moves the weights, so the
    # actor samples step 2 from weights it only has if the sync after step 1 reached it
    moving = ["algorithm.entropy_coef=0.1"]
    local_final, local, local_samples = _run(tiny_model_dir, tmp_path / "local", moving)
    ray_final, remote, ray_samples = _run(tiny_model_dir, tmp_path / "ray", [*moving, "ray.enabled=true",
                                                                                "ray.verifier_actors=2"])
    assert [r["step"] for r in remote] == [1, 2]
    assert [r["reward_mean"] for r in remote] == [r["reward_mean"] for r in local]
    assert [(s["completion"], s["reward"]) for s in ray_samples] == [(s["completion"], s["reward"])
                                                                    for s in local_samples]
    # the post-sync probe ran and found the actor's copy equal to the trainer's (same weights, same code)
    assert all(r["engine/agreement_kl"] <= 1e-6 for r in remote)
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    before = AutoModelForCausalLM.from_pretrained(local_final).state_dict()
    after = AutoModelForCausalLM.from_pretrained(ray_final).state_dict()
    assert max((before[k] - initial[k]).abs().max().item() for k in before) > 1e-4  # it trained
    # the trainer is this process in both runs and saw the same completions: the same weights, bit for bit
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not ray.is_initialized()  # engine and reward service closed: the cluster they started is gone


def _config(tiny_model_dir, tmp_path, extra=()):
    return load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "unused") + ["ray.enabled=true", *extra])


def test_weight_sync_reaches_the_actor_and_a_dead_actor_is_one_clear_error(tiny_model_dir, tmp_path, cluster):
    from rlvr.rollout.agreement import trainer_logprobs

    config = _config(tiny_model_dir, tmp_path)
    policy, tokenizer = load_model(config.model, trainable=False), load_tokenizer(config.model)
    engine = RayEngine.start(config.ray, host_settings(config), policy, tokenizer)
    prompts = build_task(config.task).eval_prompts(2)
    batch = engine.generate(prompts, 2, SamplingParams(max_new_tokens=6, seed=7))
    assert batch.size == 4 and engine.version == 0 and batch.completion_mask.sum() > 0
    mask = batch.completion_mask
    start = engine.teacher_forced_logprobs(batch, 1.0)
    torch.testing.assert_close(start, trainer_logprobs(policy, batch, 1.0) * mask, rtol=0, atol=1e-6)
    torch.manual_seed(0)
    with torch.no_grad():  # the trainer's weights move; the actor's copy stays as it was until the sync
        for p in policy.parameters():
            p.add_(0.01 * torch.randn_like(p))
    moved = trainer_logprobs(policy, batch, 1.0) * mask
    assert (moved - start).abs().max() > 1e-3  # a stale copy would score visibly differently
    engine.sync_weights(policy, 1)
    assert engine.version == 1
    torch.testing.assert_close(engine.teacher_forced_logprobs(batch, 1.0), moved, rtol=0, atol=1e-6)

    ray.kill(engine._actor, no_restart=True)
    with pytest.raises(RayBackendError, match="generate .*Ray rollout engine actor.*died") as err:
        engine.generate(prompts, 2, SamplingParams(max_new_tokens=4, seed=7))
    assert issubclass(err.type, UserFacingError)  # rlvr/cli/main.py prints it as `rlvr: error: ...`
    engine.close()
    engine.close()  # idempotent


def test_engine_actor_that_cannot_be_placed_is_refused(tiny_model_dir, tmp_path, cluster):
    config = _config(tiny_model_dir, tmp_path, ["ray.engine_gpus=1"])  # this cluster has no GPU: never placed
    with pytest.raises(RayBackendError, match="GPU"):
        RayEngine.start(config.ray, host_settings(config), None, None)


def test_verifier_actor_killed_mid_run_is_restarted(tiny_model_dir, tmp_path, cluster):
    config = _config(tiny_model_dir, tmp_path, ["ray.verifier_actors=1", "reward.retries=1"])
    prompts = build_task(config.task).eval_prompts(3)
    completions = [f"The answer is \\boxed{{{p.reference}}}" for p in prompts]
    service = RayRewardService.start(config.ray, config.task, config.reward, {})
    try:
        assert service.score(prompts, completions).rewards.tolist() == [1.0, 1.0, 1.0]
        ray.kill(service.transport._slots[0].actor, no_restart=False)  # as an OOM kill would; Ray restarts it
        scored = service.score(prompts, ["no answer", *completions[1:]])
        # the restarted actor (or the retried sample) still gives every sample its real verdict
        assert [v.outcome for v in scored.verdicts["math"]] == [Outcome.UNPARSEABLE, Outcome.CORRECT, Outcome.CORRECT]
        stats = service.stats()
        assert stats["submitted"] == stats["completed"] == 6 and stats["errors"] == 0
    finally:
        service.close()
    with pytest.raises(RuntimeError, match="closed"):
        service.submit(prompts, completions)


def test_stuck_verifier_gets_a_timeout_verdict_and_a_fresh_actor(tiny_model_dir, tmp_path, cluster):
    # A deadline no Ray call can meet (0.1 ms): every sample is a TIMEOUT, each one kills its actor and Ray
    # restarts it (start-up is not charged to the next sample), and nothing hangs.
    config = _config(tiny_model_dir, tmp_path, ["ray.verifier_actors=1", "reward.deadline_s=0.0001",
                                                "task.verifier_timeout_s=0.00005"])
    prompts = build_task(config.task).eval_prompts(2)
    with RayRewardService.start(config.ray, config.task, config.reward, {}) as service:
        scored = service.score(prompts, [p.reference for p in prompts])
        assert [v.outcome for v in scored.verdicts["math"]] == [Outcome.TIMEOUT, Outcome.TIMEOUT]
        assert scored.rewards.tolist() == [0.0, 0.0]
        stats = service.stats()
        assert stats["timeouts"] == stats["restarts"] == 2 and stats["completed"] == 2
