"""Per-token GRPO objective (PPO clip), k3 KL, sequence-mean aggregation and the composed loss, against numbers
derived by hand. The other objectives, estimators and aggregations are in test_family_*.py."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from rlvr.algorithms.loss import LossSpec, kl_k3, policy_loss, sequence_mean
from rlvr.algorithms.objectives import ClipRange
from rlvr.algorithms.objectives import ppo_clip as _ppo_clip

torch.set_num_threads(1)

L = math.log
TOL = dict(rtol=0, atol=1e-6)


def ppo_clip(logp, old, adv, eps):
    out = _ppo_clip(logp, old, adv, torch.ones_like(logp), ClipRange(eps, eps))
    return out.loss, out.clipped


def grpo_loss(logp, old, ref, adv, mask, clip_epsilon=0.2, beta=0.04, num_sequences=None):
    """The GRPO member of the family: PPO clip, k3 in the loss, sequence-mean over the (global) sequence count."""
    spec = LossSpec("ppo_clip", ClipRange(clip_epsilon, clip_epsilon), "sequence_mean", "k3", beta, 0.0)
    return policy_loss(logp, old, ref, adv, mask, spec, float(num_sequences or logp.shape[0]))


# --- kl_k3 ----------------------------------------------------------------------------------------

def test_kl_k3_by_hand() -> None:
    logp = torch.tensor([L(0.5), L(0.25)])
    ref = torch.tensor([L(0.25), L(0.5)])
    # token 0: d = ref - logp = log 0.5 = -0.6931472 -> exp(d) - d - 1 = 0.5 + 0.6931472 - 1 = 0.1931472
    # token 1: d = log 2 = 0.6931472 -> 2 - 0.6931472 - 1 = 0.3068528
    torch.testing.assert_close(kl_k3(logp, ref), torch.tensor([0.1931472, 0.3068528]), **TOL)


def test_kl_k3_gradient_by_hand() -> None:
    # d/dlogp [exp(ref - logp) - (ref - logp) - 1] = -exp(d) + 1
    # token 0: d = log 0.5 -> 1 - 0.5 = 0.5 ; token 1: d = log 2 -> 1 - 2 = -1
    logp = torch.tensor([L(0.5), L(0.25)], requires_grad=True)
    kl_k3(logp, torch.tensor([L(0.25), L(0.5)])).sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([0.5, -1.0]), **TOL)


def test_kl_k3_zero_when_equal_and_nonnegative() -> None:
    logp = torch.log_softmax(torch.randn(4, 16, generator=torch.Generator().manual_seed(0)), dim=-1)
    assert torch.equal(kl_k3(logp, logp), torch.zeros_like(logp))
    ref = torch.log_softmax(torch.randn(4, 16, generator=torch.Generator().manual_seed(1)) * 3, dim=-1)
    kl = kl_k3(logp, ref)
    assert (kl >= 0).all()
    assert (kl > 0).all()  # the log-probs differ everywhere, so every term is strictly positive


# --- ppo_clip ---------------------------------------------------------------------------------------

# clip_epsilon 0.2 -> clip range [0.8, 1.2]. Each case: (ratio, advantage, loss, clip binding, d loss / d logp)
#   loss = -min(rho*A, clip(rho)*A); gradient of -rho*A w.r.t. logp is -rho*A (d rho/d logp = rho), 0 when clipped
CASES = [
    # inside the range: min(1.1*2, 1.1*2) = 2.2 -> loss -2.2, grad -2.2
    (1.1, 2.0, -2.2, False, -2.2),
    # rho 1.5 > 1.2, A = +1: min(1.5, 1.2) = 1.2 (clipped) -> loss -1.2, grad 0
    (1.5, 1.0, -1.2, True, 0.0),
    # rho 1.5 > 1.2, A = -1: min(-1.5, -1.2) = -1.5 (unclipped) -> loss 1.5, grad -rho*A = 1.5
    (1.5, -1.0, 1.5, False, 1.5),
    # rho 0.5 < 0.8, A = +1: min(0.5, 0.8) = 0.5 (unclipped) -> loss -0.5, grad -0.5
    (0.5, 1.0, -0.5, False, -0.5),
    # rho 0.5 < 0.8, A = -1: min(-0.5, -0.8) = -0.8 (clipped) -> loss 0.8, grad 0
    (0.5, -1.0, 0.8, True, 0.0),
    # rho 1 (mu = 1), A = 3: loss -3, grad -3 (both branches tie; their half-gradients must add up to the whole)
    (1.0, 3.0, -3.0, False, -3.0),
]


def _case_tensors(cases):
    old = torch.log(torch.tensor([0.3] * len(cases)))
    logp = (old + torch.log(torch.tensor([c[0] for c in cases]))).requires_grad_(True)
    adv = torch.tensor([c[1] for c in cases])
    return logp, old, adv


@pytest.mark.parametrize("case", CASES, ids=["inside", "high-pos", "high-neg", "low-pos", "low-neg", "ratio1"])
def test_ppo_clip_each_region(case) -> None:
    rho, adv, loss, binding, grad = case
    logp, old, advantages = _case_tensors([case])
    logp2d, old2d = logp.view(1, 1), old.view(1, 1)  # B = 1 sequence, C = 1 token, advantages [B]
    per_token, clipped = ppo_clip(logp2d, old2d, advantages, 0.2)
    assert per_token.shape == (1, 1) and clipped.shape == (1, 1)
    torch.testing.assert_close(per_token, torch.tensor([[loss]]), rtol=0, atol=1e-5)
    assert clipped.item() is binding
    per_token.sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([grad]), rtol=0, atol=1e-5)


def test_ppo_clip_all_regions_at_once_with_token_advantages() -> None:
    # the same cases laid out as one sequence of 6 tokens, advantages given per token [B, C]
    logp, old, adv = _case_tensors(CASES)
    per_token, clipped = ppo_clip(logp[None], old[None], adv[None], 0.2)
    torch.testing.assert_close(per_token[0], torch.tensor([c[2] for c in CASES]), rtol=0, atol=1e-5)
    assert clipped[0].tolist() == [c[3] for c in CASES]
    per_token.sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([c[4] for c in CASES]), rtol=0, atol=1e-5)


def test_ppo_clip_sequence_advantage_broadcasts_over_tokens() -> None:
    # A [B] = [2, -1] broadcast over 3 tokens equals A [B, C] repeated; ratio 1 everywhere -> loss = -A
    logp = torch.full((2, 3), L(0.4))
    per_token, clipped = ppo_clip(logp, logp, torch.tensor([2.0, -1.0]), 0.2)
    torch.testing.assert_close(per_token, torch.tensor([[-2.0] * 3, [1.0] * 3]), **TOL)
    assert not clipped.any()


# --- sequence_mean ----------------------------------------------------------------------------------

VALUES = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [2.0, 2.0, 2.0]])
MASK = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0], [0, 0, 1]])
# row means over own tokens: (1+2)/2 = 1.5 ; (4+5+6)/3 = 5 ; fully masked -> 0 ; 2/1 = 2
# mean over all 4 sequences (the masked one still counts): (1.5 + 5 + 0 + 2)/4 = 8.5/4 = 2.125


def test_sequence_mean_by_hand() -> None:
    torch.testing.assert_close(sequence_mean(VALUES, MASK), torch.tensor(2.125), **TOL)
    # float mask gives the same
    torch.testing.assert_close(sequence_mean(VALUES, MASK.float()), torch.tensor(2.125), **TOL)


def test_sequence_mean_fully_masked_batch_is_zero_not_nan() -> None:
    out = sequence_mean(VALUES, torch.zeros_like(MASK))
    assert out.item() == 0.0


@pytest.mark.parametrize("size", [1, 2, 3])
def test_sequence_mean_micro_batches_sum_to_full_batch(size: int) -> None:
    # each micro-batch divides by the global count 4: e.g. size 2 -> (1.5+5)/4 + (0+2)/4 = 1.625 + 0.5 = 2.125
    total = sum(sequence_mean(VALUES[i:i + size], MASK[i:i + size], num_sequences=4) for i in range(0, 4, size))
    torch.testing.assert_close(total, torch.tensor(2.125), **TOL)


# --- grpo_loss ----------------------------------------------------------------------------------------

def _two_rows():
    # row 0: A = 1, ratio 1 on both tokens, ref [log .25, log .5] vs logp [log .5, log .5]; mask [1, 1]
    # row 1: A = 0.5, ratio 2 on both tokens (old log .25, logp log .5); mask [1, 0]; ref [log .5, log .01]
    logp = torch.tensor([[L(0.5), L(0.5)], [L(0.5), L(0.5)]], requires_grad=True)
    old = torch.tensor([[L(0.5), L(0.5)], [L(0.25), L(0.25)]])
    ref = torch.tensor([[L(0.25), L(0.5)], [L(0.5), L(0.01)]])
    adv = torch.tensor([1.0, 0.5])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    return logp, old, ref, adv, mask


def test_grpo_loss_by_hand() -> None:
    logp, old, ref, adv, mask = _two_rows()
    terms = grpo_loss(logp, old, ref, adv, mask, clip_epsilon=0.2, beta=0.1)
    # policy, row 0: -1*1 per token -> mean -1
    #         row 1: rho 2 > 1.2 with A > 0 -> clipped: -min(2*0.5, 1.2*0.5) = -0.6 on the one real token
    #         policy_loss = (-1 - 0.6)/2 = -0.8
    # kl, row 0: [0.1931472 (d = log .5), 0] -> mean 0.0965736 ; row 1: d = 0 on its real token -> 0
    #         kl = (0.0965736 + 0)/2 = 0.0482868
    # loss = -0.8 + 0.1*0.0482868 = -0.7951713
    # clipped tokens: binding on row 1's two tokens, but only 1 is real -> 1 (of 3 real tokens)
    torch.testing.assert_close(terms.policy_loss, torch.tensor(-0.8), **TOL)
    torch.testing.assert_close(terms.kl, torch.tensor(0.0482868), **TOL)
    torch.testing.assert_close(terms.loss, torch.tensor(-0.7951713), **TOL)
    assert terms.clipped_tokens.item() == 1
    assert not terms.policy_loss.requires_grad and not terms.kl.requires_grad
    terms.loss.backward()
    # d loss / d logp = 1/B * 1/|o_i| * [d policy_t + beta * d kl_t]
    # row 0 token 0: 1/2*1/2*(-1 + 0.1*0.5) = -0.2375 ; token 1: 1/4*(-1 + 0.1*0) = -0.25
    # row 1 token 0: clipped -> policy grad 0; kl grad 1 - exp(0) = 0 -> 0 ; token 1 masked -> 0
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.2375, -0.25], [0.0, 0.0]]), **TOL)


def test_grpo_loss_without_reference_or_beta() -> None:
    logp, old, ref, adv, mask = _two_rows()
    for r, beta in [(None, 0.1), (ref, 0.0)]:
        terms = grpo_loss(logp, old, r, adv, mask, clip_epsilon=0.2, beta=beta)
        # policy only (see above): -0.8 ; kl reported as 0
        torch.testing.assert_close(terms.loss, torch.tensor(-0.8), **TOL)
        assert terms.kl.item() == 0.0


def test_grpo_loss_micro_batches_sum_to_full_batch() -> None:
    logp, old, ref, adv, mask = _two_rows()
    full = grpo_loss(logp, old, ref, adv, mask, beta=0.1)
    parts = [grpo_loss(logp[i:i + 1], old[i:i + 1], ref[i:i + 1], adv[i:i + 1], mask[i:i + 1], beta=0.1,
                       num_sequences=2) for i in range(2)]
    # row 0 alone: (-1 + 0.1*0.0965736)/2 = -0.4951713 ; row 1 alone: -0.6/2 = -0.3 ; sum -0.7951713
    torch.testing.assert_close(parts[0].loss, torch.tensor(-0.4951713), **TOL)
    torch.testing.assert_close(parts[1].loss, torch.tensor(-0.3), **TOL)
    torch.testing.assert_close(parts[0].loss + parts[1].loss, full.loss, **TOL)


def test_grpo_loss_mu_greater_than_one() -> None:
    # after the first of mu > 1 inner steps pi_theta != pi_old: one sequence, 2 tokens, A = 1, beta 0
    # rho = [0.55/0.5, 0.3/0.5] = [1.1, 0.6]; token 0 inside the range -> -1.1; token 1: 0.6 < 0.8 with A > 0
    # is not clipped (min(0.6, 0.8) = 0.6) -> -0.6 ; loss = (-1.1 - 0.6)/2 = -0.85 ; clip fraction 0
    logp = torch.tensor([[L(0.55), L(0.3)]], requires_grad=True)
    old = torch.tensor([[L(0.5), L(0.5)]])
    terms = grpo_loss(logp, old, None, torch.tensor([1.0]), torch.ones(1, 2), clip_epsilon=0.2, beta=0.0)
    torch.testing.assert_close(terms.loss, torch.tensor(-0.85), **TOL)
    assert terms.clipped_tokens.item() == 0
    terms.loss.backward()
    # d/dlogp_t of -rho_t*A/2 = -rho_t/2 = [-0.55, -0.3]
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.55, -0.3]]), **TOL)


def test_grpo_loss_mu_one_gradient_is_policy_gradient() -> None:
    # mu = 1: old = logp.detach() -> rho = 1 exactly, loss value -mean(A), gradient -A/|o_i|/B (REINFORCE)
    # A = [2, -1], mask [[1,1,1],[1,0,0]]: loss = -(2 + -1)/2 = -0.5
    # grads: row 0: -2/3/2 = -0.3333333 per real token ; row 1: +1/1/2 = 0.5 on its real token
    logp = torch.log(torch.full((2, 3), 0.2)).requires_grad_(True)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    terms = grpo_loss(logp, logp.detach(), None, torch.tensor([2.0, -1.0]), mask, beta=0.0)
    torch.testing.assert_close(terms.loss, torch.tensor(-0.5), **TOL)
    terms.loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-1 / 3] * 3, [0.5, 0.0, 0.0]]), **TOL)


def test_clip_sides_counted_apart_by_hand() -> None:
    """Clip fraction split by side. Range [1 - 0.2, 1 + 0.28] (DAPO's clip-higher):
    token 0: rho 1.5, A +1 -> min(1.5, 1.28) = 1.28 clipped term smaller: binds, ratio > 1 -> HIGH
    token 1: rho 0.5, A -1 -> min(-0.5, -0.8) = -0.8 clipped term smaller: binds, ratio < 1 -> LOW
    token 2: rho 1.5, A -1 -> min(-1.5, -1.28) = -1.5 unclipped smaller: free (the update may undo it)
    token 3: rho 0.5, A +1 -> min(0.5, 0.8) = 0.5 unclipped smaller: free
    token 4: rho 1.25, A +1 -> 1.25 < 1.28: inside the range (symmetric 0.2 would clip it high)
    token 5: rho 0.7, A -1 -> binds low, but it is padding (mask 0): not counted
    -> clipped 2, high 1 (so low 1)."""
    ratio = torch.tensor([[1.5, 0.5, 1.5, 0.5, 1.25, 0.7]])
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0, 1.0, -1.0]])
    old = torch.zeros_like(ratio)
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0, 0.0]])
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.28), "token_mean", "k3", 0.0, 0.0)
    terms = policy_loss(torch.log(ratio), old, None, adv, mask, spec, 5.0)
    assert (terms.clipped_tokens.item(), terms.clipped_high_tokens.item()) == (2, 1)
    symmetric = policy_loss(torch.log(ratio), old, None, adv, mask, replace(spec, clip=ClipRange(0.2, 0.2)), 5.0)
    assert (symmetric.clipped_tokens.item(), symmetric.clipped_high_tokens.item()) == (3, 2)
    # CISPO caps the weight above 1 + 0.28 whatever the advantage's sign: tokens 0 and 2 (rho 1.5), both high
    cispo = policy_loss(torch.log(ratio), old, None, adv, mask, replace(spec, objective="cispo"), 5.0)
    assert (cispo.clipped_tokens.item(), cispo.clipped_high_tokens.item()) == (2, 2)
    # dual clip (c = 3): rho 4, A -1 -> PPO term -min(-4, -1.28) = 4, capped at -c A = 3: counted, and high
    dual = policy_loss(torch.log(torch.tensor([[4.0]])), torch.zeros(1, 1), None, torch.tensor([[-1.0]]),
                       torch.ones(1, 1), replace(spec, objective="dual_clip"), 1.0)
    torch.testing.assert_close(dual.loss, torch.tensor(3.0), **TOL)
    assert (dual.clipped_tokens.item(), dual.clipped_high_tokens.item()) == (1, 1)


def test_kl_max_is_the_largest_real_token_by_hand() -> None:
    """kl_max: per-token k3 of the loss tokens, padding left out.
    row 0: pi 0.5 / ref 0.25 -> d = log 0.5 -> 0.1931472 ; pi 0.01 / ref 0.5 -> d = log 50 = 3.912023 ->
    50 - 3.912023 - 1 = 45.087977 (a token the policy made rare: the spike) ; row 1: pi 0.25 / ref 0.5 ->
    d = log 2 -> 0.3068528 ; its padding (pi 0.001 / ref 0.9, k3 would be ~893) is masked."""
    logp = torch.log(torch.tensor([[0.5, 0.01], [0.25, 0.001]]))
    ref = torch.log(torch.tensor([[0.25, 0.5], [0.5, 0.9]]))
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    terms = grpo_loss(logp, logp.detach(), ref, torch.zeros(2), mask, beta=0.04)
    torch.testing.assert_close(terms.kl_max, torch.tensor(45.087977), rtol=0, atol=1e-4)
    # no reference, or beta 0 (the KL in the reward): no KL term, kl_max 0
    assert grpo_loss(logp, logp.detach(), None, torch.zeros(2), mask).kl_max.item() == 0.0
    assert grpo_loss(logp, logp.detach(), ref, torch.zeros(2), mask, beta=0.0).kl_max.item() == 0.0
