"""The PPO critic (rlvr.training.critic) on the tiny random Llama: zero initial values, prefix-shared values equal the
plain concatenated forward, the accumulated gradient does not depend on the micro-batch size, training
fits fixed returns, and state_dict resumes exactly."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from rlvr.config.run import ModelConfig
from rlvr.training.critic import Critic, CriticSettings

torch.set_num_threads(1)

SETTINGS = CriticSettings(lr=1e-2, betas=(0.9, 0.99), weight_decay=0.0, max_grad_norm=1e6, value_clip=None,
                          micro_batch_size=2)
ROWS = [1, 0, 1, 2]  # completion row -> prompt row
LENGTHS = [5, 3, 1, 4]  # completion lengths; C = 5
RETURNS = [1.0, -1.0, 0.5, 2.0]  # one return per row, broadcast over its tokens


@pytest.fixture(scope="module")
def model_config(tiny_model_dir) -> ModelConfig:
    return ModelConfig(name_or_path=str(tiny_model_dir))


def make_critic(model_config: ModelConfig, head_seed: int | None = None, **changes) -> Critic:
    """A fresh critic; head_seed gives the head random weights (a zero head has no backbone gradient)."""
    critic = Critic(model_config, dataclasses.replace(SETTINGS, **changes))
    if head_seed is not None:
        g = torch.Generator().manual_seed(head_seed)
        with torch.no_grad():
            critic.model.head.weight.copy_(torch.randn(critic.model.head.weight.shape, generator=g))
            critic.model.head.bias.fill_(0.1)
    return critic


def batch(vocab: int = 100):
    """3 prompts of length 6, left-padded by 0, 2 and 5; 4 completions (rows ROWS) of lengths LENGTHS."""
    g = torch.Generator().manual_seed(1)
    prompt_ids = torch.randint(0, vocab, (3, 6), generator=g)
    prompt_mask = torch.ones(3, 6, dtype=torch.long)
    prompt_mask[1, :2] = 0
    prompt_mask[2, :5] = 0
    prompt_ids = prompt_ids.masked_fill(prompt_mask == 0, 0)
    completion_ids = torch.randint(0, vocab, (4, 5), generator=g)
    completion_mask = (torch.arange(5) < torch.tensor(LENGTHS)[:, None]).long()
    return prompt_ids, prompt_mask, torch.tensor(ROWS), completion_ids, completion_mask


def returns_for(completion_mask: torch.Tensor) -> torch.Tensor:
    return torch.tensor(RETURNS)[:, None] * completion_mask


def naive_values(critic: Critic, prompt_ids, prompt_mask, rows, completion_ids) -> torch.Tensor:
    """Per row: its prompt without padding + its completion in one plain forward (no prefix sharing);
    V_t is the head on the hidden state of the token before completion token t."""
    out = []
    with torch.no_grad():
        for b, r in enumerate(rows.tolist()):
            prompt = prompt_ids[r][prompt_mask[r].bool()]
            ids = torch.cat([prompt, completion_ids[b]])[None]
            states = critic.model.base_model(input_ids=ids).last_hidden_state[0]
            out.append(critic.model.head(states[len(prompt) - 1: len(prompt) - 1 + completion_ids.shape[1]]))
    return torch.stack(out).squeeze(-1)


def test_initial_values_are_zero_and_lm_head_is_dropped(model_config) -> None:
    critic = make_critic(model_config)
    values = critic.values(*batch())
    assert values.shape == (4, 5) and values.dtype == torch.float32
    assert torch.equal(values, torch.zeros(4, 5))
    assert not any("lm_head" in name for name, _ in critic.model.named_modules())
    assert all(p.requires_grad for p in critic.model.parameters())


def test_values_equal_plain_forward_and_are_zero_past_row_ends(model_config) -> None:
    critic = make_critic(model_config, head_seed=0)
    prompt_ids, prompt_mask, rows, completion_ids, completion_mask = batch()
    values = critic.values(prompt_ids, prompt_mask, rows, completion_ids, completion_mask)
    real = completion_mask.bool()
    assert (values[~real] == 0).all()
    assert (values[real].abs() > 1e-4).all()  # a random head gives non-zero values on real tokens
    slow = naive_values(critic, prompt_ids, prompt_mask, rows, completion_ids)
    torch.testing.assert_close(values, slow * completion_mask, rtol=0, atol=1e-5)
    # micro-batching changes nothing
    one = dataclasses.replace(SETTINGS, micro_batch_size=1)
    critic.settings = one
    torch.testing.assert_close(critic.values(prompt_ids, prompt_mask, rows, completion_ids, completion_mask),
                               values, rtol=0, atol=1e-5)


def sgd_step_deltas(model_config, micro_batch_size: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Parameter change of one train_step with SGD(lr=1): minus the accumulated gradient."""
    critic = make_critic(model_config, head_seed=0, micro_batch_size=micro_batch_size)
    critic.optimizer = torch.optim.SGD(critic.model.parameters(), lr=1.0)
    data = batch()
    values = critic.values(*data)
    before = {n: p.detach().clone() for n, p in critic.model.named_parameters()}
    critic.train_step(*data, returns_for(data[-1]), old_values=values)
    return {n: p.detach() - before[n] for n, p in critic.model.named_parameters()}, values


def test_train_step_gradient_is_micro_batch_invariant(model_config) -> None:
    full, values = sgd_step_deltas(model_config, 4)
    mask = batch()[-1]
    # Hand check on the head bias: L = sum_t 0.5 (V_t - R_t)^2 / N over real tokens, dL/db = sum(V - R) / N
    # (N = 5 + 3 + 1 + 4 = 13), so SGD(lr=1) moves the bias by -sum(V - R) / 13.
    expected_bias_step = -((values - returns_for(mask)) * mask).sum() / 13
    torch.testing.assert_close(full["head.bias"], expected_bias_step.reshape(1), rtol=1e-5, atol=1e-7)
    moved = [n for n, d in full.items() if d.abs().max() > 0]
    assert len(moved) == len(full)  # every parameter, the shared prompt's path included, got gradient
    for size in (1, 2):
        deltas, _ = sgd_step_deltas(model_config, size)
        for name, delta in deltas.items():
            # float32 summation order differs per micro-batch size: compare at the tensor's own scale
            # (a per-micro-batch normaliser would be off by a factor of order 1, not 1e-5)
            error = (delta - full[name]).abs().max()
            assert error <= 1e-5 * full[name].abs().max(), f"{name} (micro {size}): {error}"


def test_first_step_stats(model_config) -> None:
    # V = 0 at init: loss = 0.5 * sum(R^2 over real tokens) / 13
    #   = 0.5 * (5 * 1 + 3 * 1 + 1 * 0.25 + 4 * 4) / 13 = 0.5 * 24.25 / 13 = 0.9326923
    # explained variance = 1 - Var[R - 0] / Var[R] = 0
    critic = make_critic(model_config)
    data = batch()
    stats = critic.train_step(*data, returns_for(data[-1]), old_values=None)
    assert stats.value_loss == pytest.approx(0.9326923, abs=1e-6)
    assert stats.explained_variance == pytest.approx(0.0, abs=1e-9)
    assert stats.value_clip_fraction == 0.0 and stats.grad_norm > 0
    # the zero head still learns on the first step (its gradient is (V - R) h, not 0)
    assert critic.model.head.weight.abs().max() > 0


def test_value_clip_binds_and_stops_the_gradient(model_config) -> None:
    # old values 5, clip 0.1: the clipped value is 4.9 whatever V = 0 does, (4.9 - R)^2 > (0 - R)^2 for
    # R in [-1, 2], so the clipped term wins on every real token and its gradient through the clamp is 0.
    critic = make_critic(model_config, value_clip=0.1)
    critic.optimizer = torch.optim.SGD(critic.model.parameters(), lr=1.0)
    data = batch()
    before = copy.deepcopy(critic.model.state_dict())
    stats = critic.train_step(*data, returns_for(data[-1]), old_values=torch.full((4, 5), 5.0))
    assert stats.value_clip_fraction == 1.0
    assert stats.grad_norm == 0.0
    for name, tensor in critic.model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_training_reduces_value_loss(model_config) -> None:
    critic = make_critic(model_config)
    data = batch()
    returns = returns_for(data[-1])
    losses = [critic.train_step(*data, returns, old_values=None).value_loss for _ in range(30)]
    assert losses[-1] < 0.2 * losses[0], losses
    values = critic.values(*data)
    final_loss = (0.5 * (values - returns) ** 2 * data[-1]).sum() / data[-1].sum()
    assert final_loss < 0.2 * losses[0]


def test_state_dict_resumes_exactly(model_config) -> None:
    data = batch()
    returns = returns_for(data[-1])
    original = make_critic(model_config)
    original.train_step(*data, returns, old_values=None)  # creates AdamW moments and moves the weights
    state = copy.deepcopy(original.state_dict())
    assert not any(key.startswith("lm_head") for key in state["model"])
    assert state["optimizer"]["state"]  # moments are saved
    resumed = make_critic(model_config)
    resumed.load_state_dict(state)
    for name, tensor in original.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name
    a = original.train_step(*data, returns, old_values=None)
    b = resumed.train_step(*data, returns, old_values=None)
    assert a.value_loss == b.value_loss
    for name, tensor in original.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name
    # and a critic that was not resumed differs after the same step (the check above can fail)
    fresh = make_critic(model_config)
    fresh.train_step(*data, returns, old_values=None)
    assert not torch.equal(fresh.model.head.weight, original.model.head.weight)
