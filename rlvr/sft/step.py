"""One SFT optimizer step: negative log-likelihood of the assistant tokens, accumulated over micro-batches.

Loss = sum over the step's assistant tokens of -log p(token | tokens before it), divided by the number of
assistant tokens in the whole step (a global normaliser). Each micro-batch's backward adds its share, so the
accumulated gradient equals the gradient of the full batch whatever optimizer.micro_batch_size is (the same
rule as the RL update, rlvr/training/update.py). A mean per micro-batch would weigh the tokens of a short micro-batch
more than those of a long one and make the step depend on how the rows were cut.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from rlvr.errors import UserFacingError
from rlvr.model.logprobs import completion_logprobs
from rlvr.model.precision import in_compute_dtype
from rlvr.sft.batching import MicroBatch, SplitBatch, micro_batches
from rlvr.sft.masking import Example
from rlvr.training.guards import is_out_of_memory

HEAD_CHUNK = 1024  # target tokens per LM-head pass: [1024, 49k] fp32 logits = 0.2 GB


class SFTOutOfMemory(UserFacingError, RuntimeError):
    """A micro-batch does not fit in memory; the message names the setting to lower."""


@dataclass(frozen=True)
class StepSettings:
    micro_batch_size: int
    batching: str  # a key of rlvr.sft.batching.LAYOUTS
    max_grad_norm: float
    pad_id: int


@dataclass
class StepStats:
    loss: float  # mean NLL per assistant token of the step
    grad_norm: float
    tokens: int  # assistant (trained) tokens
    input_tokens: int  # all real tokens run through the model (prompts included, padding not)
    rows: int
    skipped: float  # 1.0 when a non-finite loss or gradient made the step a no-op


def _head_nll(head, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """states [N, H], targets [N] -> summed -log p(target) (a scalar)."""
    return F.cross_entropy(head(states).float(), targets, reduction="sum")


@in_compute_dtype  # under torch.autocast for a mixed-precision policy (rlvr/model/precision.py)
def target_nll(policy, micro: MicroBatch) -> torch.Tensor:
    """Summed -log p of the micro-batch's target tokens (a scalar). Only target positions go through the LM
    head, as in rlvr/model/logprobs.py, and in chunks of HEAD_CHUNK whose logits are recomputed in the backward pass
    instead of kept: 16 long-CoT rows of 1024 tokens would otherwise hold [16k, 49k] fp32 logits (3 GB) and
    as much again for their gradient."""
    out = policy.base_model(input_ids=micro.input_ids, attention_mask=micro.attention_mask,
                            position_ids=micro.position_ids, use_cache=False)
    wanted = micro.target_mask[:, 1:]  # [B, T-1]: token t + 1 is predicted from the state of token t
    states = out.last_hidden_state[:, :-1][wanted]  # [N, H]
    targets = micro.input_ids[:, 1:][wanted]  # [N]
    head = policy.get_output_embeddings()
    if states.shape[0] <= HEAD_CHUNK:
        return _head_nll(head, states, targets)
    parts = [checkpoint(_head_nll, head, s, t, use_reentrant=False)
             for s, t in zip(states.split(HEAD_CHUNK), targets.split(HEAD_CHUNK))]
    return torch.stack(parts).sum()


def split_nll(policy, micro: SplitBatch) -> torch.Tensor:
    """Summed -log p of a SplitBatch's trained tokens (a scalar), through the RL update's packed forward: each row
    its own prompt, the prompts' common opening run once (rlvr/model/logprobs.py; its log-probs are 0 off the mask)."""
    rows = torch.arange(micro.rows, device=micro.prompt_ids.device)
    logprobs, _ = completion_logprobs(policy, micro.prompt_ids, micro.prompt_mask, rows, micro.completion_ids,
                                      micro.completion_mask)
    return -logprobs.sum()


def micro_nll(policy, micro: MicroBatch | SplitBatch) -> torch.Tensor:
    return split_nll(policy, micro) if isinstance(micro, SplitBatch) else target_nll(policy, micro)


def sft_step(policy, examples: list[Example], optimizer: torch.optim.Optimizer, scheduler,
             settings: StepSettings) -> StepStats:
    """Accumulate the step's gradient over micro-batches, clip, step. A non-finite loss or gradient leaves
    weights, optimizer state and schedule untouched (as rlvr/training/update.py; the trainer counts such steps)."""
    device = next(policy.parameters()).device
    total = sum(e.targets for e in examples)  # the global normaliser
    loss, input_tokens = 0.0, 0
    for micro in micro_batches(examples, settings.micro_batch_size, settings.batching, settings.pad_id):
        micro = micro.to(device)
        try:
            part = micro_nll(policy, micro) / total
            part.backward()
        except RuntimeError as err:  # torch.OutOfMemoryError is one too
            if not is_out_of_memory(err):
                raise
            optimizer.zero_grad(set_to_none=True)
            raise SFTOutOfMemory(f"out of memory in a micro-batch of {micro.rows} rows x {micro.tokens} tokens: "
                                 f"lower optimizer.micro_batch_size (now {settings.micro_batch_size}) or "
                                 "sft.max_length") from err
        loss += part.item()
        input_tokens += micro.tokens
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
    finite = math.isfinite(loss) and bool(torch.isfinite(grad_norm))
    if finite:
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return StepStats(loss, float(grad_norm), total, input_tokens, len(examples), float(not finite))

