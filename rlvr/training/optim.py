"""The optimizer every trainer builds (GRPO and SFT built it twice): AdamW and a linear warm-up."""
from __future__ import annotations

from typing import Iterable

import torch

from rlvr.config.run import OptimizerConfig


def build_optimizer(params: Iterable[torch.nn.Parameter], settings: OptimizerConfig, distributed: bool
                    ) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over `params` (the caller picks them: LoRA trains only the adapters), with a linear learning-rate
    warm-up over settings.warmup_steps, then constant. `distributed`: the parameters are wrapped for torchrun."""
    # fused: one kernel over all tensors (measured on SmolLM2-135M, CPU: 90 ms a step instead of 230 for foreach);
    # the sharded DTensors of FSDP2 keep the default implementation
    optimizer = torch.optim.AdamW(params, lr=settings.lr, betas=settings.betas, weight_decay=settings.weight_decay,
                                  fused=None if distributed else True)
    warmup = max(settings.warmup_steps, 1)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
