"""PPO baseline math (rlvr.algorithms.gae): GAE, outcome token rewards, whitening and the clipped value loss, each on
numbers derived by hand in the comments."""
from __future__ import annotations

import math

import pytest
import torch

from rlvr.algorithms.gae import gae_advantages, masked_whiten, outcome_token_rewards, value_loss


def close(actual: torch.Tensor, expected, atol: float = 1e-6) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), rtol=0, atol=atol)


# --- GAE ---------------------------------------------------------------------------------------------------

def test_gae_lambda_one_is_reward_to_go_minus_value() -> None:
    # r = [0.1, -0.2, 1.0], V = [0.5, 0.3, 0.8], gamma = lam = 1:
    # reward-to-go = [0.1 - 0.2 + 1.0, -0.2 + 1.0, 1.0] = [0.9, 0.8, 1.0]
    # A = reward-to-go - V = [0.4, 0.5, 0.2]; returns = A + V = reward-to-go
    rewards = torch.tensor([[0.1, -0.2, 1.0]])
    values = torch.tensor([[0.5, 0.3, 0.8]])
    advantages, returns = gae_advantages(rewards, values, torch.ones(1, 3), gamma=1.0, lam=1.0)
    close(advantages, [[0.4, 0.5, 0.2]])
    close(returns, [[0.9, 0.8, 1.0]])


def test_gae_lambda_095_by_hand() -> None:
    # r = [0, 0, 1], V = [0.2, 0.4, 0.6], gamma = 1, lam = 0.95, V after the last token = 0:
    # delta_2 = 1 + 0 - 0.6 = 0.4;  delta_1 = 0 + 0.6 - 0.4 = 0.2;  delta_0 = 0 + 0.4 - 0.2 = 0.2
    # A_2 = 0.4;  A_1 = 0.2 + 0.95 * 0.4 = 0.58;  A_0 = 0.2 + 0.95 * 0.58 = 0.751
    # returns = A + V = [0.951, 0.98, 1.0]
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.2, 0.4, 0.6]])
    advantages, returns = gae_advantages(rewards, values, torch.ones(1, 3), gamma=1.0, lam=0.95)
    close(advantages, [[0.751, 0.58, 0.4]])
    close(returns, [[0.951, 0.98, 1.0]])


def test_gae_discount_by_hand() -> None:
    # Same r and V, gamma = 0.9, lam = 0.5 (gamma * lam = 0.45):
    # delta_2 = 1 - 0.6 = 0.4;  delta_1 = 0.9 * 0.6 - 0.4 = 0.14;  delta_0 = 0.9 * 0.4 - 0.2 = 0.16
    # A_2 = 0.4;  A_1 = 0.14 + 0.45 * 0.4 = 0.32;  A_0 = 0.16 + 0.45 * 0.32 = 0.304
    # returns = [0.504, 0.72, 1.0]
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.2, 0.4, 0.6]])
    advantages, returns = gae_advantages(rewards, values, torch.ones(1, 3), gamma=0.9, lam=0.5)
    close(advantages, [[0.304, 0.32, 0.4]])
    close(returns, [[0.504, 0.72, 1.0]])


def test_gae_ignores_padding_of_a_short_row() -> None:
    # Row 1 has 2 real tokens of C = 4; its padding holds junk (reward 5 and 9, value 100 and nan) that must
    # not reach the real positions: V after token 1 is 0 (terminal), not 100.
    # Row 1, gamma = 1, lam = 0.95: r = [0, 1], V = [0.25, 0.5]
    # delta_1 = 1 + 0 - 0.5 = 0.5;  delta_0 = 0 + 0.5 - 0.25 = 0.25
    # A_1 = 0.5;  A_0 = 0.25 + 0.95 * 0.5 = 0.725;  returns = [0.975, 1.0]
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 5.0, 9.0]])
    values = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25, 0.5, 100.0, math.nan]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    advantages, returns = gae_advantages(rewards, values, mask, gamma=1.0, lam=0.95)
    close(advantages[1], [0.725, 0.5, 0.0, 0.0])
    close(returns[1], [0.975, 1.0, 0.0, 0.0])
    # row 0 equals the same row computed alone: rows do not interact
    alone_adv, alone_ret = gae_advantages(rewards[:1], values[:1], mask[:1], gamma=1.0, lam=0.95)
    close(advantages[0], alone_adv[0].tolist())
    close(returns[0], alone_ret[0].tolist())


def test_gae_fully_masked_row_is_zero() -> None:
    rewards = torch.tensor([[0.0, 1.0], [3.0, 4.0]])
    values = torch.tensor([[0.5, 0.5], [7.0, 8.0]])
    mask = torch.tensor([[True, True], [False, False]])
    advantages, returns = gae_advantages(rewards, values, mask, gamma=1.0, lam=1.0)
    # row 0: reward-to-go [1, 1] - V [0.5, 0.5] = [0.5, 0.5]; returns [1, 1]
    close(advantages, [[0.5, 0.5], [0.0, 0.0]])
    close(returns, [[1.0, 1.0], [0.0, 0.0]])


def test_gae_outputs_are_constant_targets() -> None:
    # advantages and returns are regression / policy targets: no gradient may flow back into the values
    values = torch.tensor([[0.2, 0.4]], requires_grad=True)
    advantages, returns = gae_advantages(torch.tensor([[0.0, 1.0]]), values, torch.ones(1, 2), 1.0, 0.95)
    assert not advantages.requires_grad and not returns.requires_grad


# --- outcome token rewards -----------------------------------------------------------------------------

def test_outcome_reward_on_last_real_token() -> None:
    # lengths 3, 1, 0 of C = 3: reward at column 2, column 0, nowhere
    rewards = torch.tensor([1.0, 0.5, 2.0])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    close(outcome_token_rewards(rewards, mask), [[0.0, 0.0, 1.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
    close(outcome_token_rewards(rewards, mask.bool()), [[0.0, 0.0, 1.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])


def test_outcome_reward_minus_kl_on_real_tokens() -> None:
    # row 0: [0 - 0.1, 0 - 0.2, 1 - 0.3] = [-0.1, -0.2, 0.7]
    # row 1: [0.5 - 0.4, 0 (padding), 0 (padding)] = [0.1, 0, 0]; row 2 fully masked: zeros (its KL ignored)
    rewards = torch.tensor([1.0, 0.5, 2.0])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    kl = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, math.inf]])
    token_rewards = outcome_token_rewards(rewards, mask, kl)
    close(token_rewards, [[-0.1, -0.2, 0.7], [0.1, 0.0, 0.0], [0.0, 0.0, 0.0]])
    # with V = 0, gamma = lam = 1 the advantage is the reward-to-go: row 0 = [0.4, 0.5, 0.7]
    advantages, _ = gae_advantages(token_rewards, torch.zeros(3, 3), mask, 1.0, 1.0)
    close(advantages[0], [0.4, 0.5, 0.7])


# --- whitening -------------------------------------------------------------------------------------------

def test_masked_whiten_real_tokens_only() -> None:
    # real values 1, 2, 3, 4, 5: mean 3, Bessel variance (4 + 1 + 0 + 1 + 4) / 4 = 2.5
    values = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 5.0, -50.0, math.nan]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    whitened = masked_whiten(values, mask)
    s = math.sqrt(2.5)
    close(whitened, [[-2 / s, -1 / s, 0.0, 0.0], [1 / s, 2 / s, 0.0, 0.0]], atol=1e-6)
    real = whitened[mask.bool()]
    assert abs(float(real.mean())) < 1e-6 and abs(float(real.std()) - 1.0) < 1e-6
    # shift_mean=False: scaled only, the mean 3 is added back
    unshifted = masked_whiten(values, mask, shift_mean=False)
    close(unshifted, [[3 - 2 / s, 3 - 1 / s, 3.0, 0.0], [3 + 1 / s, 3 + 2 / s, 0.0, 0.0]], atol=1e-6)


def test_masked_whiten_degenerate_batches_stay_finite() -> None:
    # one real token: (x - mean) = 0 -> 0; no real token at all -> all zeros (no 0/0)
    assert masked_whiten(torch.tensor([[4.0, 9.0]]), torch.tensor([[1, 0]])).tolist() == [[0.0, 0.0]]
    assert masked_whiten(torch.tensor([[4.0, 9.0]]), torch.tensor([[0, 0]])).tolist() == [[0.0, 0.0]]


# --- value loss ------------------------------------------------------------------------------------------

# old = 1, c = 0.2, so V is clipped into [0.8, 1.2]. Tokens (V, R):
#  a (1.5, 2.0): above; (1.5-2)^2 = 0.25 < (1.2-2)^2 = 0.64 -> clipped, loss 0.32, grad 0 (clamp saturated)
#  b (1.5, 0.0): above; (1.5)^2 = 2.25 > (1.2)^2 = 1.44 -> unclipped, loss 1.125, grad V - R = 1.5
#  c (0.5, 0.0): below; (0.5)^2 = 0.25 < (0.8)^2 = 0.64 -> clipped, loss 0.32, grad 0
#  d (0.5, 2.0): below; (-1.5)^2 = 2.25 > (-1.2)^2 = 1.44 -> unclipped, loss 1.125, grad -1.5
#  e (1.1, 0.0): inside; both terms 1.21 -> not clipped, loss 0.605, grad 1.1
#  f padding (V = 9, R = -3): loss 0, grad 0
VALUES = [[1.5, 1.5, 0.5, 0.5, 1.1, 9.0]]
RETURNS = [[2.0, 0.0, 0.0, 2.0, 0.0, -3.0]]
MASK = [[1, 1, 1, 1, 1, 0]]


def _value_loss(clip_range):
    values = torch.tensor(VALUES, requires_grad=True)
    per_token, clipped = value_loss(values, torch.ones(1, 6), torch.tensor(RETURNS), torch.tensor(MASK), clip_range)
    per_token.sum().backward()
    return per_token.detach(), clipped, values.grad


def test_value_loss_clipped_both_sides() -> None:
    per_token, clipped, grad = _value_loss(0.2)
    close(per_token, [[0.32, 1.125, 0.32, 1.125, 0.605, 0.0]])
    assert clipped.tolist() == [[True, False, True, False, False, False]]
    close(grad, [[0.0, 1.5, 0.0, -1.5, 1.1, 0.0]])


def test_value_loss_unclipped() -> None:
    # 0.5 (V - R)^2 = [0.125, 1.125, 0.125, 1.125, 0.605, 0]; gradient V - R
    per_token, clipped, grad = _value_loss(None)
    close(per_token, [[0.125, 1.125, 0.125, 1.125, 0.605, 0.0]])
    assert not clipped.any()
    close(grad, [[-0.5, 1.5, 0.5, -1.5, 1.1, 0.0]])


@pytest.mark.parametrize("clip_range", [0.2, None])
def test_value_loss_dtype_and_shape(clip_range) -> None:
    per_token, clipped, _ = _value_loss(clip_range)
    assert per_token.shape == (1, 6) and per_token.dtype == torch.float32 and clipped.dtype == torch.bool


def test_gae_steps_over_environment_tokens_of_an_episode():
    """An episode's environment tokens (mask 0 inside the row) are not time steps: A and V are carried
    across them. Tokens a, env, b; reward 1 on b; V = 0.25, (9 at env: ignored), 0.5; lam = 1.
    gamma = 1: A_b = 1 - 0.5 = 0.5, A_a = 1 - 0.25 = 0.75; gamma = 0.5 (one step from a to b, the env token
    costs no discount): A_a = 0.5 * 1 - 0.25 = 0.25."""
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.25, 9.0, 0.5]])
    for gamma, expected in ((1.0, [0.75, 0.0, 0.5]), (0.5, [0.25, 0.0, 0.5])):
        advantages, returns = gae_advantages(rewards, values, mask, gamma, 1.0)
        torch.testing.assert_close(advantages, torch.tensor([expected]), rtol=0, atol=1e-6)
        torch.testing.assert_close(returns, torch.tensor([[expected[0] + 0.25, 0.0, 1.0]]), rtol=0, atol=1e-6)
