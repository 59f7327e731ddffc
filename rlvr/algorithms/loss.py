"""KL estimators, loss aggregation and the composed policy loss: pure tensor functions.

GRPO objective (Shao et al. 2024, DeepSeekMath, eq. 3), minimised here as a loss:
  L = -1/|batch| sum_i 1/|o_i| sum_t [ min(rho_t A_i, clip(rho_t, 1-eps, 1+eps) A_i) - beta * KL_t ]
The family differs in three separable places: the per-token surrogate (objectives.py), the KL estimator, and
how per-token values are averaged into one number (docs/design.md principle 4, "name the normalisation").
Shapes: B sequences, C completion tokens; `mask` [B, C] is 1 on tokens that get a loss (EOS included).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from rlvr.algorithms.objectives import OBJECTIVES, ClipRange

# --- KL estimators of KL(pi_theta || pi_ref), per token (Schulman, "Approximating KL divergence", 2020) -----

def kl_k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """log pi - log pi_ref: unbiased, high variance, can be negative per token."""
    return logprobs - ref_logprobs


def kl_k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """(log pi - log pi_ref)^2 / 2: biased, low variance, >= 0."""
    return 0.5 * (logprobs - ref_logprobs) ** 2


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """exp(d) - d - 1 with d = log pi_ref - log pi: unbiased, >= 0 (DeepSeekMath eq. 4)."""
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


KL_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


# --- Aggregation: per-token values [B, C] -> scalar ---------------------------------------------------------
# Each mode is a per-row numerator and a denominator taken once over the *whole* optimizer batch, so that
# summing micro-batch results gives the full-batch value whatever the micro-batch size (and, later, whatever the
# data-parallel split: the denominator is then all-reduced).

@dataclass(frozen=True)
class Aggregation:
    row_values: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (values [B,C], mask [B,C]) -> [B]
    denominator: Callable[[torch.Tensor, int], float]  # (full-batch mask [B,C], max_length) -> normaliser


def _sequence_means(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.to(values.dtype)
    return (values * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)


def _token_sums(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask.to(values.dtype)).sum(dim=-1)


AGGREGATIONS: dict[str, Aggregation] = {
    # GRPO: mean over each sequence's own tokens, then over sequences. A fully masked row contributes 0 but
    # still counts (the 1/G of the paper is over all samples). Long wrong answers are penalised less per token.
    "sequence_mean": Aggregation(_sequence_means, lambda mask, max_length: float(mask.shape[0])),
    # DAPO (Yu et al. 2025, sec. 3.3): every token of the batch weighs the same.
    "token_mean": Aggregation(_token_sums, lambda mask, max_length: float(max(mask.sum().item(), 1.0))),
    # Dr. GRPO (Liu et al. 2025, sec. 3.1): a constant, batch x generation budget, so no length bias at all.
    "constant": Aggregation(_token_sums, lambda mask, max_length: float(mask.shape[0] * max_length)),
}


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, denominator: float) -> torch.Tensor:
    """Sum of the mode's per-row values divided by the global denominator (AGGREGATIONS[mode].denominator)."""
    return AGGREGATIONS[mode].row_values(values, mask).sum() / denominator


def sequence_mean(values: torch.Tensor, mask: torch.Tensor, num_sequences: int | None = None) -> torch.Tensor:
    """GRPO's aggregation on its own; `num_sequences` is the global count when a batch is micro-batched."""
    return aggregate(values, mask, "sequence_mean", float(num_sequences or values.shape[0]))


# --- The composed loss ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LossSpec:
    """Which family member to optimise; built once from AlgorithmConfig (defaults live in config/run.py)."""

    objective: str
    clip: ClipRange
    aggregation: str
    kl_estimator: str
    beta: float  # KL coefficient in the loss (0 when the KL sits in the reward or there is no reference)
    entropy_coef: float


@dataclass
class LossTerms:
    loss: torch.Tensor  # scalar, the value to minimise
    policy_loss: torch.Tensor  # scalar, aggregated surrogate (detached)
    kl: torch.Tensor  # scalar, aggregated KL estimate (0 when no reference), detached
    entropy: torch.Tensor  # scalar, aggregated entropy (0 when not given), detached
    clipped_tokens: torch.Tensor  # scalar, count of loss tokens where a clip bound was binding
    clipped_high_tokens: torch.Tensor  # scalar, those of them clipped at the upper bound (ratio > 1)
    # scalar, the largest per-token KL estimate among the loss tokens (0 without a reference): tells one rare token
    # (k3 grows like pi_ref / pi where the policy made a token the reference likes rare) from a drift of them all
    kl_max: torch.Tensor


def policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor | None,
                advantages: torch.Tensor, mask: torch.Tensor, spec: LossSpec, denominator: float,
                entropy: torch.Tensor | None = None, weights: torch.Tensor | None = None) -> LossTerms:
    """Loss on one (micro-)batch: aggregate(surrogate) + beta * aggregate(KL) - entropy_coef * aggregate(H).

    `denominator` comes from AGGREGATIONS[spec.aggregation].denominator over the whole optimizer batch.
    `entropy` [B, C] must carry a gradient when spec.entropy_coef > 0. `weights` [B, C], detached, multiply the
    per-token surrogate before aggregation: rollout correction's importance weights pi_old / mu (correction.py).
    """
    surrogate = OBJECTIVES[spec.objective](logprobs, old_logprobs, advantages, mask, spec.clip)
    # The KL and entropy terms stay unweighted: they regularise the current policy at the tokens at hand and are
    # not estimates of the reward's gradient under the sampler, which is what the weights correct. Weighting the
    # KL would also free the tokens that masking drops (weight 0), where engine and trainer disagree most, from
    # the pull towards the reference; PPO's passes mu > 1 likewise take the KL on pi_old's samples unweighted.
    per_token = surrogate.loss if weights is None else surrogate.loss * weights
    policy = aggregate(per_token, mask, spec.aggregation, denominator)
    zero = torch.zeros((), dtype=logprobs.dtype, device=logprobs.device)
    kl = kl_max = zero
    if ref_logprobs is not None and spec.beta > 0:
        # Padding holds ref 0 and an arbitrary log-prob: exp(ref - logp) could overflow there, and inf * 0 is
        # NaN. Where the mask is 0 the estimate is taken at ref = logp, which is exactly 0 with 0 gradient.
        ref = torch.where(mask > 0, ref_logprobs, logprobs.detach())
        per_token_kl = KL_ESTIMATORS[spec.kl_estimator](logprobs, ref)
        kl = aggregate(per_token_kl, mask, spec.aggregation, denominator)
        kl_max = torch.where(mask > 0, per_token_kl.detach(), torch.zeros_like(per_token_kl)).max()
    mean_entropy = zero if entropy is None else aggregate(entropy, mask, spec.aggregation, denominator)
    loss = policy + spec.beta * kl - spec.entropy_coef * mean_entropy
    # A count, not a share: shares of micro-batches with different token counts do not average correctly.
    real = mask > 0
    clipped_tokens, clipped_high = (surrogate.clipped & real).sum(), (surrogate.high & real).sum()
    return LossTerms(loss, policy.detach(), kl.detach(), mean_entropy.detach(), clipped_tokens, clipped_high,
                     kl_max.detach())


def rows_with_gradient(advantages: torch.Tensor, mask: torch.Tensor, spec: LossSpec) -> torch.Tensor:
    """advantages [B] or [B, C], mask [B, C] -> [B] bool: rows whose loss can have a nonzero gradient.

    Every objective's per-token loss is the advantage times a function of the ratio (objectives.py), so without a
    KL term in the loss (beta 0: Dr. GRPO, DAPO; or the KL in the reward) and without an entropy bonus, a row whose
    advantages are exactly 0 on all its loss tokens adds exactly 0 to the gradient: a tied group (the seeds: all
    right or all wrong teaches nothing) or a masked row. The update need not run it. With a KL or entropy term
    every row with a loss token counts. Exact zeros only: a float tie's 1e-13 is a (tiny) gradient and is kept.
    """
    live = mask > 0
    if spec.beta > 0 or spec.entropy_coef != 0:
        return live.any(dim=1)
    per_token = advantages if advantages.dim() == 2 else advantages[:, None].expand_as(mask)
    return ((per_token != 0) & live).any(dim=1)
