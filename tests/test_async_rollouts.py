"""Asynchronous rollouts, rollout.engine.max_staleness=1, on the tiny random Llama with the
engine in a child process: step n+1 is sampled while step n updates, so from step 2 on every batch is one update
old (logged as rollout/staleness), the rollout correction sees weights != 1, the post-sync probe still holds,
and a SIGTERM with a batch in flight saves a checkpoint that resumes cleanly."""
from __future__ import annotations

import json
import os
import signal

import pytest

from rlvr.cli.main import main
from rlvr.grpo import stages
from test_train_tiny import tiny_overrides

STEPS = 3


def _args(model_dir, out, *extra):
    return [*tiny_overrides(model_dir, out, steps=STEPS), "eval.at_end=false", "threads=1", "reward.workers=1",
            "samples_per_step=8", "rollout.engine.kind=hf_process", "rollout.engine.threads=1",
            "rollout.engine.max_staleness=1", "rollout.correction.mode=tis", "optimizer.lr=1e-2",
            # the random model earns no reward (zero advantages): the entropy bonus is what moves the weights
            "algorithm.entropy_coef=0.1", *extra]


def _rows(run, name="metrics.jsonl"):
    return [json.loads(line) for line in (run / name).read_text().splitlines()]


def _prompts_by_step(run) -> list[tuple[int, str]]:
    return sorted({(r["step"], r["prompt_id"]) for r in _rows(run, "samples.jsonl")})


@pytest.fixture(scope="module")
def async_run(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("async") / "straight"
    assert main(["train", *_args(tiny_model_dir, out)]) == 0
    return out


def test_each_batch_after_the_first_is_one_update_stale(async_run):
    rows = _rows(async_run)
    assert [r["step"] for r in rows] == [1, 2, 3]
    # step 1 is drawn in step 1 (trainer version 0, sampled by 0); step n >= 2 was submitted during step n-1,
    # before its update, so it was sampled by weights n-2 while step n updates weights n-1
    assert [r["rollout/staleness"] for r in rows] == [0, 1, 1]
    # after every update the engine loads the new weights and scores the probe as the trainer does
    assert [r["engine/version"] for r in rows] == [1, 2, 3] and all(r["engine/agreement_kl"] < 1e-8 for r in rows)


def test_the_correction_reweights_the_stale_samples(async_run):
    first, *stale = _rows(async_run)
    # fresh samples: pi_old is the sampler, every TIS weight is exp(0) = 1 up to fp32 noise
    assert abs(first["correction/mean_weight"] - 1.0) < 1e-5 and first["correction/mismatch_kl"] < 1e-8
    for row in stale:  # one update (lr 1e-2, entropy bonus) between sampler and pi_old: the ratios move away from 1
        assert row["correction/mismatch_kl"] > 1e-6
        assert abs(row["correction/mean_weight"] - 1.0) > 1e-5 or abs(row["correction/max_weight"] - 1.0) > 1e-5


def test_sigterm_with_a_batch_in_flight_saves_and_resumes(tiny_model_dir, tmp_path, async_run, monkeypatch):
    out = tmp_path / "stopped"
    prefetch = stages.prefetch_next

    def prefetch_then_stop(feed, draw, step):
        prefetch(feed, draw, step)
        if step == 2:  # step 3's batch is being generated when the stop is requested
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(stages, "prefetch_next", prefetch_then_stop)
    assert main(["train", *_args(tiny_model_dir, out)]) == 0
    assert [r["step"] for r in _rows(out)] == [1, 2] and (out / "checkpoints" / "step-000002").is_dir()
    monkeypatch.setattr(stages, "prefetch_next", prefetch)
    assert main(["train", *_args(tiny_model_dir, out), f"checkpoint.resume={out}"]) == 0
    rows = _rows(out)
    assert [r["step"] for r in rows] == [1, 2, 3] and (out / "final" / "model.safetensors").is_file()
    # the batch in flight was not saved: its prompts counted as not drawn, so the resumed run drew the very same
    # prompts for step 3 (sampled afresh with the checkpoint's weights: staleness 0)
    assert _prompts_by_step(out) == _prompts_by_step(async_run)
    assert rows[2]["rollout/staleness"] == 0 and rows[2]["engine/agreement_kl"] < 1e-8
