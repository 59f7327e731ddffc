"""Checkpoints of a multi-rank run: gathered on every rank, written once by rank 0.

DDP: every rank holds the same weights and optimizer state, so rank 0's are the run's. FSDP2: each rank
holds a shard; the full state dicts are gathered (torch.distributed.checkpoint.state_dict, full_state_dict and
cpu_offload: rank 0 receives the whole tensors on CPU, the others nothing) so that final/ and checkpoints keep
the plain Hugging Face layout a single process writes. What differs per rank is the sampling RNG (each rank
samples its own completions), so every rank's RNG state is saved and restored to the same rank.

Resume (FSDP2, same world size): every rank reads the full weights and full optimizer state and keeps only its
shard of each (set_model_state_dict / set_optimizer_state_dict with full_state_dict), under the names `savable`
wrote them with.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
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


def is_sharded(policy: torch.nn.Module) -> bool:
    """Whether FSDP2 sharded this policy in place (its decoder layers are FSDP units): the plain load_state_dict
    of a single process or DDP cannot load into DTensor shards."""
    if not isinstance(policy, torch.nn.Module) or not torch.distributed.is_available():
        return False  # LoRA's LoraPolicy (never sharded: refused under torchrun); a torch without distributed
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(module, FSDPModule) for module in policy.modules())


def check_strategy(optimizer_state: dict[str, Any], sharded: bool) -> None:
    """An FSDP2 checkpoint names the optimizer's parameters, a single-process or DDP one numbers them: each loads
    only into a run of its kind (a resume_force across strategies would otherwise fail deep inside torch)."""
    by_name = any(isinstance(p, str) for group in optimizer_state.get("param_groups", []) for p in group["params"])
    if by_name != sharded:
        written, now = ("fsdp2", "ddp or one process") if by_name else ("ddp or one process", "fsdp2")
        raise DistributedError(f"the checkpoint was written by a distributed.strategy={written} run and this launch "
                               f"is {now}: resume with the strategy the run was started with")


def load_into_shards(policy: torch.nn.Module, optimizer: torch.optim.Optimizer, model_dir: Path,
                     optimizer_state: dict[str, Any]) -> None:
    """Resume FSDP2: the checkpoint's full weights (model_dir safetensors, the Hugging Face names) and the full
    optimizer state (`savable`'s, keyed by the wrapper's "model."-prefixed names) into this rank's shards.
    Collective: every rank calls it with the same files. `policy` is the Hugging Face model inside the wrapper;
    its parameters are the very DTensors the optimizer steps, so the names below the prefix are the same."""
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_optimizer_state_dict

    weights: dict[str, torch.Tensor] = {}
    for shard in sorted(model_dir.glob("*.safetensors")):
        weights.update(load_file(shard))
    weights = _with_tied_names(weights, policy)
    expected = set(policy.state_dict())
    if set(weights) != expected:
        missing, unexpected = sorted(expected - set(weights))[:5], sorted(set(weights) - expected)[:5]
        raise DistributedError(f"checkpoint weights in {model_dir} do not fit the model: missing {missing}, "
                               f"unexpected {unexpected}")
    # full_state_dict: each rank slices its own shard out of the full tensor, no communication. (With
    # broadcast_from_rank0 only rank 0 would read the files; every rank reading them is what DDP resume does.)
    options = StateDictOptions(full_state_dict=True)
    set_model_state_dict(policy, weights, options=options)
    set_optimizer_state_dict(policy, optimizer, _unprefixed(optimizer_state), options=options)


def _with_tied_names(weights: dict[str, torch.Tensor], policy: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The checkpoint lists a tied parameter (embeddings = LM head) once; the model's state dict names it under
    every alias, so the saved tensor is given to each of its names."""
    aliases: dict[int, list[str]] = {}
    for name, param in policy.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(param), []).append(name)
    out = dict(weights)
    for names in aliases.values():
        saved = [n for n in names if n in weights]
        for name in names:
            if saved and name not in out:
                out[name] = weights[saved[0]]
    return out


def _unprefixed(optimizer_state: dict[str, Any]) -> dict[str, Any]:
    """`savable` gathered the optimizer state on the wrapper (names "model.<HF name>"); load_into_shards loads it
    through the Hugging Face model inside, whose names lack the prefix."""
    def strip(name: str) -> str:
        return name[len(_PREFIX):] if name.startswith(_PREFIX) else name

    groups = [{**group, "params": [strip(n) for n in group["params"]]} for group in optimizer_state["param_groups"]]
    return {"state": {strip(k): v for k, v in optimizer_state["state"].items()}, "param_groups": groups}


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
