"""Reward shaping on top of the verifiers' scores: pure tensor functions, each a reward component [B].

The loop adds them to the reward components it hands to advantages.combined_advantages, so they are
combined (sum-then-normalise or normalise-then-sum) like any verifier. The KL penalty is different: it is
per token and keeps its scale beta (see kl_penalty_to_go).
"""
from __future__ import annotations

import torch


def soft_overlong_penalty(lengths: torch.Tensor, max_length: int, buffer: int) -> torch.Tensor:
    """DAPO soft overlong punishment (Yu et al. 2025, eq. 13), in [-1, 0], to be scaled by a penalty factor:

      0                              if |y| <= L_max - L_cache
      ((L_max - L_cache) - |y|) / L_cache   if L_max - L_cache < |y| <= L_max
      -1                             if |y| > L_max

    `lengths` [B] are completion token counts, `max_length` is L_max, `buffer` is L_cache. Truncation noise
    ("too long" is not "wrong") is replaced by a smooth length signal. buffer = 0 turns it off.
    """
    if buffer <= 0:
        return torch.zeros_like(lengths, dtype=torch.float32)
    if buffer > max_length:
        raise ValueError(f"overlong buffer {buffer} exceeds the length budget {max_length}")
    over = lengths.float() - (max_length - buffer)
    return torch.where(lengths > max_length, -1.0, -(over.clamp(min=0.0) / buffer))


def weighted_total(components: dict[str, tuple[torch.Tensor, float]]) -> torch.Tensor:
    """[B] sum_k w_k * values_k: the scalar reward of each completion."""
    return sum(weight * values.float() for values, weight in components.values())


def kl_penalty_to_go(kl_per_token: torch.Tensor, mask: torch.Tensor, beta: float) -> torch.Tensor:
    """[B, C] beta * sum_{s >= t} KL_s over real tokens: the KL-in-reward term of the return from token t on.

    With a per-token penalty r_t = -beta KL_t (InstructGPT-style RLHF; REINFORCE++, Hu 2025, eq. 8) and
    gamma = 1, token t's return is the outcome reward minus this. It is subtracted *after* the outcome
    advantage is estimated, so beta keeps its meaning: dividing a KL-shaped reward by the group's std (GRPO)
    would blow the KL noise of a tied group up to advantages of size 1. (OpenRLHF whitens both together.)
    """
    penalty = kl_per_token * mask.to(kl_per_token.dtype)
    return beta * penalty.flip(-1).cumsum(-1).flip(-1) * mask.to(kl_per_token.dtype)
