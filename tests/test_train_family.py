"""Every preset of the GRPO family runs the whole loop on the tiny model (2 steps, finite numbers, its own
metrics logged); beta = 0 loads no reference; the PPO preset brings a critic."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rlvr.config.run import load_config
from rlvr.grpo.loop import train
from rlvr.grpo.setup import setup

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
PRESETS = sorted(p.stem for p in CONFIGS.glob("*.yaml"))


def tiny(model_dir, out_dir, preset: str, extra=()) -> list[str]:
    scale = ["rollout.prompts_per_step=8"] if preset == "ppo" else ["rollout.group_size=4",
                                                                   "rollout.prompts_per_step=2"]
    return [f"model.name_or_path={model_dir}", f"output_dir={out_dir}", "max_steps=2", "rollout.max_new_tokens=8",
            "optimizer.micro_batch_size=4", "eval.at_end=false", "optimizer.lr=1e-3", "samples_per_step=0",
            *(["reward.overlong_buffer=2"] if preset == "dapo" else []), *scale, *extra]


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_trains_two_steps(preset: str, tiny_model_dir, tmp_path) -> None:
    out = tmp_path / preset
    train(load_config(CONFIGS / f"{preset}.yaml", tiny(tiny_model_dir, out, preset)))
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for r in records:
        for key in ("loss", "policy_loss", "kl", "entropy", "grad_norm", "reward_shaped_mean"):
            assert math.isfinite(r[key]), (key, r[key])
        assert r["entropy"] > 0  # the metric is always logged, whatever the entropy coefficient
    config = load_config(out / "config.yaml")
    if config.rollout.dynamic_sampling.enabled:
        # the random model never answers, so every group ties: the cap is spent and the batch topped up
        assert records[0]["dynamic_sampling/extra_prompts"] == config.rollout.dynamic_sampling.max_extra_prompts
        assert records[0]["dynamic_sampling/topped_up"] == config.rollout.prompts_per_step
    if config.algorithm.kl_placement == "reward":
        assert "kl_in_reward" in records[0] and records[0]["kl"] == 0.0  # none of it in the loss
    if config.algorithm.advantage == "gae":
        assert math.isfinite(records[1]["critic/value_loss"]) and "value_mean" in records[1]
    if config.reward.overlong_buffer:
        # the random tiny model earns no reward and mostly rambles to the 8-token budget: a truncated completion
        # gets the full penalty -1, any other one a penalty in [-1, 0] (DAPO's soft buffer), so with t truncated
        # the shaped mean lies in [-1, -t] (all truncated: exactly -1)
        t, penalty = records[0]["truncated_fraction"], config.reward.overlong_penalty
        assert t > 0.5
        assert -penalty - 1e-6 <= records[0]["reward_shaped_mean"] <= -penalty * t + 1e-6


def test_beta_zero_loads_no_reference_and_gae_loads_a_critic(tiny_model_dir, tmp_path) -> None:
    run = setup(load_config(CONFIGS / "dapo.yaml", tiny(tiny_model_dir, tmp_path / "a", "dapo")), tmp_path / "a")
    assert run.models.reference is None and run.models.critic is None
    run.service.close()
    run = setup(load_config(CONFIGS / "ppo.yaml", tiny(tiny_model_dir, tmp_path / "b", "ppo")), tmp_path / "b")
    assert run.models.reference is not None and run.models.critic is not None
    run.service.close()


def test_curriculum_and_masked_truncation_run_in_the_loop(tiny_model_dir, tmp_path) -> None:
    out = tmp_path / "c"
    extra = ["curriculum.enabled=true", "algorithm.mask_truncated=true", "max_steps=3", "task.level=1"]
    train(load_config(None, tiny(tiny_model_dir, out, "grpo", extra)))
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all("curriculum/skipped_share" in r and math.isfinite(r["loss"]) for r in records)
    assert any(r["truncated_fraction"] > 0 for r in records)  # the mask was exercised
