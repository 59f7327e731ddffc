"""train_step for every member of the family: the step does not depend on the micro-batch size for any
objective x aggregation (global normaliser), token_mean and constant with mu = 1, beta = 0 are plain REINFORCE
with their own normaliser, and per-token advantages [B, C] (GAE) go through micro-batching and column trimming.
Tiny random Llama and helpers from test_update.py; SGD(lr=1), so a parameter's change is minus its gradient."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from rlvr.algorithms.loss import LossSpec
from rlvr.algorithms.objectives import ClipRange
from rlvr.model.logprobs import batched_logprobs
from rlvr.training.update import UpdateSettings
from rlvr.types import TrainBatch
from test_update import (
    ADVANTAGES,
    LENGTHS,
    TEMPERATURE,
    deltas,
    make_batch,
    naive_logprobs,
    perturbed,
    step,
    tiny_llama,
)

torch.set_num_threads(1)

CLIP_HIGHER = ClipRange(low=0.2, high=0.28, dual_c=3.0)
# the batch of test_update.make_batch: A = [1, -0.5, 0.25, 0.5], |o_i| = [6, 3, 1, 4] -> 14 real tokens, C = 6
TOKENS = sum(LENGTHS)
assert TOKENS == 14
# sum_i A_i |o_i| = 1*6 - 0.5*3 + 0.25*1 + 0.5*4 = 6 - 1.5 + 0.25 + 2 = 6.75
SUM_A_TOKENS = 6.75


def settings(objective: str, aggregation: str, micro_batch_size: int, beta: float = 0.0, kl: str = "k3",
             entropy_coef: float = 0.0, clip: ClipRange = CLIP_HIGHER, max_length: int = 8) -> UpdateSettings:
    spec = LossSpec(objective, clip, aggregation, kl, beta, entropy_coef)
    return UpdateSettings(spec, temperature=TEMPERATURE, micro_batch_size=micro_batch_size, max_grad_norm=1e9,
                          max_length=max_length)


def near_batch(model) -> TrainBatch:
    """make_batch with a reference, and an old policy close enough (scale 0.03) that ratios fall on both sides of
    the clip-higher range [0.8, 1.28]: some are clipped (e.g. 1.8 with A > 0), some only inside thanks to 0.28."""
    batch = make_batch(model, with_ref=True, with_old=False)
    old = batched_logprobs(perturbed(model, seed=11, scale=0.03), batch.prompt_ids, batch.prompt_mask,
                           batch.prompt_index, batch.completion_ids, batch.completion_mask, TEMPERATURE, 4)
    return dataclasses.replace(batch, old_logprobs=old)


def assert_same_params(a, b, atol: float = 1e-5) -> None:
    other = dict(b.named_parameters())
    for name, p in a.named_parameters():
        torch.testing.assert_close(p, other[name], rtol=0, atol=atol, msg=name)


def max_move(model, policy) -> float:
    return float(max(d.abs().max() for d in deltas(model, policy).values()))


# --- micro-batch invariance, every objective x aggregation, mu > 1 ------------------------------------------------
INVARIANCE = [  # (objective, aggregation, kl estimator, beta, entropy_coef)
    ("ppo_clip", "sequence_mean", "k3", 0.04, 0.0),
    ("ppo_clip", "token_mean", "k1", 0.04, 0.01),
    ("ppo_clip", "constant", "k2", 0.04, 0.01),
    ("dual_clip", "sequence_mean", "k2", 0.04, 0.01),
    ("dual_clip", "token_mean", "k3", 0.0, 0.0),
    ("dual_clip", "constant", "k1", 0.04, 0.0),
    ("gspo", "sequence_mean", "k3", 0.04, 0.01),
    ("cispo", "sequence_mean", "k1", 0.0, 0.01),
    ("cispo", "token_mean", "k3", 0.04, 0.01),
    ("cispo", "constant", "k2", 0.04, 0.0),
]


@pytest.mark.parametrize("objective, aggregation, kl, beta, entropy_coef", INVARIANCE,
                         ids=[f"{c[0]}-{c[1]}" for c in INVARIANCE])
def test_micro_batch_size_does_not_change_the_step(objective, aggregation, kl, beta, entropy_coef) -> None:
    model = tiny_llama()
    batch = near_batch(model)
    runs = {m: step(model, batch, settings(objective, aggregation, m, beta, kl, entropy_coef))[:2]
            for m in (1, 2, 4)}
    full, full_stats = runs[4]
    assert max_move(model, full) > 1e-3  # the step did something
    assert full_stats.clip_fraction > 0  # mu > 1: ratios away from 1, a clip bound (or CISPO's cap) binds
    if beta > 0:
        assert full_stats.kl != 0.0  # the reference differs from the policy: the KL term is live
    for m in (1, 2):
        policy, stats = runs[m]
        assert_same_params(policy, full)
        for key in ("loss", "policy_loss", "kl", "entropy", "clip_fraction", "grad_norm"):
            assert getattr(stats, key) == pytest.approx(getattr(full_stats, key), rel=1e-5, abs=1e-6), (m, key)


def test_dual_clip_cap_binds_and_is_micro_batch_invariant() -> None:
    # make_batch's own old policy (scale 0.3) is far away: row 1 (A = -0.5) has token ratios ~42 and ~536 > c = 3,
    # so the dual cap takes their gradient away and the step differs from plain PPO clip's
    model = tiny_llama()
    batch = make_batch(model, with_ref=True, with_old=True)
    dual = {m: step(model, batch, settings("dual_clip", "token_mean", m, 0.04))[0] for m in (1, 2, 4)}
    assert_same_params(dual[1], dual[4])
    assert_same_params(dual[2], dual[4])
    ppo = step(model, batch, settings("ppo_clip", "token_mean", 4, 0.04))[0]
    diff = max(float((deltas(model, dual[4])[n] - d).abs().max()) for n, d in deltas(model, ppo).items())
    assert diff > 1e-3


# --- mu = 1, beta = 0: REINFORCE with the aggregation's normaliser ---------------------------------------------------

def manual_reinforce_step(model, batch: TrainBatch, advantages: torch.Tensor, denominator: float):
    """loss = -sum_{i,t} A_it log pi(o_it) mask_it / denominator, with a plain concatenated forward per row."""
    manual = copy.deepcopy(model)
    logp = naive_logprobs(manual, batch.prompt_ids, batch.prompt_mask, batch.prompt_index, batch.completion_ids,
                          TEMPERATURE)
    adv = advantages if advantages.dim() == 2 else advantages[:, None]
    loss = -(adv * logp * batch.completion_mask).sum() / denominator
    loss.backward()
    torch.optim.SGD(manual.parameters(), lr=1.0).step()
    return manual


# token_mean divides by the 14 real tokens; constant by B * max_length = 4 * 8 = 32 (not by the width C = 6)
NORMALISERS = {"token_mean": 14.0, "constant": 32.0}


@pytest.mark.parametrize("aggregation", sorted(NORMALISERS))
@pytest.mark.parametrize("objective", ["ppo_clip", "dual_clip", "gspo", "cispo"])
def test_beta0_mu1_is_reinforce(objective: str, aggregation: str) -> None:
    # with old = current (detached) every ratio (token or sequence) is 1 and CISPO's weight is 1, so every
    # objective's gradient is -A_i grad log pi per real token, divided by the aggregation's normaliser
    model = tiny_llama()
    batch = make_batch(model, with_ref=False, with_old=False)
    policy, stats, _ = step(model, batch, settings(objective, aggregation, 2))
    manual = manual_reinforce_step(model, batch, torch.tensor(ADVANTAGES), NORMALISERS[aggregation])
    expected, got = deltas(model, manual), deltas(model, policy)
    assert max(float(d.abs().max()) for d in expected.values()) > 1e-3
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-6, msg=name)
    assert stats.kl == 0.0 and stats.clip_fraction == 0.0
    if objective != "cispo":
        # ratio 1: the per-token loss is -A_i, so policy_loss = -sum_i A_i |o_i| / normaliser
        #   token_mean: -6.75/14 = -0.4821429 ; constant: -6.75/32 = -0.2109375
        assert stats.policy_loss == pytest.approx(-SUM_A_TOKENS / NORMALISERS[aggregation], abs=1e-6)


def test_constant_normaliser_uses_the_generation_budget() -> None:
    # the same step with max_length 8 vs 16: the constant doubles, so every parameter moves half as far
    model = tiny_llama()
    batch = make_batch(model, with_ref=False, with_old=False)
    d8 = deltas(model, step(model, batch, settings("ppo_clip", "constant", 4, max_length=8))[0])
    d16 = deltas(model, step(model, batch, settings("ppo_clip", "constant", 4, max_length=16))[0])
    for name in d8:
        torch.testing.assert_close(d16[name], d8[name] / 2, rtol=1e-4, atol=1e-7, msg=name)


# --- per-token advantages [B, C] (as GAE produces) -------------------------------------------------------------

def per_token(advantages: torch.Tensor, mask: torch.Tensor, padding: float = 100.0) -> torch.Tensor:
    """[B] -> [B, C]: the row's advantage on its real tokens and a (finite) garbage value on padding."""
    return torch.where(mask > 0, advantages[:, None].expand_as(mask), padding)


@pytest.mark.parametrize("objective, aggregation", [("ppo_clip", "token_mean"), ("gspo", "sequence_mean"),
                                                     ("cispo", "constant"), ("dual_clip", "sequence_mean")])
def test_per_token_advantages_equal_broadcast_row_advantages(objective: str, aggregation: str) -> None:
    # mu > 1 and beta > 0: A [B] and the same A broadcast to [B, C] (garbage on padding) give the same step for
    # micro-batch sizes 1, 2, 4 (rows() trims the advantages' columns with the completion columns)
    model = tiny_llama()
    batch = near_batch(model)
    tokens = dataclasses.replace(batch, advantages=per_token(batch.advantages, batch.completion_mask))
    s = lambda m: settings(objective, aggregation, m, beta=0.04, entropy_coef=0.01)  # noqa: E731
    rows, rows_stats = step(model, batch, s(4))[:2]
    assert max_move(model, rows) > 1e-3
    for m in (1, 2, 4):
        policy, stats = step(model, tokens, s(m))[:2]
        assert_same_params(policy, rows)
        assert stats.loss == pytest.approx(rows_stats.loss, rel=1e-5, abs=1e-6)


def test_per_token_advantages_micro_batch_trims_columns() -> None:
    # micro-batch of the row with |o| = 1: rows() keeps only column 0 of completions, masks and advantages [B, C]
    model = tiny_llama()
    batch = near_batch(model)
    tokens = dataclasses.replace(batch, advantages=per_token(batch.advantages, batch.completion_mask))
    micro = tokens.rows(torch.tensor([2]))
    assert micro.completion_ids.shape == (1, 1) and micro.advantages.shape == (1, 1)
    assert micro.old_logprobs.shape == (1, 1) and micro.ref_logprobs.shape == (1, 1)
    assert micro.advantages.item() == 0.25  # row 2's advantage, not padding garbage
    micro = tokens.rows(torch.tensor([1, 3]))  # lengths 3 and 4 -> width 4
    assert micro.advantages.shape == (2, 4)
    assert micro.advantages.tolist() == [[-0.5, -0.5, -0.5, 100.0], [0.5, 0.5, 0.5, 0.5]]


@pytest.mark.parametrize("micro_batch_size", [1, 3, 4])
def test_varying_per_token_advantages_are_reinforce_by_hand(micro_batch_size: int) -> None:
    # mu = 1, beta = 0, token_mean: loss = -sum_{i,t} A_it log pi_it / 14 with A differing along each row
    model = tiny_llama()
    batch = make_batch(model, with_ref=False, with_old=False)
    adv = torch.arange(24, dtype=torch.float32).view(4, 6) / 10 - 1.0  # -1.0, -0.9, ..., 1.3
    adv = torch.where(batch.completion_mask > 0, adv, -50.0)  # garbage on padding
    tokens = dataclasses.replace(batch, advantages=adv)
    policy, stats, _ = step(model, tokens, settings("ppo_clip", "token_mean", micro_batch_size))
    manual = manual_reinforce_step(model, batch, adv, 14.0)
    expected, got = deltas(model, manual), deltas(model, policy)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-6, msg=name)
    # ratio 1: policy_loss = -sum of A over real tokens / 14
    #   row 0 (6 tokens): -1.0 - 0.9 - 0.8 - 0.7 - 0.6 - 0.5 = -4.5
    #   row 1 (3 tokens) starts at 6/10 - 1 = -0.4: -0.4 - 0.3 - 0.2 = -0.9 ; row 2 (1 token): 12/10 - 1 = 0.2
    #   row 3 (4): 18/10 - 1 = 0.8, 0.9, 1.0, 1.1 -> 3.8 ; sum -4.5 - 0.9 + 0.2 + 3.8 = -1.4 -> loss 1.4/14 = 0.1
    assert stats.policy_loss == pytest.approx(0.1, abs=1e-6)
