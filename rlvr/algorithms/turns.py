"""Credit for multi-turn episodes: step rewards -> per-turn advantages -> per-token advantages.

Process supervision with GRPO (Shao et al. 2024, DeepSeekMath, sec. 4.1.3): every step reward of a group's G
episodes is normalized by the mean and std of ALL valid steps of those G episodes,

    r~(i, t) = (r(i, t) - mean) / (std + eps)

and the advantage of step t is the sum of the normalized rewards from that step to the end of its episode,

    A(i, t) = sum over t' >= t of r~(i, t').

The std is Bessel-corrected (divided by n - 1), as the outcome GRPO of advantages.py computes it, so that a group
of step rewards is scaled the same way as a group of outcome rewards. A group whose valid step rewards all tie
(one valid step included) carries no signal and gets exactly 0, as a tied outcome group does there.

A step here is one model turn. Rows are grouped contiguously (rows [g*G, (g+1)*G) share prompt g, as in
types.RolloutBatch); step t of a row is valid where step_mask is True. Tokens find their turn through
`turn_of_token` ([B, C] long, the model turn that sampled the token, -1 for environment tokens and padding:
types.Turns). Tensors in, tensors out; nothing of rlvr is imported (pyproject.toml, contract algorithms-pure).
"""
from __future__ import annotations

import torch


def process_advantages(step_rewards: torch.Tensor, step_mask: torch.Tensor, group_size: int,
                       eps: float = 1e-4) -> torch.Tensor:
    """step rewards [B, T], step mask [B, T] bool -> [B, T]: group-normalized step rewards summed from each step to
    the end of its episode (DeepSeekMath sec. 4.1.3; module docstring); 0 where step_mask is False."""
    if step_rewards.dim() != 2 or tuple(step_mask.shape) != tuple(step_rewards.shape):
        raise ValueError(f"step rewards of shape {tuple(step_rewards.shape)} and step mask of shape "
                         f"{tuple(step_mask.shape)}: expected both [B, T]")
    rows, steps = step_rewards.shape
    if group_size < 1 or rows % group_size:
        raise ValueError(f"{rows} rows do not split into groups of {group_size}")
    ok = step_mask.bool()
    if ok.numel() == 0:
        return torch.zeros(ok.shape, dtype=torch.float32, device=ok.device)
    # One line per group holding its G episodes' steps side by side: the statistics pool every valid step.
    grouped = step_rewards.float().reshape(rows // group_size, group_size * steps)
    valid = ok.reshape(grouped.shape)
    count = valid.sum(dim=1, keepdim=True)
    mean = torch.where(valid, grouped, 0.0).sum(dim=1, keepdim=True) / count.clamp(min=1)
    var = torch.where(valid, (grouped - mean) ** 2, 0.0).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)
    # Tied groups (all valid steps equal, or fewer than two) give exactly 0, not (r - mean) float noise / eps.
    spread = ~_tied(grouped, valid)[:, None]
    normalized = torch.where(valid & spread, (grouped - mean) / (var.sqrt() + eps), 0.0).view(rows, steps)
    # Reward-to-go: a turn is credited with what it and the turns after it earned, never with the turns before it.
    to_go = normalized.flip(1).cumsum(dim=1).flip(1)
    return torch.where(ok, to_go, 0.0)


def _tied(grouped: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """[N, K] values, [N, K] bool -> [N] bool: the valid values of a line all equal (or fewer than two)."""
    high = grouped.masked_fill(~valid, float("-inf")).amax(dim=1)
    low = grouped.masked_fill(~valid, float("inf")).amin(dim=1)
    return ~(high > low)


def tied_step_groups(step_rewards: torch.Tensor, step_mask: torch.Tensor, group_size: int) -> torch.Tensor:
    """[B, T], [B, T] bool -> [B/G] bool: groups whose valid step rewards all tie, so that process_advantages gives
    them 0 everywhere (what dynamic sampling needs to know besides the outcome tie)."""
    rows, steps = step_rewards.shape
    grouped = step_rewards.float().reshape(rows // group_size, group_size * steps)
    return _tied(grouped, step_mask.bool().reshape(grouped.shape))


def turn_token_advantages(turn_advantages: torch.Tensor, turn_of_token: torch.Tensor) -> torch.Tensor:
    """turn advantages [B, T], turn_of_token [B, C] long (-1 = not a sampled token) -> [B, C]: every sampled token
    carries the advantage of the turn that sampled it; environment tokens and padding get 0."""
    if turn_advantages.dim() != 2 or turn_of_token.dim() != 2 or turn_of_token.shape[0] != turn_advantages.shape[0]:
        raise ValueError(f"turn advantages of shape {tuple(turn_advantages.shape)} and turn_of_token of shape "
                         f"{tuple(turn_of_token.shape)}: expected [B, T] and [B, C]")
    steps = turn_advantages.shape[1]
    last = int(turn_of_token.max()) if turn_of_token.numel() else -1  # one host sync per batch
    if last >= steps:
        raise ValueError(f"turn_of_token names turn {last} but there are only {steps} turn advantages per row")
    sampled = turn_of_token >= 0
    if steps == 0:  # no turns, hence (checked above) no sampled token
        return torch.zeros(turn_of_token.shape, dtype=torch.float32, device=turn_of_token.device)
    picked = turn_advantages.float().gather(1, turn_of_token.long().clamp(min=0))
    return torch.where(sampled, picked, 0.0)


def combine_credit(outcome: torch.Tensor, process: torch.Tensor | None, turn_of_token: torch.Tensor) -> torch.Tensor:
    """Outcome advantages [B] (one per episode), process advantages [B, T] or None, turn_of_token [B, C]
    -> [B, C]: every sampled token gets its episode's outcome advantage plus its turn's process advantage.

    The sum, not DeepSeekMath's process advantage alone: the verified outcome stays the signal that says whether
    the episode was right, and the process term moves credit between the turns of an episode (and between episodes
    that ended alike but got there differently). Both are group-normalized to a unit scale, so neither drowns the
    other by its units. Where step rewards tie or are absent the process term is exactly 0 and the credit is the
    plain outcome GRPO credit, so `credit: process` never loses what `credit: outcome` would have learned.
    """
    if outcome.dim() != 1 or turn_of_token.dim() != 2 or outcome.shape[0] != turn_of_token.shape[0]:
        raise ValueError(f"outcome advantages of shape {tuple(outcome.shape)} and turn_of_token of shape "
                         f"{tuple(turn_of_token.shape)}: expected [B] and [B, C]")
    credit = torch.where(turn_of_token >= 0, outcome.float().unsqueeze(1), 0.0)
    return credit if process is None else credit + turn_token_advantages(process, turn_of_token)
