"""The advantages stage: rewards (and the KL charged in the reward) -> per-completion or per-token advantages.

Which estimator runs is chosen once, in `build_estimator` (docs/design.md principle 5); the formulas live in
advantages.py, gae.py and shaping.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import torch

from rlvr.algorithms.advantages import AdvantageFn, combined_advantages
from rlvr.algorithms.gae import gae_advantages, masked_whiten, outcome_token_rewards
from rlvr.algorithms.shaping import kl_penalty_to_go, weighted_total
from rlvr.algorithms.turns import combine_credit, process_advantages, turn_token_advantages
from rlvr.grpo.plan import AdvantagePlan
from rlvr.types import RolloutBatch

if TYPE_CHECKING:
    from rlvr.agents.process_reward import ProcessReward
    from rlvr.training.critic import Critic


@dataclass
class Advantages:
    values: torch.Tensor  # [B] per completion, or [B, C] per token (KL in the reward, critic)
    shaped_reward_mean: float  # mean total reward after shaping and the KL penalty, before normalisation
    critic_targets: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # returns, old values, mask [B, C]
    extra: dict[str, float] = field(default_factory=dict)  # metrics, e.g. the KL paid in the reward


class AdvantageEstimator(Protocol):
    def __call__(self, rollouts: RolloutBatch, components: dict[str, tuple[torch.Tensor, float]],
                 valid: torch.Tensor, kl_per_token: torch.Tensor | None) -> Advantages: ...


def _kl_metrics(kl_per_token: torch.Tensor | None, mask: torch.Tensor) -> dict[str, float]:
    return {} if kl_per_token is None else {"kl_in_reward": float((kl_per_token * mask).sum(dim=1).mean())}


@dataclass
class OutcomeEstimator:
    """Advantages from the rewards of a group or batch (advantages.ADVANTAGES); with the KL in the reward,
    each token's advantage also pays the KL from that token on (shaping.kl_penalty_to_go)."""

    estimator: AdvantageFn
    combination: str
    eps: float
    beta: float

    def __call__(self, rollouts, components, valid, kl_per_token) -> Advantages:
        mask = rollouts.completion_mask.float()
        total = weighted_total(components)
        advantages = combined_advantages(self.estimator, components, self.combination, rollouts.group_size,
                                         self.eps, valid=valid)
        if kl_per_token is None:
            return Advantages(advantages, float(total.mean()))
        to_go = kl_penalty_to_go(kl_per_token, mask, self.beta)
        shaped = float((total - to_go[:, 0]).mean())  # to_go at t = 0 is the whole sequence's penalty
        per_token = (advantages[:, None] - to_go) * mask * valid[:, None]  # unscorable rows learn nothing
        return Advantages(per_token, shaped, None, _kl_metrics(kl_per_token, mask))


@dataclass
class CriticEstimator:
    """PPO's baseline: per-token advantages from a learned value function and GAE (Schulman et al. 2016)."""

    critic: Critic
    gamma: float
    lam: float
    beta: float

    def __call__(self, rollouts, components, valid, kl_per_token) -> Advantages:
        mask = rollouts.completion_mask.float()
        total = weighted_total(components)
        penalty = None if kl_per_token is None else self.beta * kl_per_token
        token_rewards = outcome_token_rewards(total, mask, penalty)
        values = self.critic.values(rollouts.prompt_ids, rollouts.prompt_mask, rollouts.prompt_index,
                                    rollouts.completion_ids, mask)
        advantages, returns = gae_advantages(token_rewards, values, mask, self.gamma, self.lam)
        # Unscorable rows: no reward was observed, so neither the policy nor the critic learns from them.
        learn = mask * valid[:, None]
        extra = {"value_mean": float((values * mask).sum() / mask.sum().clamp(min=1)),
                 **_kl_metrics(kl_per_token, mask)}
        shaped = float(token_rewards.sum(dim=1).mean())
        return Advantages(masked_whiten(advantages, learn), shaped, (returns, values, learn), extra)


@dataclass
class TurnCreditEstimator:
    """episode.credit=process: the outcome estimator's advantage on every sampled token of an
    episode, plus DeepSeekMath's process-supervision advantage of the token's turn (algorithms/turns.py). Step
    rewards are the environment's per-turn rewards plus the process scorer's, when one is named; `weight` scales
    the (group-normalised) process term against the outcome term."""

    outcome: AdvantageEstimator
    scorer: ProcessReward | None
    weight: float
    eps: float

    def __call__(self, rollouts, components, valid, kl_per_token) -> Advantages:
        result = self.outcome(rollouts, components, valid, kl_per_token)
        turns = rollouts.turns
        if turns is None:
            return result
        steps, extra = turns.turn_rewards.float(), {}
        if self.scorer is not None:
            scored = self.scorer.score(turns, [rollouts.prompt_of(b) for b in range(rollouts.size)])
            steps, extra = steps + scored.scores.to(steps.device), {"process/failed_turns": scored.failed}
        process = process_advantages(steps, turns.turn_mask, rollouts.group_size, self.eps)
        process = self.weight * process * valid[:, None]  # unscorable rows learn nothing, as in the outcome term
        if result.values.dim() == 1:
            values = combine_credit(result.values, process, turns.turn_of_token)
        else:  # per-token already (the KL charged in the reward): add the turn's process term
            values = result.values + turn_token_advantages(process, turns.turn_of_token)
        extra["process/advantage_abs_mean"] = float(process.abs().sum() / turns.turn_mask.sum().clamp(min=1))
        return Advantages(values, result.shaped_reward_mean, result.critic_targets, {**result.extra, **extra})


def build_estimator(plan: AdvantagePlan, beta: float, critic: Critic | None) -> AdvantageEstimator:
    """`beta` weighs the KL charged in the reward (it is only charged with kl_placement=reward)."""
    if plan.critic:
        return CriticEstimator(critic, plan.gamma, plan.lam, beta)
    return OutcomeEstimator(plan.outcome, plan.combination, plan.std_epsilon, beta)
