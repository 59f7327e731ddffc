"""The one optimizer builder of GRPO and SFT (rlvr/training/optim.py) and the one seeding (rlvr/seeding.py)."""
from __future__ import annotations

import random

import pytest
import torch

from rlvr.config.run import OptimizerConfig
from rlvr.seeding import seed_everything
from rlvr.training.optim import build_optimizer


@pytest.mark.parametrize("distributed, fused", [(False, True), (True, None)])
def test_adamw_is_fused_in_one_process_and_default_for_wrapped_parameters(distributed, fused):
    settings = OptimizerConfig(lr=0.1, betas=(0.8, 0.9), weight_decay=0.01, warmup_steps=4)
    optimizer, _ = build_optimizer([torch.nn.Parameter(torch.zeros(3))], settings, distributed=distributed)
    group = optimizer.param_groups[0]
    assert group["fused"] is fused
    assert (group["betas"], group["weight_decay"]) == ((0.8, 0.9), 0.01)


@pytest.mark.parametrize("warmup_steps, factors", [(4, [0.25, 0.5, 0.75, 1.0, 1.0]), (0, [1.0, 1.0])])
def test_learning_rate_warms_up_linearly_then_stays(warmup_steps, factors):
    settings = OptimizerConfig(lr=0.1, warmup_steps=warmup_steps)
    optimizer, scheduler = build_optimizer([torch.nn.Parameter(torch.zeros(3))], settings, distributed=False)
    seen = []
    for _ in factors:
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([0.1 * f for f in factors])


def test_seed_everything_seeds_torch_and_python_unless_told_not_to():
    seed_everything(7)
    first = (random.random(), torch.rand(2).tolist())
    random.random(), torch.rand(2)  # move both streams on
    seed_everything(7)
    assert (random.random(), torch.rand(2).tolist()) == first
    state = random.getstate()
    seed_everything(7, python=False)  # evaluation: python's stream is the caller's
    assert random.getstate() == state and torch.rand(2).tolist() == first[1]
