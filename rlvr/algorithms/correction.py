"""Rollout correction and the trainer-vs-engine agreement check: pure tensor functions.

The engine returns, with every sampled token, its log-prob under the distribution it was drawn from: the
behaviour policy mu. When the sampler is not exactly the trainer (another engine's kernels, stale weights,
asynchronous rollouts), the samples are off-policy for pi_old. The loss then keeps PPO's clipped ratio
pi_theta / pi_old as the trust region around the trainer's own old policy and multiplies each token's surrogate
by a detached importance weight w = pi_old / mu that corrects for who sampled: the decoupled form of PPO
(Hilton et al. 2022, "Batch size-invariance for policy optimization", where the proximal policy and the
behaviour policy are two different policies). Raw IS weights have unbounded variance, so they are bounded:

  tis  w = min(rho, cap)             truncated importance sampling (Yao et al. 2025, "Your efficient RL framework
                                     secretly brings you off-policy RL training"): every sample kept, its weight capped
  mis  w = 1 if rho <= cap, else 0   masked importance sampling: samples whose weight would exceed the cap are
                                     dropped instead of kept at the cap (the later TIS/MIS write-ups)
  none w = 1                         plain on-policy GRPO/PPO

The mask is one-sided (rho > cap only): the variance of an IS estimate comes from large weights (E_mu[w^2]),
while a weight below 1 is bounded and still the correct weight of that sample; dropping those too would add
bias and remove no variance.

Levels: "token" takes rho_t = pi_old(y_t | ...) / mu(y_t | ...) per token. "sequence" takes one weight per row,
the product of its token ratios, rho = prod_t rho_t = P_pi_old(y) / P_mu(y): that is the importance weight of
the sampled completion itself, which the sequence-level reward's gradient needs. The geometric mean of the token
ratios (GSPO's length-normalised ratio, Zheng et al. 2025) is not the IS weight of anything: untruncated it
would not give an unbiased estimate, so it is not offered. Products overflow: everything is computed in log
space and only capped values are exponentiated.

Shapes: B rows, C completion tokens; `mask` [B, C] is 1 on tokens that get a loss (padding positions of either
log-prob tensor may hold anything: they are ignored).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlvr.algorithms.loss import kl_k3
from rlvr.errors import UserFacingError

MODES = ("none", "tis", "mis")
LEVELS = ("token", "sequence")

# The k3 estimate below exponentiates a log ratio; past this (e^50 ~ 5e21) a token is a disagreement anyway, and
# the clamp keeps one wild token a large finite number instead of inf (metrics.jsonl cannot hold inf).
_MAX_LOG_RATIO = 50.0


@dataclass(frozen=True)
class CorrectionSettings:
    """What the update needs to know; built once from config.rollout.correction (defaults live in config/run.py)."""

    mode: str  # one of MODES
    level: str  # one of LEVELS
    cap: float  # > 1: the truncation (tis) or rejection (mis) threshold of the weight
    max_mismatch_kl: float | None  # the agreement check's threshold; None or 0 = off


@dataclass
class CorrectionWeights:
    weights: torch.Tensor  # [B, C] detached, >= 0; 1 on padding
    masked: torch.Tensor  # [B, C] bool, True on loss tokens that mis dropped (weight 0)


def log_ratios(trainer_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, C] log pi_old - log mu on loss tokens, 0 on padding (float32, detached)."""
    delta = trainer_logprobs.detach().float() - behaviour_logprobs.detach().float()
    return torch.where(mask > 0, delta, torch.zeros_like(delta))


def importance_weights(trainer_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor,
                       mode: str, level: str, cap: float) -> CorrectionWeights:
    """Detached weights w = f(pi_old / mu) [B, C] for the per-token surrogate (see the module docstring)."""
    if mode not in MODES or level not in LEVELS:
        raise ValueError(f"unknown correction mode/level {mode!r}/{level!r}; modes {MODES}, levels {LEVELS}")
    log_rho = log_ratios(trainer_logprobs, behaviour_logprobs, mask)
    if level == "sequence":  # log of the product over the row's loss tokens, broadcast back to its tokens
        log_rho = log_rho.sum(dim=-1, keepdim=True).expand_as(log_rho)
    inside = mask > 0
    if mode == "none":
        weights, masked = torch.ones_like(log_rho), torch.zeros_like(inside)
    elif mode == "tis":  # exp(min(log rho, log cap)): only the capped value is exponentiated, so no overflow
        weights, masked = torch.exp(torch.clamp(log_rho, max=math.log(cap))), torch.zeros_like(inside)
    else:  # mis (a NaN ratio is not <= the cap either; its surrogate is NaN anyway and the step is skipped)
        keep = log_rho <= math.log(cap)
        weights, masked = keep.to(log_rho.dtype), ~keep & inside
    weights = torch.where(inside, weights, torch.ones_like(weights))
    return CorrectionWeights(weights, masked)


def mismatch_kl_per_token(trainer_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor,
                          mask: torch.Tensor) -> torch.Tensor:
    """[B, C] k3 estimate of KL(mu || pi_old) at each sampled token, 0 on padding.

    The tokens were drawn from mu, so with r = pi / mu the per-token value r - 1 - log r is >= 0 and its mean
    under mu is E[r] - 1 + KL(mu || pi) = KL(mu || pi) (Schulman 2020, "Approximating KL divergence"; the k3 of
    loss.py with the roles of the two policies set by who sampled). E_mu[r] = 1 needs mu to put mass wherever
    pi does: true for full-vocabulary sampling, false for top-p < 1 (config/rules refuses that combination).
    k1 (the mean of -log r) is also unbiased, but can be negative per batch, which a threshold reads badly.
    """
    log_r = log_ratios(trainer_logprobs, behaviour_logprobs, mask).double().clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return kl_k3(torch.zeros_like(log_r), log_r) * (mask > 0)  # exp(d) - d - 1 with d = log pi - log mu


def mismatch_kl(trainer_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean per-token KL(mu || pi_old) over the loss tokens: the number logged every step and checked."""
    tokens = float((mask > 0).sum())
    return float(mismatch_kl_per_token(trainer_logprobs, behaviour_logprobs, mask).sum()) / max(tokens, 1.0)


@dataclass(frozen=True)
class CorrectionStats:
    """Sums over the loss tokens of one or more micro-batches: `+` merges them, so the step's numbers are token
    means over the whole batch whatever the micro-batch size (as the loss's global denominators)."""

    tokens: float
    weight_sum: float
    weight_max: float
    masked: float
    kl_sum: float

    def __add__(self, other: "CorrectionStats") -> "CorrectionStats":
        return CorrectionStats(self.tokens + other.tokens, self.weight_sum + other.weight_sum,
                               max(self.weight_max, other.weight_max), self.masked + other.masked,
                               self.kl_sum + other.kl_sum)

    @property
    def mean_weight(self) -> float:
        return self.weight_sum / max(self.tokens, 1.0)

    @property
    def max_weight(self) -> float:
        return self.weight_max

    @property
    def masked_share(self) -> float:
        """Share of loss tokens whose weight mis set to 0."""
        return self.masked / max(self.tokens, 1.0)

    @property
    def mismatch_kl(self) -> float:
        return self.kl_sum / max(self.tokens, 1.0)


def correction_stats(corrected: CorrectionWeights, trainer_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor,
                     mask: torch.Tensor) -> CorrectionStats:
    """The sums of one (micro-)batch; weights are counted on loss tokens only."""
    inside = mask > 0
    tokens = float(inside.sum())
    weights = corrected.weights.float()
    top = float(weights[inside].max()) if tokens else 0.0
    kl = float(mismatch_kl_per_token(trainer_logprobs, behaviour_logprobs, mask).sum())
    return CorrectionStats(tokens, float((weights * inside).sum()), top, float(corrected.masked.sum()), kl)


class EngineMismatch(UserFacingError, RuntimeError):
    """The rollout engine's log-probs disagree with the trainer's past the configured threshold."""


def check_agreement(kl: float, threshold: float | None) -> None:
    """Raise EngineMismatch when the measured KL(engine || trainer) exceeds `threshold` (None or 0: no check).

    NaN does not raise: a non-finite trainer is the divergence guard's case (rlvr/training/guards.py), not the engine's.
    """
    if not threshold or not kl > threshold:
        return
    raise EngineMismatch(
        f"the rollout engine and the trainer disagree on the sampled tokens: mismatch KL(engine || trainer) = "
        f"{kl:.3g} per token, above rollout.correction.max_mismatch_kl={threshold:g}. Likely causes: the weight "
        f"sync to the engine was not applied (the engine still samples with older weights: a stale engine), the "
        f"engine samples with another temperature or top_p than rollout.temperature / rollout.top_p, or it serves "
        f"another model, revision or dtype. This step's update was not applied. Raise the threshold (null turns "
        f"the check off) only if such a difference is expected")
