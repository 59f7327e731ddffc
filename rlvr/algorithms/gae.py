"""PPO baseline math: token rewards, GAE, advantage whitening and the clipped value loss. Pure tensor functions.

The PPO baseline the GRPO seeds are compared against (PPO: Schulman et al. 2017, "Proximal Policy Optimization
Algorithms"; RLHF placement of rewards and KL: Ouyang et al. 2022, InstructGPT, as verl and OpenRLHF do it).
Shapes: B sequences, C completion tokens, right-padded; `mask` [B, C] is 1 (or True) on generated tokens.
`values[b, t]` is V(state before completion token t), i.e. the critic's estimate having seen the prompt and
completion tokens < t. Every output is 0 at padding, and padding inputs never reach real positions.
"""
from __future__ import annotations

import torch


def outcome_token_rewards(rewards: torch.Tensor, mask: torch.Tensor,
                          kl_penalty: torch.Tensor | None = None) -> torch.Tensor:
    """rewards [B] -> per-token rewards [B, C]: r_i on row i's last real token, minus kl_penalty on every real token.

    The verifier scores the whole completion, so its reward arrives with the last action (the EOS, or the last
    token of a truncated completion). `kl_penalty` [B, C] is beta * KL_t, already scaled by the caller: in
    PPO-RLHF the KL to the reference is a per-token reward, not a loss term (InstructGPT eq. 2; verl, OpenRLHF).
    A fully masked row gets all zeros.
    """
    real = mask.bool()
    columns = torch.arange(1, real.shape[1] + 1, device=real.device)
    last = (real.long() * columns).argmax(dim=1, keepdim=True)  # index of the row's last real token
    outcome = torch.zeros(real.shape, dtype=torch.float32, device=real.device)
    outcome.scatter_(1, last, rewards.to(torch.float32).unsqueeze(1))
    if kl_penalty is not None:
        # where, not a product: a non-finite penalty at padding must not become NaN there
        outcome = outcome - torch.where(real, kl_penalty.to(torch.float32), 0.0)
    return torch.where(real, outcome, 0.0)


@torch.no_grad()
def gae_advantages(token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
                   lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016, "High-Dimensional Continuous Control Using
    Generalized Advantage Estimation", eq. 16) -> (advantages [B, C], returns [B, C]).

      delta_t = r_t + gamma * V_{t+1} - V_t,   A_t = sum_l (gamma * lam)^l delta_{t+l},   R_t = A_t + V_t.

    The episode ends after the last real token (EOS or truncation), so V after it is 0: a truncated
    completion is treated as terminal, like verl and OpenRLHF, because the verifier has already scored it.
    lam = 1 gives the Monte Carlo return minus V (unbiased, high variance); lam = 0 the one-step TD error.
    Without gradient: advantages and returns are fixed targets for the policy and critic updates (PPO).
    Values and rewards where mask is 0 are ignored and the outputs there are 0 (right padding, or an episode's
    environment tokens, which the recursion steps over).
    """
    real = mask.bool()
    rewards = torch.where(real, token_rewards.float(), 0.0)
    state_values = torch.where(real, values.float(), 0.0)
    running = torch.zeros_like(rewards[:, 0])  # A_{t+1}; 0 past the end of every row
    next_value = torch.zeros_like(running)  # V_{t+1}; 0 past the end (terminal state)
    advantages = []
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - state_values[:, t]
        # Positions that are not actions are skipped, A and V carried across them: right padding (where both are
        # still 0) and, in multi-turn episodes, the environment's tokens between two model turns: the
        # next state of a turn's last token is the first token of the model's next turn, not a terminal state.
        running = torch.where(real[:, t], delta + gamma * lam * running, running)
        advantages.append(torch.where(real[:, t], running, 0.0))
        next_value = torch.where(real[:, t], state_values[:, t], next_value)
    advantages_t = torch.stack(advantages[::-1], dim=1)
    returns = torch.where(real, advantages_t + state_values, 0.0)
    return advantages_t, returns


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8,
                  shift_mean: bool = True) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) over the real tokens of the whole batch; 0 at padding.

    PPO implementations normalise advantages per batch (OpenAI baselines, TRL and verl `masked_whiten`) so
    the policy step size does not depend on the reward scale. The variance is Bessel-corrected, as in TRL and
    verl. shift_mean=False adds the mean back: scale only, keeping the sign of the average advantage.
    """
    real = mask.bool()
    x = torch.where(real, values.float(), 0.0)
    count = real.sum()
    mean = x.sum() / count.clamp(min=1)
    var = torch.where(real, (x - mean) ** 2, 0.0).sum() / (count - 1).clamp(min=1)
    whitened = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        whitened = whitened + mean
    return torch.where(real, whitened, 0.0)


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               clip_range: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token critic loss [B, C] (0 at padding) and [B, C] bool where the clipped term was the larger.

    Clipped (PPO2 in OpenAI baselines; verl's critic `cliprange_value`):
      0.5 * max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2).
    Taking the max is pessimistic: once V has moved more than c from the value the advantages were
    computed with, the loss stops rewarding further movement (zero gradient through the clipped term), the
    critic's analogue of the policy ratio clip. clip_range None gives the plain 0.5 * (V - R)^2.
    """
    real = mask.bool()
    unclipped = (values - returns) ** 2
    if clip_range is None:
        return torch.where(real, 0.5 * unclipped, 0.0), torch.zeros_like(real)
    clipped_values = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
    clipped = (clipped_values - returns) ** 2
    per_token = 0.5 * torch.maximum(unclipped, clipped)
    return torch.where(real, per_token, 0.0), real & (clipped > unclipped)
