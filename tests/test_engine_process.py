"""rollout.engine.kind=hf_process: the transformers engine in a child process, weights synced
over gloo. On the tiny random Llama: it samples exactly what the in-process engine samples (same weights, same
seed), a sync makes the post-sync agreement probe pass while a skipped sync is caught, a 3-step run trains to the
same parameters as kind=hf, and a killed child is one clear error, not a hang."""
from __future__ import annotations

import json
import os
import signal

import pytest
import torch
from safetensors.torch import load_file

from rlvr.algorithms.correction import EngineMismatch
from rlvr.cli.main import main
from rlvr.config.run import load_config
from rlvr.errors import UserFacingError
from rlvr.grpo.backends import host_settings
from rlvr.model.load import load_model, load_tokenizer
from rlvr.rollout.agreement import check_after_sync
from rlvr.rollout.base import SamplingParams, SyncedEngine
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.rollout.host import HostSettings
from rlvr.rollout.process import EngineProcessError, ProcessEngine
from rlvr.types import Prompt
from test_train_tiny import tiny_overrides
from test_update import perturbed

torch.set_num_threads(1)  # the engine process runs with threads=1 too: the same kernels on both sides

PROMPTS = [Prompt("p/0", ({"role": "user", "content": "What is 2 + 3?"},), "5"),
           Prompt("p/1", ({"role": "user", "content": "Say hi"},), "hi")]
SAMPLING = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=8, seed=1234)


def _config(model_dir):
    return load_config(None, [f"model.name_or_path={model_dir}", "rollout.engine.kind=hf_process",
                              "rollout.engine.threads=1", "threads=1"])


@pytest.fixture(scope="module")
def pair(tiny_model_dir):
    """(trainer policy, tokenizer, engine process): one child for the module's tests (a spawn takes seconds)."""
    config = _config(tiny_model_dir)
    policy, tokenizer = load_model(config.model), load_tokenizer(config.model)
    engine = ProcessEngine.start(host_settings(config), policy, tokenizer)
    yield policy, tokenizer, engine
    engine.close()
    assert engine.process.exitcode == 0  # it exited on Close, it was not killed


def test_the_engine_process_gets_the_engine_threads_not_the_trainers():
    # backends.py turns the run config into the host's settings; two config fields are named threads
    config = load_config(None, ["threads=2", "rollout.engine.threads=1"])
    assert host_settings(config) == HostSettings(config.model, threads=1)


def test_same_seed_and_weights_sample_what_the_in_process_engine_samples(pair):
    policy, tokenizer, engine = pair
    assert isinstance(engine, SyncedEngine)
    ours = engine.generate(PROMPTS, 3, SAMPLING)
    theirs = HFRolloutEngine(policy, tokenizer).generate(PROMPTS, 3, SAMPLING)
    assert torch.equal(ours.prompt_ids, theirs.prompt_ids) and torch.equal(ours.prompt_mask, theirs.prompt_mask)
    assert torch.equal(ours.completion_ids, theirs.completion_ids)
    assert torch.equal(ours.completion_mask, theirs.completion_mask)
    assert torch.equal(ours.truncated, theirs.truncated) and ours.completions == theirs.completions
    torch.testing.assert_close(ours.sampling_logprobs, theirs.sampling_logprobs, rtol=0, atol=1e-5)
    assert ours.completion_mask.sum() > 6  # sanity: the comparison covered real tokens


def test_episodes_on_the_engine_process_are_the_in_process_episodes(pair):
    """The multi-turn call (continue_tokens) runs in the child, the environment in the trainer."""
    from rlvr.agents.episodes import EpisodeRunner
    from rlvr.agents.protocol import Budgets
    from test_episodes import EchoEnvironment

    policy, tokenizer, engine = pair
    play = lambda e: EpisodeRunner(e, tokenizer, EchoEnvironment(replies=1), Budgets(2, 40, 160)).generate(  # noqa: E731
        PROMPTS, 2, SAMPLING)
    ours, theirs = play(engine), play(HFRolloutEngine(policy, tokenizer))
    assert torch.equal(ours.completion_ids, theirs.completion_ids)
    assert torch.equal(ours.completion_mask, theirs.completion_mask) and ours.completions == theirs.completions
    torch.testing.assert_close(ours.sampling_logprobs, theirs.sampling_logprobs, rtol=0, atol=1e-5)
    assert (ours.turns.turn_of_token == 1).any()  # sanity: a row got its second turn, after an environment turn


def test_a_sync_moves_the_engine_and_the_agreement_probe_passes(pair):
    policy, tokenizer, engine = pair
    rollouts = engine.generate(PROMPTS, 4, SAMPLING)
    changed = perturbed(policy, seed=7, scale=0.2)  # the trainer after a (large) update
    engine.sync_weights(changed, version=5)
    agreement = check_after_sync(engine, changed, rollouts, 1.0, rows=4, threshold=1e-3)
    assert agreement is not None and agreement.rows == 4 and agreement.mismatch_kl < 1e-8  # fp32 noise only
    # the engine now samples what the changed trainer samples, and says which version sampled
    pending = engine.submit(PROMPTS, 2, SAMPLING)
    ours, theirs = pending.result(), HFRolloutEngine(changed, tokenizer).generate(PROMPTS, 2, SAMPLING)
    assert torch.equal(ours.completion_ids, theirs.completion_ids) and pending.version == 5
    engine.sync_weights(policy, version=6)  # back to the fixture's weights for the other tests


def test_a_skipped_sync_is_caught_by_the_agreement_probe(pair, monkeypatch):
    policy, _, engine = pair
    rollouts = engine.generate(PROMPTS, 4, SAMPLING)
    # fault injection: a sync that silently does not apply (the trl#2923 kind of report)
    monkeypatch.setattr(engine, "sync_weights", lambda model, version: None)
    changed = perturbed(policy, seed=8, scale=0.2)
    engine.sync_weights(changed, version=7)
    with pytest.raises(EngineMismatch):
        check_after_sync(engine, changed, rollouts, 1.0, rows=4, threshold=1e-3)


def _final_weights(run) -> dict[str, torch.Tensor]:
    return load_file(run / "final" / "model.safetensors")


def _rewards(run) -> list[float]:
    return [json.loads(line)["reward_mean"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_three_steps_train_to_the_same_parameters_as_the_in_process_engine(tiny_model_dir, tmp_path):
    runs = {}
    for kind in ("hf", "hf_process"):
        runs[kind] = tmp_path / kind
        args = [*tiny_overrides(tiny_model_dir, runs[kind], steps=3), "eval.at_end=false", "threads=1",
                "reward.workers=1", f"rollout.engine.kind={kind}", "rollout.engine.threads=1",
                "algorithm.entropy_coef=0.1"]  # the random model earns no reward: the bonus moves the weights
        assert main(["train", *args]) == 0
    assert _rewards(runs["hf"]) == _rewards(runs["hf_process"])
    a, b = _final_weights(runs["hf"]), _final_weights(runs["hf_process"])
    assert a.keys() == b.keys()
    before = load_file(tiny_model_dir / "model.safetensors")
    assert any(not torch.equal(before[k], b[k]) for k in b)  # the runs did train, and stayed together
    assert max(float((a[k] - b[k]).abs().max()) for k in a) <= 1e-5
    rows = [json.loads(line) for line in (runs["hf_process"] / "metrics.jsonl").read_text().splitlines()]
    assert [r["engine/version"] for r in rows] == [1, 2, 3]  # pushed after every update, then probed
    assert all(r["engine/agreement_kl"] < 1e-8 for r in rows) and all(r["rollout/staleness"] == 0 for r in rows)


def test_a_killed_engine_process_is_one_clear_error_not_a_hang(tiny_model_dir):
    config = _config(tiny_model_dir)
    policy, tokenizer = load_model(config.model), load_tokenizer(config.model)
    engine = ProcessEngine.start(host_settings(config), policy, tokenizer)
    try:
        os.kill(engine.process.pid, signal.SIGKILL)
        with pytest.raises(EngineProcessError, match="was killed by signal 9 while generating rollouts") as err:
            engine.generate(PROMPTS, 2, SAMPLING)
        # noticed by the liveness poll (every POLL_S), not by REPLY_TIMEOUT_S
        assert isinstance(err.value, UserFacingError) and "hf_process" in str(err.value)
    finally:
        engine.close()
    assert not engine.process.is_alive()
