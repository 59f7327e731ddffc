"""train_step: the accumulated gradient does not depend on the micro-batch size, and with beta = 0, mu = 1 the
step is REINFORCE with the group baseline folded into the advantages. Tiny random Llama, SGD(lr=1) so that a
parameter's change is minus its (accumulated) gradient."""
from __future__ import annotations

import copy

import pytest
import torch

from conftest import tiny_llama
from rlvr.algorithms.loss import LossSpec
from rlvr.algorithms.objectives import ClipRange
from rlvr.model.logprobs import batched_logprobs
from rlvr.training.update import UpdateSettings, train_step
from rlvr.types import TrainBatch

torch.set_num_threads(1)

TEMPERATURE = 0.7
ADVANTAGES = [1.0, -0.5, 0.25, 0.5]
LENGTHS = [6, 3, 1, 4]  # completion lengths (mask sums); C = 6


def perturbed(model, seed: int, scale: float = 0.05):
    other = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return other


def naive_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, temperature):
    """Per row: its own prompt without padding + its completion, one full forward, log_softmax(logits / T)."""
    out = []
    for b, r in enumerate(rows.tolist()):
        prompt = prompt_ids[r][prompt_mask[r].bool()]
        logits = model(input_ids=torch.cat([prompt, completion_ids[b]])[None]).logits[0]
        logits = logits[len(prompt) - 1: len(prompt) - 1 + completion_ids.shape[1]] / temperature
        out.append(torch.log_softmax(logits, dim=-1).gather(-1, completion_ids[b][:, None])[:, 0])
    return torch.stack(out)


def make_batch(model, with_ref: bool, with_old: bool) -> TrainBatch:
    """2 prompts (the second left-padded by 2), G = 2 completions each."""
    g = torch.Generator().manual_seed(2)
    prompt_ids = torch.randint(0, 64, (2, 5), generator=g)
    prompt_mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    prompt_ids = prompt_ids.masked_fill(prompt_mask == 0, 0)
    prompt_index = torch.tensor([0, 0, 1, 1])
    completion_ids = torch.randint(0, 64, (4, 6), generator=g)
    completion_mask = torch.tensor([[1.0] * n + [0.0] * (6 - n) for n in LENGTHS])
    scored = lambda m: batched_logprobs(m, prompt_ids, prompt_mask, prompt_index, completion_ids,  # noqa: E731
                                        completion_mask, TEMPERATURE, 4)
    ref = scored(perturbed(model, seed=10)) if with_ref else None
    # an old policy far enough away that some ratios leave [0.8, 1.2]
    old = scored(perturbed(model, seed=11, scale=0.3)) if with_old else None
    return TrainBatch(prompt_ids, prompt_mask, prompt_index, completion_ids, completion_mask,
                      torch.tensor(ADVANTAGES), old, ref)


def settings(micro_batch_size: int, beta: float = 0.04, max_grad_norm: float = 1e9) -> UpdateSettings:
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.2), "sequence_mean", "k3", beta, 0.0)
    return UpdateSettings(spec, temperature=TEMPERATURE, micro_batch_size=micro_batch_size,
                          max_grad_norm=max_grad_norm, max_length=6)


def step(model, batch: TrainBatch, s: UpdateSettings, scheduler_factory=None):
    policy = copy.deepcopy(model)
    optimizer = torch.optim.SGD(policy.parameters(), lr=1.0)
    scheduler = scheduler_factory(optimizer) if scheduler_factory else None
    stats = train_step(policy, batch, optimizer, s, scheduler)
    return policy, stats, optimizer


def deltas(before, after) -> dict[str, torch.Tensor]:
    ref = dict(before.named_parameters())
    return {n: (p - ref[n]).detach() for n, p in after.named_parameters()}


@pytest.mark.parametrize("with_old", [False, True], ids=["mu1", "mu>1"])
def test_micro_batch_size_does_not_change_the_step(with_old: bool) -> None:
    model = tiny_llama()
    batch = make_batch(model, with_ref=True, with_old=with_old)
    results = {m: step(model, batch, settings(m))[:2] for m in (1, 2, 3, 4)}
    full, full_stats = results[4]
    moved = deltas(model, full)
    assert max(d.abs().max() for d in moved.values()) > 1e-3  # the step did something
    for m in (1, 2, 3):
        policy, stats = results[m]
        for name, p in policy.named_parameters():
            # rtol: with the far old policy (mu > 1) the loss is ~24 and SGD(lr=1) moves weights by up to ~89,
            # where one float32 step is 7.6e-6; the packed forward sums in another order per size.
            torch.testing.assert_close(p, dict(full.named_parameters())[name], rtol=1e-6, atol=1e-5, msg=name)
        # loss terms are sums of micro-batch values divided by the global count, so they add up
        for key in ("loss", "policy_loss", "kl", "entropy", "grad_norm"):
            assert getattr(stats, key) == pytest.approx(getattr(full_stats, key), rel=1e-5, abs=1e-6), key
    assert full_stats.kl > 0  # the reference differs from the policy, so the KL term is live
    if with_old:
        assert full_stats.clip_fraction > 0  # ratios far from 1: the clip binds somewhere
    else:
        assert full_stats.clip_fraction == 0.0  # ratio exactly 1 everywhere


def test_clip_fraction_does_not_depend_on_micro_batch_size() -> None:
    model = tiny_llama()
    batch = make_batch(model, with_ref=False, with_old=True)
    # the full-batch value is the share of the 14 real tokens (6+3+1+4) where the clip binds: rho*A > clip(rho)*A
    with torch.no_grad():
        logp = naive_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.prompt_index,
                              batch.completion_ids, TEMPERATURE)
    ratio = torch.exp(logp - batch.old_logprobs)
    adv = batch.advantages[:, None]
    binding = (ratio.clamp(0.8, 1.2) * adv < ratio * adv).float()
    expected = float((binding * batch.completion_mask).sum() / 14)
    assert 0 < expected < 1
    assert step(model, batch, settings(4, beta=0.0))[1].clip_fraction == pytest.approx(expected, abs=1e-6)
    for m in (1, 2, 3):
        assert step(model, batch, settings(m, beta=0.0))[1].clip_fraction == pytest.approx(expected, abs=1e-6), m


def test_beta0_mu1_is_reinforce_with_group_baseline() -> None:
    model = tiny_llama()
    batch = make_batch(model, with_ref=False, with_old=False)
    policy, stats, _ = step(model, batch, settings(2, beta=0.0))

    # reference step by hand: loss = -1/B sum_i 1/|o_i| sum_t A_i log pi(o_t), plain concatenated forward
    manual = copy.deepcopy(model)
    logp = naive_logprobs(manual, batch.prompt_ids, batch.prompt_mask, batch.prompt_index, batch.completion_ids,
                          TEMPERATURE)
    adv = torch.tensor(ADVANTAGES)[:, None]
    lengths = torch.tensor(LENGTHS, dtype=torch.float32)
    loss = -((adv * logp * batch.completion_mask).sum(dim=1) / lengths).mean()
    loss.backward()
    optimizer = torch.optim.SGD(manual.parameters(), lr=1.0)
    optimizer.step()

    expected, got = deltas(model, manual), deltas(model, policy)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-6, msg=name)
    # with rho = 1 the reported policy loss is -mean(A) = -(1 - 0.5 + 0.25 + 0.5)/4 = -0.3125; kl and clip 0
    assert stats.policy_loss == pytest.approx(-0.3125, abs=1e-6)
    assert stats.loss == pytest.approx(-0.3125, abs=1e-6)
    assert stats.kl == 0.0 and stats.clip_fraction == 0.0
    # lr = 1 and no clipping: the step's length is the gradient norm
    norm = torch.sqrt(sum((d ** 2).sum() for d in got.values()))
    assert stats.grad_norm == pytest.approx(float(norm), rel=1e-4)


def test_entropy_stat_is_token_mean_over_the_batch() -> None:
    model = tiny_llama()
    batch = make_batch(model, with_ref=False, with_old=False)
    stats = step(model, batch, settings(3, beta=0.0))[1]
    with torch.no_grad():
        ent = []
        for b, r in enumerate(batch.prompt_index.tolist()):
            prompt = batch.prompt_ids[r][batch.prompt_mask[r].bool()]
            logits = model(input_ids=torch.cat([prompt, batch.completion_ids[b]])[None]).logits[0]
            logp = torch.log_softmax(logits[len(prompt) - 1: len(prompt) + 5] / TEMPERATURE, dim=-1)
            ent.append(-(logp.exp() * logp).sum(dim=-1))  # H = -sum p log p per position
        # mean over the 14 real tokens (6 + 3 + 1 + 4)
        expected = (torch.stack(ent) * batch.completion_mask).sum() / 14
    assert stats.entropy == pytest.approx(float(expected), rel=1e-5)


def test_grad_clipping_scheduler_and_zero_grad() -> None:
    model = tiny_llama()
    batch = make_batch(model, with_ref=True, with_old=False)
    free = step(model, batch, settings(4))
    max_norm = 1e-3
    clipped_policy, clipped_stats, optimizer = step(
        model, batch, settings(4, max_grad_norm=max_norm),
        scheduler_factory=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.5 ** k))
    # grad_norm is reported before clipping, so it is the same as without clipping
    assert clipped_stats.grad_norm == pytest.approx(free[1].grad_norm, rel=1e-5)
    assert clipped_stats.grad_norm > max_norm
    # lr 1: the clipped step has length max_norm (clip_grad_norm_ scales by max_norm / (norm + 1e-6))
    moved = deltas(model, clipped_policy)
    norm = float(torch.sqrt(sum((d ** 2).sum() for d in moved.values())))
    assert norm == pytest.approx(max_norm, rel=1e-3)
    # the scheduler stepped once: lr 1 * 0.5^1 = 0.5
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.5)
    assert all(p.grad is None for p in clipped_policy.parameters())


@pytest.mark.parametrize("max_norm, expected", [(1.0, [0.6, 0.8]), (10.0, [3.0, 4.0])])
def test_clip_gradients_by_hand(max_norm, expected) -> None:
    """Gradient [3, 4] has norm 5: max 1 scales it by 1/5 to [0.6, 0.8]; max 10 leaves it as is. Norm returned: 5."""
    from rlvr.training.update import clip_gradients

    layer = torch.nn.Linear(2, 1, bias=False)
    layer.weight.grad = torch.tensor([[3.0, 4.0]])
    assert float(clip_gradients(layer, max_norm)) == pytest.approx(5.0)
    torch.testing.assert_close(layer.weight.grad, torch.tensor([expected]))


def test_clip_fraction_sides_through_an_update_step():
    """train_step's clip_fraction_high/_low on a real forward. pi_old is set so that, on the current
    policy, row 0 (A = +1, 6 tokens) has ratio 1.5 on every token and row 1 (A = -0.5, 3 tokens) ratio 0.5; rows 2
    (A = 0.25) and 3 (A = 0.5) ratio 1. Clip [0.8, 1.2]: row 0 binds high on 6 tokens, row 1 low on 3, of the 14
    loss tokens -> high 6/14 = 0.4285714, low 3/14 = 0.2142857, total 9/14 = 0.6428571."""
    model = tiny_llama()
    batch = make_batch(model, with_ref=False, with_old=False)
    with torch.no_grad():
        current = batched_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.prompt_index,
                                   batch.completion_ids, batch.completion_mask, TEMPERATURE, 4)
    shift = torch.tensor([[torch.log(torch.tensor(1.5))], [torch.log(torch.tensor(0.5))], [0.0], [0.0]])
    batch.old_logprobs = (current - shift) * batch.completion_mask  # ratio = exp(current - old) = exp(shift)
    _, stats, _ = step(model, batch, settings(micro_batch_size=3, beta=0.0))  # 2 micro-batches: sums, not means
    assert stats.clip_fraction_high == pytest.approx(6 / 14, abs=1e-6)
    assert stats.clip_fraction_low == pytest.approx(3 / 14, abs=1e-6)
    assert stats.clip_fraction == pytest.approx(9 / 14, abs=1e-6)


def test_kl_max_through_an_update_step_is_the_largest_token_of_the_batch():
    """train_step's kl_max over 2 micro-batches = the max of k3(logp, ref) over every loss token, taken here from one
    plain forward of the whole batch (the update's first pass sees the current policy)."""
    model = tiny_llama()
    batch = make_batch(model, with_ref=True, with_old=False)
    with torch.no_grad():
        logp = batched_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.prompt_index, batch.completion_ids,
                                batch.completion_mask, TEMPERATURE, 4)
    delta = batch.ref_logprobs - logp
    expected = ((torch.exp(delta) - delta - 1) * batch.completion_mask).max().item()
    _, stats, _ = step(model, batch, settings(micro_batch_size=3))
    assert expected > 0 and stats.kl_max == pytest.approx(expected, rel=1e-4)


def test_mu_passes_log_the_mean_but_the_largest_token_kl(monkeypatch):
    """step.update at mu = 2: totals are averaged over the passes ((0.1 + 0.3) / 2 = 0.2), kl_max is the max over
    them (max(5, 40) = 40), not an average of maxima (22.5)."""
    from rlvr.grpo import step as grpo
    from rlvr.grpo.setup import Optimisation
    from rlvr.training.update import UpdateStats

    passes = iter([UpdateStats(0.1, 0.0, 0.1, 0.0, 1.0, 1.0, kl_max=5.0, micro_batch_size=4.0),
                   UpdateStats(0.3, 0.0, 0.3, 0.0, 1.0, 1.0, kl_max=40.0, micro_batch_size=4.0)])
    monkeypatch.setattr(grpo, "train_step", lambda *args: next(passes))
    stats = grpo.update(None, Optimisation(None, None, settings(4)), None, 2, say=print)
    assert stats.loss == pytest.approx(0.2) and stats.kl == pytest.approx(0.2) and stats.kl_max == 40.0
