"""Checkpoints of a multi-rank run (issue #11, item 1): gathered on every rank, written once by rank 0.

DDP: every rank holds the same weights and optimizer state, so rank 0's are the run's. FSDP2: each rank
holds a shard; the full state dicts are gathered (torch.distributed.checkpoint.state_dict, full_state_dict and
cpu_offload: rank 0 receives the whole tensors on CPU, the others nothing) so that final/ and checkpoints keep
the plain Hugging Face layout a single process writes. What differs per rank is the sampling RNG (each rank
samples its own completions), so every rank's RNG state is saved and restored to the same rank.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rlvr.distributed.context import DistContext, DistributedError
from rlvr.distributed.wrap import WrappedPolicy

_PREFIX = "model."  # CompletionScorer holds the Hugging Face model as .model


@dataclass
class FullStateModel:
    """A model to save whose weights are given as a full state dict (FSDP2: gathered from the shards)."""

    model: torch.nn.Module
    state: dict[str, torch.Tensor]

    def save_pretrained(self, directory, **kwargs) -> None:
        self.model.save_pretrained(directory, state_dict=self.state, **kwargs)


@dataclass
class FullStateOptimizer:
    state: dict[str, Any]

    def state_dict(self) -> dict[str, Any]:
        return self.state


def _full_options():
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def savable(wrapped: WrappedPolicy | None, optimizer) -> tuple[FullStateModel | None, Any]:
    """(model or None, optimizer) to hand to save_model / resume.save. None: save the policy itself (one
    process, DDP). FSDP2: the gathered full weights and, when an optimizer is given, its full state. Collective
    under FSDP2: every rank calls it, rank 0 receives the tensors."""
    if wrapped is None or wrapped.strategy != "fsdp2":
        return None, optimizer
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    options = _full_options()
    weights = get_model_state_dict(wrapped.trainer, options=options)
    weights = {k[len(_PREFIX):] if k.startswith(_PREFIX) else k: v for k, v in weights.items()}
    # Tied weights (embeddings = LM head) come back as two copies; keep the name the live model gives the shared
    # parameter (named_parameters lists it once), so final/ is the size a single process writes.
    names = {n for n, _ in wrapped.model.named_parameters()} | {n for n, _ in wrapped.model.named_buffers()}
    weights = {k: v for k, v in weights.items() if k in names}
    if optimizer is not None:
        optimizer = FullStateOptimizer(get_optimizer_state_dict(wrapped.trainer, optimizer, options=options))
    return FullStateModel(wrapped.model, weights), optimizer


def rank_rngs(ctx: DistContext, own: dict[str, Any]) -> dict[str, Any]:
    """The TrainerState.extra entries of a multi-rank checkpoint: every rank's RNG state and the world size."""
    if not ctx.enabled:
        return {}
    return {"world_size": ctx.world_size, "rank_rng": ctx.gather(own)}


def rng_for_rank(extra: dict[str, Any], default: dict[str, Any], ctx: DistContext) -> dict[str, Any]:
    """This rank's RNG state from a checkpoint; refuses a checkpoint written by another number of ranks
    (the prompt shares and the sampling streams would not continue the run)."""
    saved_world = int(extra.get("world_size", 1))
    if saved_world != ctx.world_size:
        raise DistributedError(f"the checkpoint was written by {saved_world} rank(s) and this launch has "
                               f"{ctx.world_size}: resume with the same torchrun --nproc_per_node={saved_world}")
    return extra["rank_rng"][ctx.rank] if ctx.enabled else default
