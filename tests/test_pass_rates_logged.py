"""groups.jsonl's pass_rates on a real (tiny, random) training step: every group the step drew, the tied groups
dynamic sampling set aside included, so that the explainer's difficulty view sees the prompts a policy always or
never solves (rlvr/grpo/stages.py draw_batch, rlvr/grpo/group_view.py pass_rates)."""
from __future__ import annotations

import json

from rlvr.cli.main import main


def train(model_dir, out, *extra) -> tuple[dict, dict]:
    main(["train", f"model.name_or_path={model_dir}", "model.device=cpu", f"output_dir={out}", "max_steps=1",
          "rollout.group_size=4", "rollout.prompts_per_step=2", "rollout.max_new_tokens=4",
          "optimizer.micro_batch_size=4", "reward.workers=0", "threads=1", "eval.at_end=false",
          "checkpoint.save_final=none", *extra])
    line = json.loads((out / "groups.jsonl").read_text().splitlines()[0])
    metrics = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    return line, metrics


def test_pass_rates_hold_the_groups_dynamic_sampling_set_aside(tiny_model_dir, tmp_path):
    # a random tiny model answers nothing right: every group ties at 0, so dynamic sampling draws its 2 extra
    # prompts, finds no informative group and tops the batch up; all 4 groups drawn are logged, the batch holds 2
    line, metrics = train(tiny_model_dir, tmp_path / "dynamic", "rollout.dynamic_sampling.enabled=true",
                          "rollout.dynamic_sampling.max_extra_prompts=2")
    assert metrics["dynamic_sampling/extra_prompts"] == 2
    assert [rate for _, rate in line["pass_rates"]] == [0.0] * 4
    assert len({prompt for prompt, _ in line["pass_rates"]}) == 4  # four different prompts, not one logged twice
    # without dynamic sampling: the batch's own groups, one rate each
    line, _ = train(tiny_model_dir, tmp_path / "plain", "rollout.dynamic_sampling.enabled=false")
    assert [rate for _, rate in line["pass_rates"]] == [0.0] * 2
