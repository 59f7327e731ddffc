"""The learned value function of the PPO baseline: a transformer backbone with a scalar head, and its update.

PPO (Schulman et al. 2017) needs V(s_t) for GAE (Schulman et al. 2016, see rlvr.algorithms.gae); GRPO replaces it with
the group mean. As in verl and OpenRLHF the critic is a separate copy initialised from the policy checkpoint,
with its own optimizer: it shares no weights with the policy, so the two updates do not interfere.
The forward reuses the policy's prefix-shared pass (rlvr.model.logprobs): hidden state t has seen the prompt and
completion tokens < t, which is the state V_t is defined on.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from rlvr.algorithms.gae import value_loss
from rlvr.config.run import ModelConfig
from rlvr.model import precision
from rlvr.model.load import load_model
from rlvr.model.logprobs import completion_hidden_states
from rlvr.types import length_order, row_extent


@dataclass(frozen=True)
class CriticSettings:
    lr: float
    betas: tuple[float, float]
    weight_decay: float
    max_grad_norm: float
    value_clip: float | None  # PPO value clipping range; None = plain squared error
    micro_batch_size: int


@dataclass
class CriticStats:
    value_loss: float  # sum of per-token losses / real tokens of the batch, before the step
    value_clip_fraction: float  # share of real tokens where the clipped value term was binding
    grad_norm: float  # before clipping
    explained_variance: float  # 1 - Var[R - V] / Var[R] over real tokens, V before the step; nan if Var[R] = 0


class ValueModel(nn.Module):
    """Backbone (no LM head) + Linear(hidden, 1). Its `base_model` attribute is what
    rlvr.model.logprobs.completion_hidden_states runs, so the same prefix-shared forward serves policy and critic."""

    def __init__(self, base_model: nn.Module, hidden_size: int):
        super().__init__()
        self.base_model = base_model
        # Kept in float32 whatever the backbone dtype: one output column costs nothing, and values are
        # regressed onto float32 returns.
        self.head = nn.Linear(hidden_size, 1, dtype=torch.float32)
        # Zero init: the untrained critic predicts V = 0 everywhere instead of random values that GAE would
        # turn into random advantages for the first policy steps; with V = 0 and gamma = lam = 1 the first
        # advantages are the plain returns (REINFORCE), and the head's gradient, (V - R) * h, is still
        # non-zero, so it learns from the first step (the backbone follows once the head is non-zero).
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, rows: torch.Tensor,
                completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
        """-> V [B, C] float32, V[:, t] = value of the state before completion token t (garbage past row ends)."""
        with precision.autocast(self):  # the backbone in bf16 under mixed precision; the one-column head in fp32
            states = completion_hidden_states(self, prompt_ids, prompt_mask, rows, completion_ids, completion_mask)
        return self.head(states.float()).squeeze(-1)


def micro_batches(completion_mask: torch.Tensor, rows: torch.Tensor, size: int
                  ) -> Iterator[tuple[torch.Tensor, int]]:
    """(row indices, width) per micro-batch: groups kept whole, longest first (`length_order`), each cut to
    its longest completion, since padding columns cost as much compute as real ones."""
    order = length_order(completion_mask, rows)
    for start in range(0, order.numel(), size):
        part = order[start:start + size]
        yield part, max(int(row_extent(completion_mask[part]).max()), 1)


def explained_variance(predicted: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var[R - V] / Var[R] over real tokens (OpenAI baselines' diagnostic): 1 = perfect, 0 = no better
    than a constant, < 0 = worse. nan when the returns do not vary (undefined, as in baselines)."""
    real = mask.bool()
    target, residual = returns[real].float(), (returns - predicted)[real].float()  # no float64 on MPS
    if target.numel() < 2 or float(target.var()) == 0.0:
        return float("nan")
    return float(1.0 - residual.var() / target.var())


class Critic:
    """Value model + its AdamW. `values` for GAE at rollout time, `train_step` for one critic update."""

    def __init__(self, model_config: ModelConfig, settings: CriticSettings):
        self.settings = settings
        causal_lm = load_model(model_config, trainable=True)
        # Only the backbone is kept: the LM head (49k x hidden when untied) is dropped with `causal_lm`.
        # SmolLM2 ties it to the input embedding, which the backbone holds anyway.
        self.model = ValueModel(causal_lm.base_model, causal_lm.config.hidden_size).to(model_config.device)
        precision.record_compute_dtype(self.model, precision.compute_dtype(causal_lm))  # as the policy
        self.model.eval()  # no dropout, as for the policy (rlvr.model.load.load_model)
        del causal_lm
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=settings.lr, betas=settings.betas,
                                           weight_decay=settings.weight_decay)

    @torch.no_grad()
    def values(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, rows: torch.Tensor,
               completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
        """V [B, C] float32 in the original row order, 0 past each row's end, in micro-batches."""
        out = torch.zeros(completion_ids.shape, dtype=torch.float32, device=completion_ids.device)
        for part, width in micro_batches(completion_mask, rows, self.settings.micro_batch_size):
            out[part, :width] = self.model(prompt_ids, prompt_mask, rows[part], completion_ids[part, :width],
                                           completion_mask[part, :width])
        return torch.where(completion_mask.bool(), out, 0.0)

    def train_step(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, rows: torch.Tensor,
                   completion_ids: torch.Tensor, completion_mask: torch.Tensor, returns: torch.Tensor,
                   old_values: torch.Tensor | None) -> CriticStats:
        """Gradient accumulation over micro-batches, then one clipped AdamW step on the value loss.

        Each micro-batch's summed per-token loss is divided by the real-token count of the whole batch (a
        global token mean, as verl's critic), so the accumulated gradient equals the full-batch gradient
        whatever the micro-batch size. `old_values` are the values GAE used (the clip's anchor); None means
        the current critic's own (mu = 1: nothing to clip against, as rlvr.training.update does for the ratio).
        """
        settings = self.settings
        token_total = completion_mask.sum().clamp(min=1).item()
        predicted = torch.zeros(completion_ids.shape, dtype=torch.float32, device=completion_ids.device)
        loss_total, clipped_total = 0.0, 0
        for part, width in micro_batches(completion_mask, rows, settings.micro_batch_size):
            mask = completion_mask[part, :width]
            values = self.model(prompt_ids, prompt_mask, rows[part], completion_ids[part, :width], mask)
            anchor = values.detach() if old_values is None else old_values[part, :width]
            per_token, clipped = value_loss(values, anchor, returns[part, :width], mask, settings.value_clip)
            loss = per_token.sum() / token_total
            loss.backward()
            loss_total += loss.item()
            clipped_total += int(clipped.sum())
            predicted[part, :width] = values.detach()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), settings.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return CriticStats(value_loss=loss_total, value_clip_fraction=clipped_total / token_total,
                           grad_norm=float(grad_norm),
                           explained_variance=explained_variance(predicted, returns, completion_mask))

    def state_dict(self) -> dict:
        """Model and optimizer state: resuming from it continues training exactly (AdamW moments included)."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
