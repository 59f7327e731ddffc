"""What a multi-rank GRPO run supports today, checked once before anything loads.

Each refusal is a feature whose state or statistics would be rank-local and so silently differ from the
single-process run: a pass-rate curriculum or dynamic sampling decide which prompts come next from the rewards
they observed (each rank sees only its share), batch-level advantage normalisation needs the whole batch's
statistics, and the critic and LoRA have no multi-rank path yet.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from rlvr.distributed.context import DistContext, DistributedError

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig

# Advantage estimators that normalise over the whole batch rather than within each prompt's group.
BATCH_LEVEL_ADVANTAGES = ("grpo_batch_std", "reinforce_pp", "reinforce_pp_baseline", "gae")
# Sampling seeds: rank r draws from seed + r * _RANK_STRIDE. Equal seeds on two ranks would sample the same text
# for the same prompt; the stride keeps a run's ranks apart from the nearby seeds of other runs.
_RANK_STRIDE = 1_000_003


def problems(config: "RunConfig", ctx: DistContext) -> list[str]:
    if not ctx.enabled:
        return []
    n, d = ctx.world_size, config.distributed
    out = []
    if config.rollout.prompts_per_step % n:
        out.append(f"rollout.prompts_per_step={config.rollout.prompts_per_step} must be divisible by the number "
                   f"of ranks ({n}): each rank rolls out an equal share of whole groups")
    if config.curriculum.enabled or config.rollout.dynamic_sampling.enabled is True:  # "auto" is off on ranks
        out.append(f"curriculum.enabled / rollout.dynamic_sampling.enabled are not supported with {n} ranks yet "
                   "(they choose prompts from rank-local rewards); run them in one process")
    if config.algorithm.advantage in BATCH_LEVEL_ADVANTAGES:
        out.append(f"algorithm.advantage={config.algorithm.advantage} normalises over the whole batch or needs the "
                   f"critic: not supported with {n} ranks yet; use grpo, dr_grpo or rloo")
    if config.model.lora.enabled:
        out.append(f"model.lora is not supported with {n} ranks yet; run LoRA in one process")
    # Ray trainer ranks (ray.trainer_ranks=N, rlvr/cluster/trainers.py) sample in-process like torchrun's ranks;
    # only the Ray engine/verifier actors of a trainer_ranks=1 run are refused here
    if config.rollout.engine.kind != "hf" or (config.ray.enabled and config.ray.trainer_ranks == 1):
        out.append(f"rollout.engine.kind={config.rollout.engine.kind} / ray.enabled with ray.trainer_ranks=1: with "
                   f"{n} torchrun ranks each rank samples with the in-process engine (rollout.engine.kind=hf) for now")
    if config.model.device.startswith("cuda") and d.backend == "gloo":
        out.append("distributed.backend=gloo with model.device=cuda: use backend nccl (or auto) on GPUs")
    return out


def check_supported(config: "RunConfig", ctx: DistContext) -> None:
    found = problems(config, ctx)
    if found:
        raise DistributedError("; ".join(found))


def seed_rank(seed: int, ctx: DistContext) -> None:
    """Seed this rank's torch RNG (the HF engine samples with torch.multinomial): rank 0 keeps the run's seed."""
    torch.manual_seed(seed + ctx.rank * _RANK_STRIDE)
