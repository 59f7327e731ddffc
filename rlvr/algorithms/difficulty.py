"""How much signal a group carries at a given difficulty: the sweet spot of GRPO's group baseline.

With a 0/1 reward and a prompt the policy solves with probability p, the G completions of a group are G Bernoulli(p)
draws. The group ties (all right or all wrong), and then teaches nothing (its advantages are exactly 0,
advantages.grpo_advantages), with probability

    P(tie) = p^G + (1 - p)^G,

and the mean |A| of a completion, over the binomial number k of right answers, is

    E|A| = sum over k of C(G, k) p^k (1 - p)^(G - k) * mean_i |A_i(k)|,

with A_i(k) the advantages grpo_advantages gives a group of k ones and G - k zeros. Both are largest near p = 1/2
and vanish at p = 0 and p = 1 (DAPO, Yu et al. 2025, sec. 3.2, filters such groups out). The explainer plots them
(rlvr/viz/static/explainer.js ports them; a browser test compares). Tensors and floats in, floats out.
"""
from __future__ import annotations

import math

import torch

from rlvr.algorithms.advantages import grpo_advantages


def tie_probability(p: float, group_size: int) -> float:
    """P(all G draws equal) for G Bernoulli(p) draws: p^G + (1 - p)^G (1 for G = 1: a group of one always ties)."""
    _check(p, group_size)
    return p ** group_size + (1.0 - p) ** group_size


def expected_abs_advantage(p: float, group_size: int, eps: float = 1e-4) -> float:
    """E over k ~ Binomial(G, p) of the mean |A| of a group of k right (reward 1) and G - k wrong (reward 0)
    completions, A from grpo_advantages (Bessel std, eps in the denominator)."""
    _check(p, group_size)
    total = 0.0
    for k in range(group_size + 1):
        rewards = torch.tensor([1.0] * k + [0.0] * (group_size - k))  # host: G numbers, a closed-form sum
        mean_abs = float(grpo_advantages(rewards, group_size, eps).abs().mean())
        total += math.comb(group_size, k) * p ** k * (1.0 - p) ** (group_size - k) * mean_abs
    return total


def _check(p: float, group_size: int) -> None:
    if not 0.0 <= p <= 1.0 or group_size < 1:
        raise ValueError(f"need 0 <= p <= 1 and G >= 1, got p = {p}, G = {group_size}")
