"""The policy under DDP or FSDP2, and what the loop must do around them.

Both strategies act in hooks on the forward and backward of the module they wrap. `completion_logprobs`
(logprobs.py) calls the model's decoder and LM head separately (prefix sharing), which would bypass hooks on
the Hugging Face model, so the wrapped module is `CompletionScorer`: one forward = the whole log-prob
computation of a micro-batch. update.py calls it like `completion_logprobs`.

Gradients: update.py divides every loss by the GLOBAL aggregation denominator (all ranks' rows or tokens), so the
full-batch gradient is the SUM of the ranks' gradients. DDP and FSDP2 average by default; we make them sum: DDP
through a communication hook that all-reduces without dividing, FSDP2 through gradient_divide_factor=1. (The
alternative, multiplying the loss by world_size, would also scale every logged loss.)
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.distributed.context import DistContext, DistributedError
from rlvr.model.logprobs import completion_logprobs

STRATEGIES = ("ddp", "fsdp2")


class CompletionScorer(torch.nn.Module):
    """The causal LM behind one forward that returns (log-probs [B, C], entropy [B, C] or None)."""

    is_completion_scorer = True  # update.py: call this module instead of completion_logprobs(model, ...)

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, temperature: float = 1.0,
                with_entropy: bool = False, entropy_grad: bool = False):
        return completion_logprobs(self.model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask,
                                   temperature, with_entropy, entropy_grad)

    def lm_forward(self, **kwargs):
        """The plain causal-LM call (decode steps, log-prob forwards without gradient); registered with FSDP2
        as a forward method so that the root's hooks run first, as FSDP2 requires."""
        return self.model(**kwargs)


@dataclass
class WrappedPolicy:
    trainer: torch.nn.Module  # what train_step gets: DDP(CompletionScorer) or the FSDP2-sharded CompletionScorer
    model: torch.nn.Module  # the Hugging Face model inside (rollouts, saving); sharded in place under FSDP2
    strategy: str


def _sum_allreduce_hook(state: Any, bucket) -> torch.futures.Future:
    """DDP comm hook: all-reduce SUM without DDP's division by world_size (see the module docstring)."""
    import torch.distributed as dist

    return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda fut: fut.value()[0])


# DDP checks the hook's return annotation, which `from __future__ import annotations` leaves as a string.
_sum_allreduce_hook.__annotations__["return"] = torch.futures.Future[torch.Tensor]


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks: the classes the model names in `_no_split_modules` (transformers marks its
    decoder layers so), the natural FSDP2 unit: one all-gather per block."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise DistributedError(f"distributed.strategy=fsdp2: cannot find the decoder layers of "
                               f"{type(model).__name__} (no _no_split_modules); use distributed.strategy=ddp")
    return layers


def distribute_policy(model: torch.nn.Module, strategy: str, ctx: DistContext) -> WrappedPolicy:
    """DDP: every rank keeps the whole model, gradients all-reduced. FSDP2: each decoder layer, then the root
    (embeddings, final norm, LM head, tied or not), sharded over the ranks (torch.distributed.fsdp.fully_shard).
    The optimizer must be built on `trainer.parameters()` afterwards (FSDP2 replaces them by DTensor shards)."""
    scorer = CompletionScorer(model)
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        # No buffer sync per forward: the only buffers are rotary tables, equal on every rank by construction.
        ddp = DistributedDataParallel(scorer, device_ids=[ctx.local_rank] if ctx.backend == "nccl" else None,
                                      forward_sync_buffers=False)
        ddp.register_comm_hook(None, _sum_allreduce_hook)
        return WrappedPolicy(ddp, model, strategy)
    if strategy != "fsdp2":
        raise DistributedError(f"distributed.strategy={strategy!r}; allowed: {', '.join(STRATEGIES)}")
    from torch.distributed.fsdp import FSDPModule, fully_shard, register_fsdp_forward_method

    for layer in decoder_layers(model):
        fully_shard(layer)
    fully_shard(scorer)
    register_fsdp_forward_method(scorer, "lm_forward")
    for module in scorer.modules():
        if isinstance(module, FSDPModule):  # per FSDP unit: the setting is not recursive
            module.set_gradient_divide_factor(1.0)
            # a plain SUM reduce-scatter: the custom factor would otherwise use PREMUL_SUM, which gloo lacks
            module.set_force_sum_reduction_for_comms(True)
    return WrappedPolicy(scorer, model, strategy)


def fsdp_modules(policy: torch.nn.Module) -> list:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in policy.modules() if isinstance(m, FSDPModule)]


@contextlib.contextmanager
def gathered(wrapped: WrappedPolicy | None):
    """FSDP2: all parameters unsharded for the duration, and no reshard after a forward.

    Decoding runs a different number of forwards on each rank (rows stop at different lengths); a sharded
    forward all-gathers, a collective every rank must join, so ranks would hang. Here each rank gathers once,
    in the same order, and the decode forwards then run no collective. DDP: nothing to do (every rank holds
    the whole model and a forward communicates nothing)."""
    if wrapped is None or wrapped.strategy != "fsdp2":
        yield
        return
    modules = fsdp_modules(wrapped.trainer)
    for module in modules:
        module.unshard()
    for module in modules:
        module.set_reshard_after_forward(False, recurse=False)
    try:
        yield
    finally:
        for module in modules:  # layers reshard after forward again; the root keeps FSDP2's default (not)
            module.set_reshard_after_forward(module is not wrapped.trainer, recurse=False)
            module.reshard()


class ShardedLM:
    """What HFRolloutEngine uses of a model (call, parameters, generation_config), routed through the FSDP2
    root's registered `lm_forward` so the root's hooks run before the layers' (FSDP2 requires the root first)."""

    def __init__(self, wrapped: WrappedPolicy):
        self._wrapped = wrapped

    def __call__(self, **kwargs):
        return self._wrapped.trainer.lm_forward(**kwargs)

    def parameters(self):
        return self._wrapped.model.parameters()

    @property
    def generation_config(self):
        return self._wrapped.model.generation_config

    @property
    def config(self):
        return self._wrapped.model.config

    @property
    def rlvr_compute_dtype(self):
        """The model's compute dtype (rlvr/model/precision.py): a mixed-precision policy decodes under its
        autocast too."""
        return getattr(self._wrapped.model, "rlvr_compute_dtype", None)


class DistributedEngine:
    """The rollout engine of one rank: the in-process HF engine inside `gathered`, so that FSDP2's decode loop
    runs no collective. Sampling differs per rank through the torch RNG seed (see rlvr.distributed.setup)."""

    def __init__(self, engine, wrapped: WrappedPolicy):
        self.engine, self.wrapped = engine, wrapped

    def generate(self, prompts, group_size, sampling):
        with gathered(self.wrapped):
            return self.engine.generate(prompts, group_size, sampling)

    def __getattr__(self, name: str):
        return getattr(self.engine, name)
