"""One optimizer step on a TrainBatch. Algorithm-blind (design.md principle 3): it receives advantages,
masks and log-probs, and minimises the loss its LossSpec names; it knows no reward or group."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlvr.logprobs import completion_logprobs
from rlvr.loss import AGGREGATIONS, LossSpec, policy_loss
from rlvr.types import TrainBatch


@dataclass(frozen=True)
class UpdateSettings:
    loss: LossSpec
    temperature: float  # rollout temperature: log-probs are taken under the sampling distribution
    micro_batch_size: int
    max_grad_norm: float
    max_length: int  # the generation budget (max_new_tokens): Dr. GRPO's constant normaliser


@dataclass
class UpdateStats:
    loss: float
    policy_loss: float
    kl: float
    clip_fraction: float
    entropy: float  # mean per-token entropy of the policy on the sampled completions (always logged)
    grad_norm: float
    skipped: float = 0.0  # 1.0 when a non-finite loss or gradient made this step a no-op (issue #9)


def train_step(policy, batch: TrainBatch, optimizer: torch.optim.Optimizer, settings: UpdateSettings,
               scheduler=None) -> UpdateStats:
    """Gradient accumulation over micro-batches with a global normaliser, then one clipped optimizer step.

    The aggregation's denominator is computed once over the whole batch (sequences, tokens or the constant),
    so the accumulated gradient equals the full-batch gradient whatever the micro-batch size.
    """
    spec = settings.loss
    denominator = AGGREGATIONS[spec.aggregation].denominator(batch.completion_mask, settings.max_length)
    totals = dict(loss=0.0, policy_loss=0.0, kl=0.0, clip_fraction=0.0, entropy=0.0)
    mask_total = batch.completion_mask.sum().clamp(min=1).item()
    order = batch.by_length()  # the gradient does not depend on row order; padding does
    for start in range(0, batch.size, settings.micro_batch_size):
        micro = batch.rows(order[start:start + settings.micro_batch_size])
        logprobs, entropy = completion_logprobs(
            policy, micro.prompt_ids, micro.prompt_mask, micro.prompt_index, micro.completion_ids,
            micro.completion_mask, settings.temperature, with_entropy=True, entropy_grad=spec.entropy_coef > 0)
        # mu = 1: pi_old is the current policy, so the ratio is exp(0) = 1 but its gradient is still grad log pi.
        old = micro.old_logprobs if micro.old_logprobs is not None else logprobs.detach()
        terms = policy_loss(logprobs, old, micro.ref_logprobs, micro.advantages, micro.completion_mask, spec,
                            denominator, entropy if spec.entropy_coef > 0 else None)
        terms.loss.backward()
        totals["loss"] += terms.loss.item()
        totals["policy_loss"] += terms.policy_loss.item()
        totals["kl"] += terms.kl.item()
        totals["clip_fraction"] += terms.clipped_tokens.item() / mask_total
        totals["entropy"] += (entropy.detach() * micro.completion_mask).sum().item() / mask_total
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
    # A NaN/inf loss or gradient would poison AdamW's moments for good: skip the step, leaving weights,
    # optimizer state (step counts included) and the schedule untouched (issue #9; the loop counts skips).
    finite = math.isfinite(totals["loss"]) and bool(torch.isfinite(grad_norm))
    if finite:
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return UpdateStats(grad_norm=float(grad_norm), skipped=float(not finite), **totals)
