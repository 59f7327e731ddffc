"""The family's objectives (clip-higher, dual clip, GSPO, CISPO), the k1/k2 KL estimators, the three aggregations
and the composed loss with its entropy bonus, against numbers derived by hand in the comments.
(PPO clip with a symmetric range, k3 and sequence_mean alone are in test_loss.py.)"""
from __future__ import annotations

import math

import pytest
import torch

from rlvr.algorithms.loss import AGGREGATIONS, LossSpec, aggregate, kl_k1, kl_k2, policy_loss
from rlvr.algorithms.objectives import ClipRange, cispo, dual_clip, gspo, ppo_clip

torch.set_num_threads(1)

L = math.log
TOL = dict(rtol=0, atol=1e-6)


def run_cases(objective, cases, clip: ClipRange):
    """cases: (ratio, advantage, ...) laid out as one sequence of len(cases) tokens, A given per token [1, C].
    -> (per-token loss [C], clipped [C], d sum(loss) / d logp [C])."""
    old = torch.log(torch.full((1, len(cases)), 0.3))
    logp = (old + torch.log(torch.tensor([[c[0] for c in cases]]))).requires_grad_(True)
    adv = torch.tensor([[c[1] for c in cases]])
    out = objective(logp, old, adv, torch.ones_like(old), clip)
    out.loss.sum().backward()  # one token per case: d loss_t / d logp_t
    return out.loss.detach()[0], out.clipped[0], logp.grad[0]


def check_cases(objective, cases, clip: ClipRange) -> None:
    loss, clipped, grad = run_cases(objective, cases, clip)
    torch.testing.assert_close(loss, torch.tensor([c[2] for c in cases]), rtol=0, atol=1e-5)
    assert clipped.tolist() == [c[3] for c in cases]
    torch.testing.assert_close(grad, torch.tensor([c[4] for c in cases]), rtol=0, atol=1e-5)


# --- k1 and k2 ---------------------------------------------------------------------------------------------

def test_kl_k1_value_and_gradient() -> None:
    # k1 = logp - ref: [log .5 - log .25, log .25 - log .5] = [log 2, -log 2] = [0.6931472, -0.6931472]
    # (negative per token: unbiased, not >= 0); d/dlogp = 1 everywhere
    logp = torch.tensor([L(0.5), L(0.25)], requires_grad=True)
    kl = kl_k1(logp, torch.tensor([L(0.25), L(0.5)]))
    torch.testing.assert_close(kl, torch.tensor([0.6931472, -0.6931472]), **TOL)
    kl.sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([1.0, 1.0]), **TOL)


def test_kl_k2_value_and_gradient() -> None:
    # k2 = (logp - ref)^2 / 2: [(log 2)^2/2, (-log 4)^2/2] = [0.4804530/2, 1.9218121/2] = [0.2402265, 0.9609060]
    # d/dlogp = logp - ref = [0.6931472, -1.3862944]
    logp = torch.tensor([L(0.5), L(0.25)], requires_grad=True)
    kl = kl_k2(logp, torch.tensor([L(0.25), L(1.0)]))
    torch.testing.assert_close(kl, torch.tensor([0.2402265, 0.9609060]), **TOL)
    kl.sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([0.6931472, -1.3862944]), **TOL)
    assert torch.equal(kl_k1(logp, logp), torch.zeros(2)) and torch.equal(kl_k2(logp, logp), torch.zeros(2))


# --- ppo_clip with clip-higher: range [1 - 0.2, 1 + 0.28] = [0.8, 1.28] -------------------------------------------
# loss = -min(rho A, clip(rho) A); d/dlogp of -rho A is -rho A (d rho / d logp = rho); 0 where the clip binds
CLIP_HIGHER = ClipRange(low=0.2, high=0.28)
HIGHER_CASES = [  # (ratio, A, loss, clipped, grad)
    (1.25, 1.0, -1.25, False, -1.25),  # 1.25 < 1.28: inside on the high side, not clipped (0.2/0.2 would clip)
    (1.3, 1.0, -1.28, True, 0.0),  # min(1.3, 1.28) = 1.28: clipped, no gradient
    (1.3, -1.0, 1.3, False, 1.3),  # min(-1.3, -1.28) = -1.3: the pessimistic unclipped term, grad -rho A = 1.3
    (0.75, -1.0, 0.8, True, 0.0),  # min(-0.75, -0.8) = -0.8: clipped at the floor
    (0.75, 2.0, -1.5, False, -1.5),  # min(1.5, 1.6) = 1.5: unclipped, grad -0.75 * 2
    (0.85, -2.0, 1.7, False, 1.7),  # inside: -(0.85 * -2) = 1.7, grad 1.7
    (1.25, -2.0, 2.5, False, 2.5),  # inside: 2.5
]


def test_ppo_clip_higher_each_region() -> None:
    check_cases(ppo_clip, HIGHER_CASES, CLIP_HIGHER)


def test_clip_higher_differs_from_symmetric_range() -> None:
    # the same ratio 1.25, A = 1 under [0.8, 1.2]: min(1.25, 1.2) = 1.2 -> clipped, loss -1.2, grad 0
    loss, clipped, grad = run_cases(ppo_clip, [(1.25, 1.0)], ClipRange(0.2, 0.2))
    assert loss.tolist() == pytest.approx([-1.2]) and clipped.tolist() == [True] and grad.tolist() == [0.0]
    # asymmetric the other way: low 0.3 -> floor 0.7, so ratio 0.75 with A = -1 is inside: loss 0.75, grad 0.75
    check_cases(ppo_clip, [(0.75, -1.0, 0.75, False, 0.75)], ClipRange(0.3, 0.2))


# --- dual_clip, c = 3 ------------------------------------------------------------------------------------------
DUAL_CASES = [  # (ratio, A, loss, clipped, grad), range [0.8, 1.2]
    (4.0, -1.0, 3.0, True, 0.0),  # PPO: -min(-4, -1.2) = 4 > cap -c A = 3 -> 3, no gradient, flagged
    (4.0, -2.0, 6.0, True, 0.0),  # PPO 8 > cap 3 * 2 = 6 -> 6
    (2.0, -1.0, 2.0, False, 2.0),  # PPO -min(-2, -1.2) = 2 < 3: ordinary PPO value and gradient -rho A = 2
    (100.0, 1.0, -1.2, True, 0.0),  # A > 0: ordinary PPO clip, -1.2 (the cap -3A = -3 never applies to A > 0)
    (0.1, 1.0, -0.1, False, -0.1),  # A > 0, small ratio: -min(0.1, 0.8) = -0.1 (not the cap -3)
    (0.5, -1.0, 0.8, True, 0.0),  # PPO floor: -min(-0.5, -0.8) = 0.8 < 3, clipped by PPO
    (1.0, -1.0, 1.0, False, 1.0),  # ratio 1: 1
]


def test_dual_clip_each_region() -> None:
    check_cases(dual_clip, DUAL_CASES, ClipRange(0.2, 0.2, dual_c=3.0))


def test_dual_clip_constant() -> None:
    # c = 5: ratio 4, A = -1 -> PPO value 4 < 5: not capped, gradient 4 ; ratio 6 -> 6 > 5: capped at 5
    check_cases(dual_clip, [(4.0, -1.0, 4.0, False, 4.0), (6.0, -1.0, 5.0, True, 0.0)], ClipRange(0.2, 0.2, 5.0))


# --- gspo --------------------------------------------------------------------------------------------------------
# 3 sequences, C = 3, range [0.8, 1.2]; d = logp - old per token, the last token of rows 1 and 2 is padding
#   row 0: d = [0.1, -0.2, 0.4], |o| = 3: mean 0.3/3 = 0.1, s0 = exp(0.1) = 1.1051709, A = 1
#          inside: loss -1.1051709 on every token, grad (token form) -s0 A = -1.1051709
#   row 1: d = [0.3, 0.5, (5.0)], |o| = 2: mean 0.8/2 = 0.4, s1 = exp(0.4) = 1.4918247, A = -0.5
#          s1 > 1.2 with A < 0: min(-0.7459124, -0.6) = -0.7459124 unclipped: loss 0.7459124, grad 0.7459124
#   row 2: d = [-0.5, -0.1, (-3.0)], |o| = 2: mean -0.3, s2 = exp(-0.3) = 0.7408182, A = -1
#          s2 < 0.8 with A < 0: min(-0.7408182, -0.8) = -0.8: clipped, loss 0.8, grad 0
GSPO_MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
GSPO_ADV = torch.tensor([1.0, -0.5, -1.0])
GSPO_LOSS = torch.tensor([[-1.1051709] * 3, [0.7459124] * 3, [0.8] * 3])
GSPO_TOKEN_GRAD = torch.tensor([[-1.1051709] * 3, [0.7459124, 0.7459124, 0.0], [0.0, 0.0, 0.0]])


def gspo_inputs(pad1: float = 5.0, pad2: float = -3.0):
    old = torch.log(torch.tensor([[0.3, 0.2, 0.1], [0.5, 0.4, 0.3], [0.2, 0.2, 0.2]]))
    d = torch.tensor([[0.1, -0.2, 0.4], [0.3, 0.5, pad1], [-0.5, -0.1, pad2]])
    return (old + d).requires_grad_(True), old


def test_gspo_sequence_ratio_loss_and_token_gradient() -> None:
    logp, old = gspo_inputs()
    out = gspo(logp, old, GSPO_ADV, GSPO_MASK, ClipRange(0.2, 0.2))
    real = GSPO_MASK.bool()
    torch.testing.assert_close(out.loss[real], GSPO_LOSS[real], **TOL)  # the same value on every real token
    assert out.clipped[real].tolist() == [False] * 5 + [True] * 2
    (out.loss * GSPO_MASK).sum().backward()
    torch.testing.assert_close(logp.grad, GSPO_TOKEN_GRAD, **TOL)


def test_gspo_padding_does_not_change_the_sequence_ratio() -> None:
    # padding log-probs 5 / -3 vs 0 / 40: s_i, the real tokens' losses and gradients are the same
    a, old = gspo_inputs(5.0, -3.0)
    b, _ = gspo_inputs(0.0, 40.0)
    outs = [gspo(x, old, GSPO_ADV, GSPO_MASK, ClipRange(0.2, 0.2)) for x in (a, b)]
    real = GSPO_MASK.bool()
    torch.testing.assert_close(outs[0].loss[real], outs[1].loss[real], **TOL)
    torch.testing.assert_close(outs[1].loss[real], GSPO_LOSS[real], **TOL)
    for x, out in zip((a, b), outs):
        (out.loss * GSPO_MASK).sum().backward()
    torch.testing.assert_close(a.grad, b.grad, **TOL)


def gspo_spec(objective: str = "gspo") -> LossSpec:
    return LossSpec(objective, ClipRange(0.2, 0.2), "sequence_mean", "k3", 0.0, 0.0)


def test_gspo_sequence_mean_gradient_is_gspo_gradient() -> None:
    # sequence_mean: loss = 1/G sum_i 1/|o_i| sum_t loss_it, G = 3
    #   value: (-1.1051709 + 0.7459124 + 0.8)/3 = 0.4407415/3 = 0.1469138
    #   grad per real token = -(1/G) s_i A_i / |o_i|:
    #     row 0: -(1/3) * 1.1051709 * 1 / 3 = -0.1227968 ; row 1: -(1/3) * 1.4918247 * -0.5 / 2 = 0.1243187
    #     row 2: clipped -> 0 ; padding 0
    logp, old = gspo_inputs()
    terms = policy_loss(logp, old, None, GSPO_ADV, GSPO_MASK, gspo_spec(), 3.0)
    torch.testing.assert_close(terms.loss, torch.tensor(0.1469138), **TOL)
    assert terms.clipped_tokens.item() == 2
    terms.loss.backward()
    expected = torch.tensor([[-0.1227968] * 3, [0.1243187, 0.1243187, 0.0], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(logp.grad, expected, **TOL)
    # and the same as autograd through the paper's sequence-level objective, written out independently:
    #   J = 1/G sum_i min(s_i A_i, clip(s_i) A_i), s_i = exp(1/|o_i| sum_t mask * (logp - old))
    ref_logp = logp.detach().clone().requires_grad_(True)
    s = torch.exp(((ref_logp - old) * GSPO_MASK).sum(dim=1) / GSPO_MASK.sum(dim=1))
    j = torch.minimum(s * GSPO_ADV, s.clamp(0.8, 1.2) * GSPO_ADV).mean()
    (-j).backward()
    torch.testing.assert_close(logp.grad, ref_logp.grad, **TOL)


def test_gspo_mu1_gradient_equals_ppo_clip_gradient() -> None:
    # old = logp.detach(): every s_i = 1 and every rho_t = 1, so both give -(1/G) A_i / |o_i| per real token:
    #   row 0: -1/3/3 = -0.1111111 ; row 1: 0.5/2/3 = 0.0833333 ; row 2: 1/2/3 = 0.1666667 ; loss -mean(A) = 0.1666667
    grads = []
    for objective in ("gspo", "ppo_clip"):
        logp, _ = gspo_inputs()
        terms = policy_loss(logp, logp.detach(), None, GSPO_ADV, GSPO_MASK, gspo_spec(objective), 3.0)
        torch.testing.assert_close(terms.loss, torch.tensor(0.1666667), **TOL)
        terms.loss.backward()
        grads.append(logp.grad)
    expected = torch.tensor([[-1 / 9] * 3, [1 / 12, 1 / 12, 0.0], [1 / 6, 1 / 6, 0.0]])
    torch.testing.assert_close(grads[0], expected, **TOL)
    torch.testing.assert_close(grads[1], expected, **TOL)


# --- cispo, cap 1 + 0.28 = 1.28 ----------------------------------------------------------------------------------
# w = sg(min(rho, 1.28)); loss = -w A logp with logp = log 0.05 = -2.9957323; d/dlogp = -w A (w is detached:
# otherwise d/dlogp of -rho A logp would be -rho A (1 + logp))
CISPO_CASES = [  # (ratio, A, loss, clipped, grad)
    (1.1, 2.0, 6.5906110, False, -2.2),  # w 1.1: -1.1 * 2 * -2.9957323 = 6.5906110
    (2.0, 1.0, 3.8345374, True, -1.28),  # w capped at 1.28: -1.28 * -2.9957323 = 3.8345374, flagged
    (0.1, -1.0, -0.2995732, False, 0.1),  # no lower clip: w stays 0.1: -0.1 * -1 * -2.9957323 = -0.2995732
    (1.5, -1.0, -3.8345374, True, 1.28),  # w 1.28: grad -1.28 * -1 = 1.28, flagged
]


def test_cispo_by_hand() -> None:
    logp = torch.full((1, 4), L(0.05), requires_grad=True)
    old = logp.detach() - torch.log(torch.tensor([[c[0] for c in CISPO_CASES]]))
    out = cispo(logp, old, torch.tensor([[c[1] for c in CISPO_CASES]]), torch.ones(1, 4), ClipRange(0.2, 0.28))
    torch.testing.assert_close(out.loss[0], torch.tensor([c[2] for c in CISPO_CASES]), rtol=0, atol=1e-5)
    assert out.clipped[0].tolist() == [c[3] for c in CISPO_CASES]
    out.loss.sum().backward()
    torch.testing.assert_close(logp.grad[0], torch.tensor([c[4] for c in CISPO_CASES]), rtol=0, atol=1e-5)


# --- aggregations ------------------------------------------------------------------------------------------------
# B = 4, C = 4, generation budget max_length = 5; row 2 fully masked
VALUES = torch.tensor([[2.0, 4.0, 6.0, 8.0], [1.0, 3.0, 5.0, 7.0], [9.0, 9.0, 9.0, 9.0], [10.0, 0.0, 0.0, 0.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
#   row means over own tokens: (2+4+6)/3 = 4 ; (1+3)/2 = 2 ; 0 (masked) ; 10/1 = 10 -> sum 16
#   row token sums: 12 ; 4 ; 0 ; 10 -> sum 26 ; real tokens 3 + 2 + 0 + 1 = 6
AGG = {  # mode: (denominator, value, d value / d VALUES per real token of each row)
    "sequence_mean": (4.0, 16 / 4, [1 / (3 * 4), 1 / (2 * 4), 0.0, 1 / (1 * 4)]),  # B = 4 -> 4.0
    "token_mean": (6.0, 26 / 6, [1 / 6] * 4),  # 6 tokens -> 4.3333333
    "constant": (20.0, 26 / 20, [1 / 20] * 4),  # B * max_length = 4 * 5 = 20 -> 1.3
}


@pytest.mark.parametrize("mode", sorted(AGG))
def test_aggregation_by_hand(mode: str) -> None:
    denominator, value, row_grad = AGG[mode]
    assert AGGREGATIONS[mode].denominator(MASK, 5) == denominator
    values = VALUES.clone().requires_grad_(True)
    out = aggregate(values, MASK, mode, denominator)
    torch.testing.assert_close(out, torch.tensor(value), **TOL)
    out.backward()
    torch.testing.assert_close(values.grad, torch.tensor(row_grad)[:, None] * MASK, **TOL)


@pytest.mark.parametrize("mode", sorted(AGG))
@pytest.mark.parametrize("size", [1, 2, 4])
def test_aggregation_micro_batches_sum_to_full_batch(mode: str, size: int) -> None:
    # every chunk divides by the full-batch denominator: e.g. token_mean, size 2: (12 + 4)/6 + (0 + 10)/6 = 26/6
    denominator, value, _ = AGG[mode]
    total = sum(aggregate(VALUES[i:i + size], MASK[i:i + size], mode, denominator) for i in range(0, 4, size))
    torch.testing.assert_close(total, torch.tensor(value), **TOL)


def test_denominators_of_a_fully_masked_batch() -> None:
    # sequence_mean: still B = 4 ; token_mean: max(0 tokens, 1) = 1 (no division by 0) ; constant: 4 * 5 = 20
    empty = torch.zeros(4, 4)
    assert [AGGREGATIONS[m].denominator(empty, 5) for m in ("sequence_mean", "token_mean", "constant")] == [
        4.0, 1.0, 20.0]
    assert aggregate(VALUES, empty, "token_mean", 1.0).item() == 0.0


@pytest.mark.parametrize("mode", sorted(AGG))
def test_aggregated_policy_gradient_by_hand(mode: str) -> None:
    # ppo_clip with mu = 1 (ratio 1), A = [1, -2, 3, 0.5]: per-token loss -A_i, so d loss / d logp_it is
    # -A_i times the mode's weight of that token:
    #   sequence_mean: row 0 -1/12, row 1 2/8 = 0.25, row 2 0 (masked), row 3 -0.5/4 = -0.125
    #   token_mean: -A_i/6 -> [-1/6, 1/3, 0, -1/12] ; constant: -A_i/20 -> [-0.05, 0.1, 0, -0.025]
    adv = torch.tensor([1.0, -2.0, 3.0, 0.5])
    logp = torch.full((4, 4), L(0.2), requires_grad=True)
    denominator, _, row_grad = AGG[mode]
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.28), mode, "k3", 0.0, 0.0)
    terms = policy_loss(logp, logp.detach(), None, adv, MASK, spec, denominator)
    terms.loss.backward()
    torch.testing.assert_close(logp.grad, (-adv * torch.tensor(row_grad))[:, None] * MASK, **TOL)


# --- policy_loss: KL estimators in the loss and the entropy bonus ---------------------------------------------------
# B = 2, C = 2, mask [[1, 1], [1, 0]] (3 real tokens), token_mean -> denominator 3, mu = 1 (ratio 1), A = [1, -0.5]
#   policy: per-token -A -> (-1 - 1 + 0.5)/3 = -0.5
#   logp = log 0.5 everywhere, ref = [[log .25, log .5], [log .125, log .9]]
#   -> d = logp - ref = [[log 2, 0], [log 4, -]]
#   k1: (0.6931472 + 0 + 1.3862944)/3 = 0.6931472 ; k2: (0.2402265 + 0 + 0.9609060)/3 = 0.4003775
#   entropy H = [[1, 2], [0.5, (7)]] -> (1 + 2 + 0.5)/3 = 1.1666667 ; beta 0.1, entropy_coef 0.01
#   loss = policy + beta * kl - 0.01 * 1.1666667 (= 0.0116667):
#     k1: -0.5 + 0.0693147 - 0.0116667 = -0.4423520 ; k2: -0.5 + 0.0400378 - 0.0116667 = -0.4716289
#   d loss / d logp = -A_i/3 + beta * d k / d logp / 3:
#     k1 (d k1 = 1): row 0 -1/3 + 0.1/3 = -0.3 ; row 1 0.5/3 + 0.1/3 = 0.2
#     k2 (d k2 = logp - ref): [[-1/3 + 0.1 log 2 / 3, -1/3], [0.5/3 + 0.1 log 4 / 3, 0]]
#                           = [[-0.3102284, -0.3333333], [0.2128765, 0]]
#   d loss / d H = -0.01/3 = -0.0033333 on real tokens, 0 on padding
KL_CASES = {
    "k1": (0.6931472, -0.4423520, [[-0.3, -0.3], [0.2, 0.0]]),
    "k2": (0.4003775, -0.4716289, [[-0.3102284, -1 / 3], [0.2128765, 0.0]]),
}


@pytest.mark.parametrize("estimator", sorted(KL_CASES))
def test_policy_loss_with_kl_and_entropy_bonus_by_hand(estimator: str) -> None:
    kl_value, loss_value, logp_grad = KL_CASES[estimator]
    logp = torch.full((2, 2), L(0.5), requires_grad=True)
    ref = torch.log(torch.tensor([[0.25, 0.5], [0.125, 0.9]]))
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    entropy = torch.tensor([[1.0, 2.0], [0.5, 7.0]], requires_grad=True)
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.28), "token_mean", estimator, 0.1, 0.01)
    terms = policy_loss(logp, logp.detach(), ref, torch.tensor([1.0, -0.5]), mask, spec, 3.0, entropy)
    torch.testing.assert_close(terms.policy_loss, torch.tensor(-0.5), **TOL)
    torch.testing.assert_close(terms.kl, torch.tensor(kl_value), **TOL)
    torch.testing.assert_close(terms.entropy, torch.tensor(3.5 / 3), **TOL)
    torch.testing.assert_close(terms.loss, torch.tensor(loss_value), **TOL)
    assert terms.clipped_tokens.item() == 0
    assert terms.loss.requires_grad
    assert not (terms.policy_loss.requires_grad or terms.kl.requires_grad or terms.entropy.requires_grad)
    terms.loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor(logp_grad), **TOL)
    torch.testing.assert_close(entropy.grad, torch.tensor([[-0.01 / 3, -0.01 / 3], [-0.01 / 3, 0.0]]), **TOL)


def test_policy_loss_without_entropy_tensor_has_no_bonus() -> None:
    # same example, entropy_coef 0.01 but no entropy given and beta 0: loss = policy = -0.5, entropy reported 0
    logp = torch.full((2, 2), L(0.5), requires_grad=True)
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.28), "token_mean", "k1", 0.0, 0.01)
    terms = policy_loss(logp, logp.detach(), None, torch.tensor([1.0, -0.5]),
                        torch.tensor([[1.0, 1.0], [1.0, 0.0]]), spec, 3.0)
    torch.testing.assert_close(terms.loss, torch.tensor(-0.5), **TOL)
    assert terms.entropy.item() == 0.0 and terms.kl.item() == 0.0


def test_kl_at_padding_cannot_overflow_into_nan() -> None:
    # row 0 has one real token; its padding holds ref 0 (batched_logprobs zeroes it) and a log-prob of -200:
    # k3 there would be exp(0 - (-200)) = inf, and inf * mask 0 = NaN. The loss must ignore padding entirely.
    logp = torch.tensor([[math.log(0.5), -200.0]], requires_grad=True)
    ref = torch.tensor([[math.log(0.25), 0.0]])
    mask = torch.tensor([[1.0, 0.0]])
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.2), "sequence_mean", "k3", 0.1, 0.0)
    terms = policy_loss(logp, logp.detach(), ref, torch.tensor([1.0]), mask, spec, 1.0)
    # real token: policy -1 ; k3 with d = log .25 - log .5 = -log 2: 0.5 + 0.6931472 - 1 = 0.1931472
    assert torch.isfinite(terms.loss)
    torch.testing.assert_close(terms.loss, torch.tensor(-1 + 0.1 * 0.1931472), rtol=0, atol=1e-6)
    terms.loss.backward()
    # d/dlogp: policy -1, kl 0.1 * (1 - exp(d)) = 0.1 * 0.5 = 0.05 -> -0.95 ; padding exactly 0
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.95, 0.0]]), rtol=0, atol=1e-6)
