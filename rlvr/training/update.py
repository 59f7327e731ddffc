"""One optimizer step on a TrainBatch. Algorithm-blind (docs/design.md principle 3): it receives advantages,
masks and log-probs, and minimises the loss its LossSpec names; it knows no reward or group."""
from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rlvr.algorithms.correction import (
    CorrectionSettings,
    CorrectionStats,
    EngineMismatch,
    check_agreement,
    correction_stats,
    importance_weights,
)
from rlvr.algorithms.loss import AGGREGATIONS, LossSpec, policy_loss, rows_with_gradient
from rlvr.errors import UserFacingError
from rlvr.model.logprobs import completion_logprobs
from rlvr.training.guards import is_out_of_memory
from rlvr.types import TrainBatch


class Ranks(Protocol):
    """The data-parallel peers of this process (rlvr.distributed.context.DistContext under torchrun). Kept a
    protocol so this module needs no torch.distributed: in one process every method is the identity."""

    @property
    def enabled(self) -> bool: ...  # more than one rank

    def sum(self, values: list[float]) -> list[float]: ...

    def max(self, values: list[float]) -> list[float]: ...

    def cat_rows(self, rows: torch.Tensor) -> torch.Tensor: ...  # [b, C] per rank -> [B, C'] all ranks' rows

    def micro_batch(self, policy: Any, last: bool) -> contextlib.AbstractContextManager: ...


class OneProcess:
    enabled = False

    def sum(self, values: list[float]) -> list[float]:
        return list(values)

    def max(self, values: list[float]) -> list[float]:
        return list(values)

    def cat_rows(self, rows: torch.Tensor) -> torch.Tensor:
        return rows

    def micro_batch(self, policy: Any, last: bool) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


ONE_PROCESS = OneProcess()


@dataclass(frozen=True)
class UpdateSettings:
    loss: LossSpec
    temperature: float  # rollout temperature: log-probs are taken under the sampling distribution
    micro_batch_size: int
    max_grad_norm: float
    max_length: int  # the generation budget (max_new_tokens): Dr. GRPO's constant normaliser
    correction: CorrectionSettings | None = None  # rollout correction; None: no weights, no agreement check
    ranks: Ranks = ONE_PROCESS  # torchrun: denominators, logged totals and correction sums over all ranks


@dataclass
class UpdateStats:
    loss: float
    policy_loss: float
    kl: float
    clip_fraction: float
    entropy: float  # mean per-token entropy of the policy on the sampled completions (always logged)
    grad_norm: float
    # the clip fraction's two sides: ratio above 1 + eps_high, and below 1 - eps_low
    clip_fraction_high: float = 0.0
    clip_fraction_low: float = 0.0
    kl_max: float = 0.0  # the largest per-token KL estimate of the batch (a spike's one token or many)
    skipped: float = 0.0  # 1.0 when a non-finite loss or gradient made this step a no-op
    micro_batch_size: float = 0.0  # rows per micro-batch actually used (smaller after an out-of-memory retry)
    correction: CorrectionStats | None = None  # rollout correction's sums over the batch (None when off)


class MicroBatchOutOfMemory(UserFacingError, RuntimeError):
    """A micro-batch does not fit in memory even after halving; the message names the setting to lower."""


def train_step(policy, batch: TrainBatch, optimizer: torch.optim.Optimizer, settings: UpdateSettings,
               scheduler=None) -> UpdateStats:
    """Gradient accumulation over micro-batches with a global normaliser, then one clipped optimizer step.

    The aggregation's denominator is computed once over the whole batch (sequences, tokens or the constant),
    so the accumulated gradient equals the full-batch gradient whatever the micro-batch size. That is what
    makes the out-of-memory retry exact: on torch.OutOfMemoryError (CUDA) the partial gradients
    are dropped and the whole step runs again with half the micro-batch, down to 1 row.
    """
    micro = settings.micro_batch_size
    while True:
        try:
            return _accumulate_and_step(policy, batch, optimizer, settings, scheduler, micro)
        except torch.OutOfMemoryError as err:
            optimizer.zero_grad(set_to_none=True)
            if settings.ranks.enabled:  # the other ranks sit in this step's gradient collective: a retry with
                # another micro-batch count would never meet theirs (a hang), so stop; torchrun ends the others
                raise MicroBatchOutOfMemory(f"out of memory in a micro-batch of {micro} rows on one of several "
                                            f"ranks: lower optimizer.micro_batch_size (now "
                                            f"{settings.micro_batch_size}) or rollout.max_new_tokens") from err
            if micro == 1:
                raise MicroBatchOutOfMemory("out of memory even with one row per micro-batch: lower "
                                            "rollout.max_new_tokens or use a smaller model") from err
            micro //= 2
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except RuntimeError as err:  # the CPU allocator's failure is a plain RuntimeError; retrying rarely helps
            if not is_out_of_memory(err):
                raise
            optimizer.zero_grad(set_to_none=True)
            raise MicroBatchOutOfMemory(f"out of memory in a micro-batch of {micro} rows: lower "
                                        f"optimizer.micro_batch_size (now {settings.micro_batch_size}) or "
                                        "rollout.max_new_tokens") from err


def _accumulate_and_step(policy, batch: TrainBatch, optimizer: torch.optim.Optimizer, settings: UpdateSettings,
                         scheduler, micro_batch_size: int) -> UpdateStats:
    spec, ranks = settings.loss, settings.ranks
    # Under torchrun the denominator is the GLOBAL batch's, taken on every rank's mask: each rank's
    # loss is then its share of the full-batch loss, and the full-batch gradient is the SUM of the ranks'
    # gradients (rlvr/distributed/wrap.py makes DDP and FSDP2 sum instead of average).
    everyone = ranks.cat_rows(batch.completion_mask)
    denominator = AGGREGATIONS[spec.aggregation].denominator(everyone, settings.max_length)
    order = _rows_to_run(batch, spec, ranks)  # the gradient does not depend on row order; padding does
    # the logged means (entropy, clip fractions) are over the tokens the update ran (or the probe's, below)
    mask_total = (everyone if ranks.enabled else batch.completion_mask[order]).sum().item()
    totals = dict(loss=0.0, policy_loss=0.0, kl=0.0, clip_fraction=0.0, clip_fraction_high=0.0,
                  entropy=0.0 if mask_total else math.nan)
    forward = _forward(policy)
    correction: CorrectionStats | None = None
    kl_max = 0.0
    for start in range(0, len(order), micro_batch_size):
        micro = batch.rows(order[start:start + micro_batch_size])
        with ranks.micro_batch(policy, last=start + micro_batch_size >= len(order)):  # one gradient sync per step
            values, part = _micro_step(forward, micro, settings, denominator, max(mask_total, 1))
        correction = part if correction is None else correction + part
        kl_max = max(kl_max, values.pop("kl_max"))
        totals = {k: totals[k] + values[k] for k in totals}
    if not len(order):  # nothing had a gradient: the step is the one zero gradients make (AdamW's moments and
        _zero_gradients(policy)  # step count move on, as they would after a backward of exact zeros)
        if batch.size:
            totals["entropy"] = _probe_entropy(forward, batch, settings.temperature, micro_batch_size)
    totals = dict(zip(totals, ranks.sum(list(totals.values()))))  # each rank's is a share of the global value
    totals["kl_max"] = ranks.max([kl_max])[0]
    if correction is not None:  # checked before the step: a disagreeing engine's samples never reach the weights
        correction = _all_ranks(correction, ranks)
        try:
            check_agreement(correction.mismatch_kl, settings.correction.max_mismatch_kl)
        except EngineMismatch:
            optimizer.zero_grad(set_to_none=True)
            raise
    grad_norm = clip_gradients(policy, settings.max_grad_norm)
    # A NaN/inf loss or gradient would poison AdamW's moments for good: skip the step, leaving weights,
    # optimizer state (step counts included) and the schedule untouched (the loop counts skips).
    finite = math.isfinite(totals["loss"]) and bool(torch.isfinite(grad_norm))
    if finite:
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    low = totals["clip_fraction"] - totals["clip_fraction_high"]
    return UpdateStats(grad_norm=float(grad_norm), skipped=float(not finite), micro_batch_size=micro_batch_size,
                       correction=correction, clip_fraction_low=max(low, 0.0), **totals)


def _rows_to_run(batch: TrainBatch, spec, ranks: Ranks) -> torch.Tensor:
    """Row order for the micro-batches, without the rows whose gradient is exactly zero (loss.rows_with_gradient:
    tied groups when the loss has no KL or entropy term; on the calculator's first steps, 3 of 4 groups or all).
    Under torchrun every rank runs all its rows: DDP and FSDP2 need the same number of backward passes on each."""
    order = batch.by_length()
    if ranks.enabled:
        return order
    return order[rows_with_gradient(batch.advantages, batch.completion_mask, spec)[order]]


def _probe_entropy(forward, batch: TrainBatch, temperature: float, rows: int) -> float:
    """The entropy metric of a step that ran no row, from one gradient-free forward of the first micro-batch: the
    collapse diagnostics read it exactly when every group ties (rlvr/metrics/diagnostics.py). Without a loss token
    there (every completion masked) it is NaN, no reading, as the update's own mean over no token: a 0 would read as
    collapsed entropy."""
    micro = batch.rows(batch.by_length()[:rows])
    with torch.no_grad():
        _, entropy = forward(micro.prompt_ids, micro.prompt_mask, micro.prompt_index, micro.completion_ids,
                             micro.completion_mask, temperature, with_entropy=True)
    mask = micro.completion_mask
    return float((entropy * mask).sum() / mask.sum())  # 0 / 0 = NaN without a token


def _zero_gradients(policy) -> None:
    for parameter in policy.parameters():
        if parameter.requires_grad:
            parameter.grad = torch.zeros_like(parameter)


def clip_gradients(policy, max_norm: float) -> torch.Tensor:
    """clip_grad_norm_ without its pass over every gradient when nothing is clipped: it multiplies them all by
    min(1, max_norm / norm) even when that is 1 (~30 ms a step for a 135M model on this CPU). Same result."""
    parameters = [p for p in policy.parameters() if p.grad is not None]
    norm = torch.nn.utils.get_total_norm([p.grad for p in parameters])
    full = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # FSDP2: a norm of DTensor shards
    if not bool(full <= max_norm):  # NaN included: the step is then skipped, as with clip_grad_norm_
        torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
    return full


def _forward(policy):
    """The log-prob forward: a policy wrapped for torchrun (rlvr.distributed.wrap.CompletionScorer under DDP or
    FSDP2, whose hooks must see the whole computation as one forward) is called itself; a plain model goes
    through completion_logprobs."""
    if getattr(getattr(policy, "module", policy), "is_completion_scorer", False):
        return policy
    return functools.partial(completion_logprobs, policy)


def _micro_step(forward, micro: TrainBatch, settings: UpdateSettings, denominator: float, mask_total: float
                ) -> tuple[dict[str, float], CorrectionStats | None]:
    """Forward and backward of one micro-batch; its shares of the logged totals and its correction sums."""
    spec = settings.loss
    logprobs, entropy = forward(micro.prompt_ids, micro.prompt_mask, micro.prompt_index, micro.completion_ids,
                                micro.completion_mask, settings.temperature, with_entropy=True,
                                entropy_grad=spec.entropy_coef > 0)
    # mu = 1: pi_old is the current policy, so the ratio is exp(0) = 1 but its gradient is still grad log pi.
    old = micro.old_logprobs if micro.old_logprobs is not None else logprobs.detach()
    weights, part = _corrected(micro, old, settings.correction)
    terms = policy_loss(logprobs, old, micro.ref_logprobs, micro.advantages, micro.completion_mask, spec,
                        denominator, entropy if spec.entropy_coef > 0 else None, weights)
    terms.loss.backward()
    return {"loss": terms.loss.item(), "policy_loss": terms.policy_loss.item(), "kl": terms.kl.item(),
            "kl_max": terms.kl_max.item(),
            "clip_fraction": terms.clipped_tokens.item() / mask_total,
            "clip_fraction_high": terms.clipped_high_tokens.item() / mask_total,
            "entropy": (entropy.detach() * micro.completion_mask).sum().item() / mask_total}, part


def _all_ranks(stats: CorrectionStats, ranks: Ranks) -> CorrectionStats:
    """The correction's sums over every rank's tokens (the agreement check then decides the same everywhere)."""
    tokens, weight_sum, masked, kl_sum = ranks.sum([stats.tokens, stats.weight_sum, stats.masked, stats.kl_sum])
    return CorrectionStats(tokens, weight_sum, ranks.max([stats.weight_max])[0], masked, kl_sum)


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
