"""Per-token policy objectives of the GRPO family, as losses to minimise: pure tensor functions.

Each objective maps (logprobs, old_logprobs [B, C], advantages [B] or [B, C], mask [B, C], clip) to
Surrogate(loss [B, C], clipped [B, C] bool, high [B, C] bool). `logprobs` carries the gradient; old log-probs
are pi_old, the policy that sampled the batch (with mu = 1 they are the detached current log-probs, so every
ratio is 1).
Aggregation over tokens and sequences is not done here (loss.AGGREGATIONS).

  ppo_clip   -min(rho A, clip(rho, 1-eps_low, 1+eps_high) A)      PPO (Schulman et al. 2017); eps_high > eps_low
                                                                  is DAPO's clip-higher (Yu et al. 2025, sec. 3.1)
  dual_clip  ppo_clip, and for A < 0 at most -c A                  Ye et al. 2020 (dual-clip PPO), c = 3 in verl
  gspo       ppo_clip on the sequence ratio s_i = exp(mean_t log rho_t)   Zheng et al. 2025 (GSPO)
  cispo      -sg(min(rho, 1+eps_high)) A log pi                   MiniMax-M1 2025 (CISPO), eq. 4
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class ClipRange:
    low: float = 0.2  # ratio floor is 1 - low
    high: float = 0.2  # ratio ceiling is 1 + high
    dual_c: float = 3.0  # dual clip: loss of a negative-advantage token is at most -c * A


@dataclass
class Surrogate:
    loss: torch.Tensor  # [B, C] per-token loss (padding positions hold arbitrary finite values; mask them)
    clipped: torch.Tensor  # [B, C] bool, where a clip bound took the gradient away (or capped the weight)
    # [B, C] bool, the clipped tokens whose ratio is above 1 (the upper bound binds: a token the update pushed up too
    # far); clipped & ~high are the lower bound's. Logged apart: clip-higher (DAPO) moves only the first.
    high: torch.Tensor


def _per_token(advantages: torch.Tensor) -> torch.Tensor:
    return advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages


def _clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, clip: ClipRange) -> Surrogate:
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip.low, 1.0 + clip.high) * adv
    # The clip binds (and the gradient vanishes) where the clipped term is the smaller one.
    binds = clipped < unclipped
    return Surrogate(-torch.minimum(unclipped, clipped), binds, binds & (ratio > 1.0))


def ppo_clip(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
             clip: ClipRange) -> Surrogate:
    """Token ratio rho_t = pi/pi_old; asymmetric range [1 - low, 1 + high] (DAPO clip-higher when high > low:
    a low-probability token with A > 0 may grow further, which keeps entropy from collapsing)."""
    return _clipped_surrogate(torch.exp(logprobs - old_logprobs), _per_token(advantages), clip)


def dual_clip(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
              clip: ClipRange) -> Surrogate:
    """PPO clip plus a floor for A < 0: with a huge ratio, -rho A is unbounded; dual clip caps it at -c A
    (objective max(min(rho A, clip(rho) A), c A)), so one stale off-policy token cannot dominate the step."""
    adv = _per_token(advantages)
    base = ppo_clip(logprobs, old_logprobs, advantages, mask, clip)
    cap = -clip.dual_c * adv
    capped = (adv < 0) & (cap < base.loss)
    # the cap binds only where rho > c > 1, so a capped token counts with the upper side
    return Surrogate(torch.where(capped, cap.expand_as(base.loss), base.loss), base.clipped | capped,
                     base.high | capped)


def gspo(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
         clip: ClipRange) -> Surrogate:
    """GSPO: one importance ratio per sequence, the geometric mean of its token ratios,
    s_i = exp(1/|o_i| sum_t (log pi - log pi_old)), clipped at sequence level.

    Written in GSPO-token form, s_i,t = sg[s_i] * pi_t / sg[pi_t]: its value is s_i on every token and its
    gradient is s_i grad log pi_t, so with one advantage per sequence and the sequence-mean aggregation the
    result is exactly GSPO's objective and gradient. Per-token advantages (the KL-to-go of kl_placement=reward)
    make it GSPO-token, the paper's own token-level variant (sec. 4.3)."""
    mask = mask.to(logprobs.dtype)
    length = mask.sum(dim=-1, keepdim=True).clamp(min=1.0)
    log_s = ((logprobs - old_logprobs) * mask).sum(dim=-1, keepdim=True) / length  # [B, 1]
    ratio = torch.exp(log_s.detach() + logprobs - logprobs.detach())  # value s_i, gradient s_i * grad log pi_t
    adv = _per_token(advantages).expand_as(logprobs)
    return _clipped_surrogate(ratio, adv, clip)


def cispo(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
          clip: ClipRange) -> Surrogate:
    """CISPO: clip the importance weight, not the update. w = sg(min(rho, 1 + high)) and loss = -w A log pi, so
    every token keeps a gradient (PPO's clip drops rare "fork" tokens entirely). Like MiniMax-M1 (and TRL) only
    the upper bound is applied; `low` is unused."""
    ratio = torch.exp(logprobs - old_logprobs).detach()
    weight = torch.clamp(ratio, max=1.0 + clip.high)
    above = ratio > 1.0 + clip.high
    return Surrogate(-weight * _per_token(advantages) * logprobs, above, above)


Objective = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, ClipRange], Surrogate]

# The one place an objective is chosen (docs/design.md principle 5).
OBJECTIVES: dict[str, Objective] = {"ppo_clip": ppo_clip, "dual_clip": dual_clip, "gspo": gspo, "cispo": cispo}
