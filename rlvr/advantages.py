"""Advantage estimators: pure functions from rewards grouped by prompt to one advantage per completion.

GRPO (Shao et al. 2024, DeepSeekMath, eq. 3 with outcome supervision): every token of completion i gets
A_i = (r_i - mean(r_group)) / (std(r_group) + eps). No value network: the group is the baseline.
Rows are grouped contiguously: rewards[g*G:(g+1)*G] belong to prompt g (see types.RolloutBatch).
"""
from __future__ import annotations

from typing import Callable

import torch


def _grouped(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards of shape {tuple(rewards.shape)} do not split into groups of {group_size}")
    return rewards.view(-1, group_size)


def tied_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """[B/G] bool: groups whose rewards are all equal; they carry no learning signal (DAPO, sec. 3.2)."""
    grouped = _grouped(rewards, group_size)
    return grouped.amax(dim=1) == grouped.amin(dim=1)


def grpo_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4,
                    valid: torch.Tensor | None = None) -> torch.Tensor:
    """rewards [B] -> advantages [B] = (r - group mean) / (group std + eps).

    std is the sample std (Bessel-corrected), as TRL computes it. `valid` [B] bool marks scorable rows:
    unscorable ones (their reference could not be read, issue #3) are left out of the group's mean and
    std and get advantage 0. A group whose valid rewards all tie (one valid row included) gets exactly
    0: (r - mean) would otherwise be float noise divided by eps.
    """
    grouped = _grouped(rewards.float(), group_size)
    ok = torch.ones_like(grouped, dtype=torch.bool) if valid is None else _grouped(valid, group_size).bool()
    count = ok.sum(dim=1, keepdim=True)
    mean = torch.where(ok, grouped, 0.0).sum(dim=1, keepdim=True) / count.clamp(min=1)
    var = torch.where(ok, (grouped - mean) ** 2, 0.0).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)
    advantages = (grouped - mean) / (var.sqrt() + eps)
    spread = grouped.masked_fill(~ok, float("-inf")).amax(dim=1) > grouped.masked_fill(~ok, float("inf")).amin(dim=1)
    keep = ok & spread.unsqueeze(1) & (count > 1)
    return torch.where(keep, advantages, torch.zeros_like(advantages)).view(-1)


AdvantageFn = Callable[..., torch.Tensor]  # (rewards [B], group_size, eps, valid=[B] bool | None) -> [B]

# The one place an estimator is chosen (design.md principle 5); the GRPO-family issue adds the variants.
ADVANTAGES: dict[str, AdvantageFn] = {"grpo": grpo_advantages}
