"""The advantages stage's estimators (rlvr/grpo/estimators.py) on batches small enough to follow by hand: PPO's
critic baseline (GAE on the critic's values, the KL charged per token, unscorable rows learning nothing) and the
choice `build_estimator` makes from the plan."""
from __future__ import annotations

import math

import pytest
import torch

from rlvr.algorithms.advantages import ADVANTAGES
from rlvr.grpo.estimators import CriticEstimator, OutcomeEstimator, build_estimator
from rlvr.grpo.plan import AdvantagePlan
from rlvr.types import Prompt, RolloutBatch

# one group of two rows: row 0 has 2 completion tokens, row 1 has 3
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])
# the critic's V(state before token t); 0 past each row's end, as Critic.values returns them
VALUES = torch.tensor([[0.5, 0.25, 0.0], [0.1, 0.2, 0.3]])
ANSWER = {"answer": (torch.tensor([1.0, 0.0]), 1.0)}


class FixedCritic:
    """A critic whose value function is VALUES; it records what it was asked about."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def values(self, prompt_ids, prompt_mask, rows, completion_ids, completion_mask):
        self.calls.append((prompt_ids, prompt_mask, rows, completion_ids, completion_mask))
        return VALUES.clone()


def rollouts(mask: torch.Tensor = MASK) -> RolloutBatch:
    rows, columns = mask.shape
    prompt = Prompt("p", ({"role": "user", "content": "q"},), "1")
    return RolloutBatch([prompt], rows, torch.ones(1, 2, dtype=torch.long), torch.ones(1, 2, dtype=torch.long),
                        torch.arange(rows * columns).view(rows, columns), mask, torch.zeros(rows, columns),
                        ["a"] * rows, torch.zeros(rows, dtype=torch.bool))


def critic_estimator(beta: float = 0.5) -> tuple[CriticEstimator, FixedCritic]:
    critic = FixedCritic()
    return CriticEstimator(critic, gamma=1.0, lam=1.0, beta=beta), critic


def whiten(xs: list[float]) -> list[float]:
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1) + 1e-8)
    return [(x - mean) / std for x in xs]


def test_critic_estimator_by_hand_with_the_kl_charged_per_token() -> None:
    """gamma = lam = 1: GAE's advantage is the reward to go minus V, its return the reward to go.
    KL [[0.2, 0.4, 9 (padding)], [0, 0.2, 0]] x beta 0.5 = penalty [[0.1, 0.2, -], [0, 0.1, 0]];
    token rewards: row 0 [-0.1, 1 - 0.2, 0] (its outcome 1 on its last token), row 1 [0, -0.1, 0 - 0].
    Reward to go (the returns): row 0 [0.7, 0.8], row 1 [-0.1, -0.1, 0].
    Advantages = returns - V: row 0 [0.2, 0.55], row 1 [-0.2, -0.3, -0.3], then whitened over those 5 tokens.
    Shaped reward: the rows' summed token rewards 0.7 and -0.1 -> mean 0.3. value_mean: (0.5 + 0.25 + 0.1 + 0.2 +
    0.3) / 5 = 0.27 over real tokens. KL in the reward: sums 0.6 and 0.2 -> mean 0.4."""
    estimator, critic = critic_estimator()
    batch = rollouts()
    kl = torch.tensor([[0.2, 0.4, 9.0], [0.0, 0.2, 0.0]])
    out = estimator(batch, ANSWER, torch.tensor([True, True]), kl)
    a0, a1, b0, b1, b2 = whiten([0.2, 0.55, -0.2, -0.3, -0.3])
    torch.testing.assert_close(out.values, torch.tensor([[a0, a1, 0.0], [b0, b1, b2]]), rtol=0, atol=1e-5)
    returns, old_values, learn = out.critic_targets
    torch.testing.assert_close(returns, torch.tensor([[0.7, 0.8, 0.0], [-0.1, -0.1, 0.0]]), rtol=0, atol=1e-6)
    assert torch.equal(old_values, VALUES) and torch.equal(learn, MASK.float())
    assert out.shaped_reward_mean == pytest.approx(0.3)
    assert out.extra["value_mean"] == pytest.approx(0.27) and out.extra["kl_in_reward"] == pytest.approx(0.4)
    # the critic was asked about these rows: their prompt rows and the completions under their mask
    ((prompt_ids, prompt_mask, rows, completion_ids, mask),) = critic.calls
    assert rows.tolist() == [0, 0] and torch.equal(completion_ids, batch.completion_ids)
    assert torch.equal(mask, MASK.float()) and torch.equal(prompt_ids, batch.prompt_ids)


def test_critic_estimator_without_the_kl_in_the_reward() -> None:
    """No KL: token rewards [0, 1, 0] and [0, 0, 0]; returns [1, 1] and [0, 0, 0]; advantages 1 - V = [0.5, 0.75]
    and -V = [-0.1, -0.2, -0.3]; shaped reward (1 + 0) / 2 = 0.5; no KL metric."""
    estimator, _ = critic_estimator()
    out = estimator(rollouts(), ANSWER, torch.tensor([True, True]), None)
    a0, a1, b0, b1, b2 = whiten([0.5, 0.75, -0.1, -0.2, -0.3])
    torch.testing.assert_close(out.values, torch.tensor([[a0, a1, 0.0], [b0, b1, b2]]), rtol=0, atol=1e-5)
    assert out.shaped_reward_mean == pytest.approx(0.5) and "kl_in_reward" not in out.extra


def test_an_unscorable_row_teaches_neither_the_policy_nor_the_critic() -> None:
    """Row 1 unscorable: it gets advantage 0 and drops out of the critic's loss mask; row 0's advantages [0.2, 0.55]
    (the KL numbers of the first test) are whitened alone: mean 0.375, deviations -+0.175, Bessel variance
    2 * 0.175^2 / 1 -> -+0.175 / (0.175 * sqrt 2) = -+0.70711."""
    estimator, _ = critic_estimator()
    kl = torch.tensor([[0.2, 0.4, 9.0], [0.0, 0.2, 0.0]])
    out = estimator(rollouts(), ANSWER, torch.tensor([True, False]), kl)
    torch.testing.assert_close(out.values, torch.tensor([[-0.70711, 0.70711, 0.0], [0.0, 0.0, 0.0]]), rtol=0,
                               atol=1e-5)
    assert torch.equal(out.critic_targets[2], torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    # the value metric still reads every real token: the critic did predict them
    assert out.extra["value_mean"] == pytest.approx(0.27)


def plan(critic: bool) -> AdvantagePlan:
    return AdvantagePlan(critic, None if critic else ADVANTAGES["dr_grpo"], "normalize_then_sum", 0.25, 0.9, 0.8)


def test_build_estimator_follows_the_plan() -> None:
    """advantage=gae builds the critic's estimator with the plan's gamma and lambda and the run's beta; otherwise
    the outcome estimator with the plan's function, combination and epsilon."""
    critic = FixedCritic()
    gae = build_estimator(plan(True), 0.05, critic)
    assert gae == CriticEstimator(critic, 0.9, 0.8, 0.05)
    outcome = build_estimator(plan(False), 0.05, None)
    assert outcome == OutcomeEstimator(ADVANTAGES["dr_grpo"], "normalize_then_sum", 0.25, 0.05)


def test_an_unscorable_row_pays_no_kl_either_when_the_kl_is_in_the_reward() -> None:
    """kl_placement=reward makes the outcome advantage per token; a row no verifier could score learns nothing,
    not even to lower its KL (its sampled tokens are not evidence of anything).
    dr_grpo, G = 2, rewards [1, 0 | 1, 0], row 3 unscorable: group 0's mean 0.5 -> [0.5, -0.5]; group 1's mean over
    its scorable row is 1 -> row 2 gets 0. KL 0.5 on every real token x beta 0.2, to go: two tokens [0.2, 0.1], one
    token [0.1]. Per token: row 0 [0.3, 0.4], row 1 [-0.6, 0], row 2 [-0.2, -0.1], row 3 [0, 0]."""
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 1]])
    batch = rollouts(mask)
    batch.group_size, batch.prompts = 2, batch.prompts * 2
    estimator = OutcomeEstimator(ADVANTAGES["dr_grpo"], "sum_then_normalize", 1e-4, beta=0.2)
    out = estimator(batch, {"answer": (torch.tensor([1.0, 0.0, 1.0, 0.0]), 1.0)},
                    torch.tensor([True, True, True, False]), 0.5 * mask.float())
    torch.testing.assert_close(out.values, torch.tensor([[0.3, 0.4], [-0.6, 0.0], [-0.2, -0.1], [0.0, 0.0]]),
                               rtol=0, atol=1e-6)


class OneCritic:
    def __init__(self, values: torch.Tensor) -> None:
        self.fixed = values

    def values(self, prompt_ids, prompt_mask, rows, completion_ids, completion_mask):
        return self.fixed


def test_value_mean_is_over_real_tokens_even_for_one_token_or_none() -> None:
    """value_mean averages V over the real completion tokens: a batch of one row of one token reads that token's
    V (0.4); a batch with no real token at all (every row empty) stays finite: 0, and its advantages 0."""
    one = CriticEstimator(OneCritic(torch.tensor([[0.4]])), 1.0, 1.0, 0.0)
    out = one(rollouts(torch.tensor([[1]])), {"answer": (torch.tensor([1.0]), 1.0)}, torch.tensor([True]), None)
    assert out.extra["value_mean"] == pytest.approx(0.4)
    empty = CriticEstimator(OneCritic(torch.zeros(2, 3)), 1.0, 1.0, 0.0)
    out = empty(rollouts(torch.zeros(2, 3, dtype=torch.long)), ANSWER, torch.tensor([True, True]), None)
    assert out.extra["value_mean"] == 0.0 and out.shaped_reward_mean == 0.0
    assert torch.equal(out.values, torch.zeros(2, 3))
