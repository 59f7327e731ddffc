"""One optimizer step on a TrainBatch. Algorithm-blind (design.md principle 3): it receives advantages,
masks and log-probs, and minimises the loss its LossSpec names; it knows no reward or group."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlvr.correction import (CorrectionSettings, CorrectionStats, EngineMismatch, check_agreement, correction_stats,
                             importance_weights)
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
    correction: CorrectionSettings | None = None  # rollout correction; None: no weights, no agreement check


@dataclass
class UpdateStats:
    loss: float
    policy_loss: float
    kl: float
    clip_fraction: float
    entropy: float  # mean per-token entropy of the policy on the sampled completions (always logged)
    grad_norm: float
    skipped: float = 0.0  # 1.0 when a non-finite loss or gradient made this step a no-op (issue #9)
    micro_batch_size: float = 0.0  # rows per micro-batch actually used (smaller after an out-of-memory retry)
    correction: CorrectionStats | None = None  # rollout correction's sums over the batch (None when off)


class MicroBatchOutOfMemory(RuntimeError):
    """A micro-batch does not fit in memory even after halving; the message names the setting to lower."""


def _is_cpu_oom(err: RuntimeError) -> bool:
    text = str(err)
    return "DefaultCPUAllocator" in text or "can't allocate memory" in text


def train_step(policy, batch: TrainBatch, optimizer: torch.optim.Optimizer, settings: UpdateSettings,
               scheduler=None) -> UpdateStats:
    """Gradient accumulation over micro-batches with a global normaliser, then one clipped optimizer step.

    The aggregation's denominator is computed once over the whole batch (sequences, tokens or the constant),
    so the accumulated gradient equals the full-batch gradient whatever the micro-batch size. That is what
    makes the out-of-memory retry exact (issue #9): on torch.OutOfMemoryError (CUDA) the partial gradients
    are dropped and the whole step runs again with half the micro-batch, down to 1 row.
    """
    micro = settings.micro_batch_size
    while True:
        try:
            return _accumulate_and_step(policy, batch, optimizer, settings, scheduler, micro)
        except torch.OutOfMemoryError as err:
            optimizer.zero_grad(set_to_none=True)
            if micro == 1:
                raise MicroBatchOutOfMemory("out of memory even with one row per micro-batch: lower "
                                            "rollout.max_new_tokens or use a smaller model") from err
            micro //= 2
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except RuntimeError as err:  # the CPU allocator's failure is a plain RuntimeError; retrying rarely helps
            if not _is_cpu_oom(err):
                raise
            optimizer.zero_grad(set_to_none=True)
            raise MicroBatchOutOfMemory(f"out of memory in a micro-batch of {micro} rows: lower "
                                        f"optimizer.micro_batch_size (now {settings.micro_batch_size}) or "
                                        "rollout.max_new_tokens") from err


def _accumulate_and_step(policy, batch: TrainBatch, optimizer: torch.optim.Optimizer, settings: UpdateSettings,
                         scheduler, micro_batch_size: int) -> UpdateStats:
    spec = settings.loss
    denominator = AGGREGATIONS[spec.aggregation].denominator(batch.completion_mask, settings.max_length)
    totals = dict(loss=0.0, policy_loss=0.0, kl=0.0, clip_fraction=0.0, entropy=0.0)
    mask_total = batch.completion_mask.sum().clamp(min=1).item()
    order = batch.by_length()  # the gradient does not depend on row order; padding does
    correction: CorrectionStats | None = None
    for start in range(0, batch.size, micro_batch_size):
        micro = batch.rows(order[start:start + micro_batch_size])
        logprobs, entropy = completion_logprobs(
            policy, micro.prompt_ids, micro.prompt_mask, micro.prompt_index, micro.completion_ids,
            micro.completion_mask, settings.temperature, with_entropy=True, entropy_grad=spec.entropy_coef > 0)
        # mu = 1: pi_old is the current policy, so the ratio is exp(0) = 1 but its gradient is still grad log pi.
        old = micro.old_logprobs if micro.old_logprobs is not None else logprobs.detach()
        weights, part = _corrected(micro, old, settings.correction)
        correction = part if correction is None else correction + part
        terms = policy_loss(logprobs, old, micro.ref_logprobs, micro.advantages, micro.completion_mask, spec,
                            denominator, entropy if spec.entropy_coef > 0 else None, weights)
        terms.loss.backward()
        totals["loss"] += terms.loss.item()
        totals["policy_loss"] += terms.policy_loss.item()
        totals["kl"] += terms.kl.item()
        totals["clip_fraction"] += terms.clipped_tokens.item() / mask_total
        totals["entropy"] += (entropy.detach() * micro.completion_mask).sum().item() / mask_total
    if correction is not None:  # checked before the step: a disagreeing engine's samples never reach the weights
        try:
            check_agreement(correction.mismatch_kl, settings.correction.max_mismatch_kl)
        except EngineMismatch:
            optimizer.zero_grad(set_to_none=True)
            raise
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
    # A NaN/inf loss or gradient would poison AdamW's moments for good: skip the step, leaving weights,
    # optimizer state (step counts included) and the schedule untouched (issue #9; the loop counts skips).
    finite = math.isfinite(totals["loss"]) and bool(torch.isfinite(grad_norm))
    if finite:
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return UpdateStats(grad_norm=float(grad_norm), skipped=float(not finite), micro_batch_size=micro_batch_size,
                       correction=correction, **totals)


def _corrected(micro: TrainBatch, old: torch.Tensor, settings: CorrectionSettings | None
               ) -> tuple[torch.Tensor | None, CorrectionStats | None]:
    """Rollout correction of one micro-batch: (weights pi_old / mu [B, C] or None, their sums or None).

    At mu = 1, pi_old is the detached current log-probs of this very forward: no extra pass. Mode none still
    measures the engine's agreement, but multiplies by nothing, so its step is exactly the uncorrected one."""
    if settings is None or micro.behaviour_logprobs is None:
        return None, None
    behaviour, mask = micro.behaviour_logprobs, micro.completion_mask
    corrected = importance_weights(old, behaviour, mask, settings.mode, settings.level, settings.cap)
    stats = correction_stats(corrected, old, behaviour, mask)
    return (None if settings.mode == "none" else corrected.weights), stats
