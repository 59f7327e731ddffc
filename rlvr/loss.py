"""Per-token policy objective, KL estimator and loss aggregation: pure tensor functions.

GRPO objective (Shao et al. 2024, DeepSeekMath, eq. 3), minimised here as a loss:
  L = -1/|batch| sum_i 1/|o_i| sum_t [ min(rho_t A_i, clip(rho_t, 1-eps, 1+eps) A_i) - beta * KL_t ]
with rho_t = pi_theta(o_t) / pi_old(o_t) and KL_t the k3 estimator against the frozen reference.
Shapes: B sequences, C completion tokens; `mask` [B, C] is 1 on generated tokens (EOS included).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi_theta || pi_ref) per token: exp(d) - d - 1 with d = ref - logp.

    Unbiased, always >= 0 (DeepSeekMath eq. 4).
    """
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


def ppo_clip(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
             clip_epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip loss -min(rho*A, clip(rho)*A) [B, C], and [B, C] bool where the clip was binding.

    `advantages` is [B] (one per sequence, broadcast over tokens) or [B, C].
    """
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon) * adv
    # The clip binds (and the gradient vanishes) where the clipped term is the smaller one.
    return -torch.minimum(unclipped, clipped), clipped < unclipped


def sequence_mean(values: torch.Tensor, mask: torch.Tensor, num_sequences: int | None = None) -> torch.Tensor:
    """GRPO aggregation: mean over each sequence's own tokens, then mean over sequences.

    `num_sequences` is the global count when a batch is split into micro-batches: summing the
    micro-batch results then equals the full-batch value. A fully masked row contributes 0 but
    still counts as a sequence (the 1/G of the paper is over all samples).
    """
    mask = mask.to(values.dtype)
    per_sequence = (values * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)
    return per_sequence.sum() / (num_sequences if num_sequences is not None else values.shape[0])


AGGREGATIONS = {"sequence_mean": sequence_mean}
KL_ESTIMATORS = {"k3": kl_k3}


@dataclass
class LossTerms:
    loss: torch.Tensor  # scalar, the value to minimise
    policy_loss: torch.Tensor  # scalar, aggregated clipped surrogate
    kl: torch.Tensor  # scalar, aggregated KL estimate (0 when no reference)
    clipped_tokens: torch.Tensor  # scalar, count of real tokens where the clip was binding


def grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor | None,
              advantages: torch.Tensor, mask: torch.Tensor, *, clip_epsilon: float = 0.2, beta: float = 0.04,
              aggregation: str = "sequence_mean", kl_estimator: str = "k3",
              num_sequences: int | None = None) -> LossTerms:
    """The GRPO loss on one (micro-)batch. KL sits in the loss, not the reward (DeepSeekMath sec. 4.1.2)."""
    aggregate = AGGREGATIONS[aggregation]
    per_token, clipped = ppo_clip(logprobs, old_logprobs, advantages, clip_epsilon)
    policy_loss = aggregate(per_token, mask, num_sequences)
    if ref_logprobs is not None and beta > 0:
        kl = aggregate(KL_ESTIMATORS[kl_estimator](logprobs, ref_logprobs), mask, num_sequences)
    else:
        kl = torch.zeros((), dtype=logprobs.dtype)
    # A count, not a share: shares of micro-batches with different token counts do not average correctly.
    clipped_tokens = (clipped & (mask > 0)).sum()
    return LossTerms(policy_loss + beta * kl, policy_loss.detach(), kl.detach(), clipped_tokens)
