"""Advantage estimators: pure functions from rewards grouped by prompt to one advantage per completion.

Every estimator has the signature (rewards [B], group_size G, eps, valid [B] bool | None) -> advantages [B].
Rows are grouped contiguously: rewards[g*G:(g+1)*G] belong to prompt g (see types.RolloutBatch).
`valid` marks scorable rows: unscorable ones (their reference could not be read) are left out of
every mean and std and get advantage 0.

  grpo                   (r - group mean) / (group std + eps)          Shao et al. 2024, DeepSeekMath eq. 3
  dr_grpo                r - group mean                                Liu et al. 2025, "Dr. GRPO", sec. 3.1
  rloo                   r - mean of the *other* G-1 rewards           Ahmadian et al. 2024 (Kool et al. 2019)
  grpo_batch_std         (r - group mean) / (batch std + eps)          Liu et al. 2025, "Tricks or Traps" (Lite PPO)
  reinforce_pp           (r - batch mean) / (batch std + eps)          Hu 2025, REINFORCE++ (outcome reward)
  reinforce_pp_baseline  c = r - group mean; (c - batch mean c) / (batch std c + eps)   REINFORCE++-baseline

A group whose valid rewards all tie gets exactly 0 from the group-baseline estimators (its r - mean would
be float noise otherwise); it carries no signal (DAPO, sec. 3.2). The PPO baseline (a learned critic and GAE)
is in gae.py: it needs values per token, not just rewards.
"""
from __future__ import annotations

from typing import Callable

import torch


def _grouped(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if rewards.dim() != 1 or group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards of shape {tuple(rewards.shape)} do not split into groups of {group_size}")
    return rewards.view(-1, group_size)


def _valid(rewards: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    return torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid.bool().view(rewards.shape)


def tied_groups(rewards: torch.Tensor, group_size: int, valid: torch.Tensor | None = None) -> torch.Tensor:
    """[B/G] bool: groups whose valid rewards are all equal (or fewer than two valid): no learning signal."""
    grouped = _grouped(rewards.float(), group_size)
    ok = _valid(grouped, None if valid is None else _grouped(valid, group_size))
    high = grouped.masked_fill(~ok, float("-inf")).amax(dim=1)
    low = grouped.masked_fill(~ok, float("inf")).amin(dim=1)
    return ~((high > low) & (ok.sum(dim=1) > 1))


def _group_stats(rewards: torch.Tensor, group_size: int, valid: torch.Tensor | None):
    """-> (grouped [N, G], valid [N, G], count [N, 1], mean [N, 1], Bessel std [N, 1], keep [N, G])."""
    grouped = _grouped(rewards.float(), group_size)
    ok = _valid(grouped, None if valid is None else _grouped(valid, group_size))
    count = ok.sum(dim=1, keepdim=True)
    mean = torch.where(ok, grouped, 0.0).sum(dim=1, keepdim=True) / count.clamp(min=1)
    var = torch.where(ok, (grouped - mean) ** 2, 0.0).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)
    keep = ok & ~tied_groups(rewards, group_size, valid).unsqueeze(1)
    return grouped, ok, count, mean, var.sqrt(), keep


def _batch_std(values: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """Bessel std over the valid entries of the whole batch (0 with fewer than two)."""
    count = ok.sum()
    mean = torch.where(ok, values, 0.0).sum() / count.clamp(min=1)
    return (torch.where(ok, (values - mean) ** 2, 0.0).sum() / (count - 1).clamp(min=1)).sqrt()


def grpo_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4,
                    valid: torch.Tensor | None = None) -> torch.Tensor:
    """rewards [B] -> (r - group mean) / (group std + eps); std is Bessel-corrected, as TRL computes it."""
    grouped, _, _, mean, std, keep = _group_stats(rewards, group_size, valid)
    return torch.where(keep, (grouped - mean) / (std + eps), 0.0).view(-1)


def dr_grpo_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4,
                       valid: torch.Tensor | None = None) -> torch.Tensor:
    """r - group mean. Dr. GRPO drops the std: dividing by it over-weights groups that are nearly all right or
    all wrong (a question-level difficulty bias). `eps` is unused, kept for the common signature."""
    grouped, _, _, mean, _, keep = _group_stats(rewards, group_size, valid)
    return torch.where(keep, grouped - mean, 0.0).view(-1)


def rloo_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4,
                    valid: torch.Tensor | None = None) -> torch.Tensor:
    """r_i - mean_{j != i} r_j = n/(n-1) (r_i - mean) over the n valid rows of the group (no self-baseline bias)."""
    grouped, _, count, mean, _, keep = _group_stats(rewards, group_size, valid)
    scale = count / (count - 1).clamp(min=1)
    return torch.where(keep, scale * (grouped - mean), 0.0).view(-1)


def grpo_batch_std_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4,
                              valid: torch.Tensor | None = None) -> torch.Tensor:
    """(r - group mean) / (std of all valid rewards in the batch + eps): group baseline, batch-level scale,
    so a nearly-solved group no longer gets its tiny differences blown up (TRL's scale_rewards='batch')."""
    grouped, ok, _, mean, _, keep = _group_stats(rewards, group_size, valid)
    return torch.where(keep, (grouped - mean) / (_batch_std(grouped, ok) + eps), 0.0).view(-1)


def reinforce_pp_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4,
                            valid: torch.Tensor | None = None) -> torch.Tensor:
    """(r - batch mean) / (batch std + eps): REINFORCE++ whitens over the global batch, with no per-prompt
    baseline, so it works with G = 1. With an outcome reward and gamma = 1 every token's return is r."""
    values = rewards.float().view(-1)
    ok = _valid(values, valid)
    if ok.sum() < 2:
        return torch.zeros_like(values)
    mean = torch.where(ok, values, 0.0).sum() / ok.sum()
    spread = values[ok].amax() > values[ok].amin()
    out = (values - mean) / (_batch_std(values, ok) + eps)
    return torch.where(ok & spread, out, 0.0)


def reinforce_pp_baseline_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4,
                                     valid: torch.Tensor | None = None) -> torch.Tensor:
    """Group mean subtracted first (a per-prompt baseline), then whitened over the batch (REINFORCE++-baseline)."""
    centred = dr_grpo_advantages(rewards, group_size, eps, valid)
    keep = _valid(centred, valid) & ~tied_groups(rewards, group_size, valid).repeat_interleave(group_size)
    if keep.sum() < 2:
        return torch.zeros_like(centred)
    # Tied groups and unscorable rows hold exact zeros that are not samples of the spread: leave them out
    # (OpenRLHF whitens over every token of the batch, tied groups included; that shrinks the scale when
    # many groups tie, which is exactly when the remaining signal is scarce).
    mean = centred[keep].mean()
    return torch.where(keep, (centred - mean) / (_batch_std(centred, keep) + eps), 0.0)


AdvantageFn = Callable[..., torch.Tensor]  # (rewards [B], group_size, eps, valid=[B] bool | None) -> [B]

# The one place an outcome estimator is chosen (docs/design.md principle 5). "gae" (learned critic) is in gae.py.
ADVANTAGES: dict[str, AdvantageFn] = {
    "grpo": grpo_advantages,
    "dr_grpo": dr_grpo_advantages,
    "rloo": rloo_advantages,
    "grpo_batch_std": grpo_batch_std_advantages,
    "reinforce_pp": reinforce_pp_advantages,
    "reinforce_pp_baseline": reinforce_pp_baseline_advantages,
}


def combined_advantages(estimator: AdvantageFn, components: dict[str, tuple[torch.Tensor, float]],
                        combination: str, group_size: int, eps: float,
                        valid: torch.Tensor | None = None) -> torch.Tensor:
    """Reward components name -> (values [B], weight) -> advantages [B]. Components are the verifiers' scores
    plus any reward shaping (overlong punishment, KL in the reward), each with its weight.

    sum_then_normalize: estimator(sum_k w_k s_k), the usual single-reward path.
    normalize_then_sum: sum_k w_k estimator(s_k) (GDPO, group reward-decoupled normalisation): each component is
    normalised within its group on its own, so a high-variance reward cannot drown a low-variance one.
    """
    live = [(values.float(), weight) for values, weight in components.values() if weight != 0]
    if not live:
        raise ValueError("no reward component has a non-zero weight")
    if combination == "sum_then_normalize":
        return estimator(sum(w * v for v, w in live), group_size, eps, valid=valid)
    if combination == "normalize_then_sum":
        return sum(w * estimator(v, group_size, eps, valid=valid) for v, w in live)
    raise ValueError(f"unknown reward combination {combination!r}; allowed: sum_then_normalize, normalize_then_sum")
