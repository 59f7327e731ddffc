"""Rows whose gradient is exactly zero are not run by the update (loss.rows_with_gradient): with no KL and no
entropy term in the loss, a tied group's rows (advantage 0) add exactly 0 to the gradient. The step must be the one
the full forward makes, also when no row is left (AdamW's moments still move). Tiny random Llama."""
from __future__ import annotations

import contextlib
import copy
import math

import pytest
import torch

import rlvr.training.update as update
from conftest import tiny_llama
from rlvr.algorithms.loss import LossSpec, rows_with_gradient
from rlvr.algorithms.objectives import ClipRange
from rlvr.model.logprobs import completion_logprobs
from rlvr.training.update import OneProcess, UpdateSettings, train_step
from test_update import deltas, make_batch

torch.set_num_threads(1)


def spec(beta: float = 0.0, entropy_coef: float = 0.0) -> LossSpec:
    return LossSpec("ppo_clip", ClipRange(0.2, 0.2), "sequence_mean", "k3", beta, entropy_coef)


def test_rows_with_gradient_by_hand() -> None:
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    advantages = torch.tensor([1.0, 0.0, 0.7, -0.5])
    # beta 0: row 1 has A = 0; row 2 has A != 0 but no loss token (a masked truncated row)
    assert rows_with_gradient(advantages, mask, spec()).tolist() == [True, False, False, True]
    # a KL or an entropy term pulls on every row with a loss token, whatever its advantage
    assert rows_with_gradient(advantages, mask, spec(beta=0.04)).tolist() == [True, True, False, True]
    assert rows_with_gradient(advantages, mask, spec(entropy_coef=0.01)).tolist() == [True, True, False, True]
    # per-token advantages (episodes, GAE): row 0 is nonzero only where the mask is 0 (an environment turn)
    per_token = torch.tensor([[0.0, 0.0, 2.0], [0.3, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, -1e-13]])
    assert rows_with_gradient(per_token, mask, spec()).tolist() == [False, True, False, True]


def _settings(beta: float) -> UpdateSettings:
    return UpdateSettings(spec(beta), temperature=0.7, micro_batch_size=4, max_grad_norm=1e9, max_length=6)


def _counting_forward(monkeypatch) -> list[int]:
    """Record the rows of every update forward."""
    seen: list[int] = []
    real = update.completion_logprobs

    def counted(policy, prompt_ids, prompt_mask, rows, *args, **kwargs):
        seen.append(int(rows.numel()))
        return real(policy, prompt_ids, prompt_mask, rows, *args, **kwargs)

    monkeypatch.setattr(update, "completion_logprobs", counted)
    return seen


def _two_steps(model, batches, beta: float):
    """AdamW steps on the batches in turn: (policy, stats of the last step)."""
    policy = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3, weight_decay=0.0)
    for batch in batches:
        stats = train_step(policy, batch, optimizer, _settings(beta))
    return policy, stats


def _with_advantages(batch, values):
    return update.TrainBatch(batch.prompt_ids, batch.prompt_mask, batch.prompt_index, batch.completion_ids,
                             batch.completion_mask, torch.tensor(values), batch.old_logprobs, batch.ref_logprobs)


def test_tied_group_is_not_run_and_the_step_is_the_full_one(monkeypatch) -> None:
    tiny = tiny_llama()
    base = make_batch(tiny, with_ref=False, with_old=False)
    tied_second = _with_advantages(base, [1.0, -1.0, 0.0, 0.0])  # group 2 (rows 2, 3) tied
    seen = _counting_forward(monkeypatch)
    skipped, _ = _two_steps(tiny, [tied_second], beta=0.0)
    assert sum(seen) == 2  # only the first group's rows ran
    monkeypatch.setattr(update, "rows_with_gradient", lambda a, m, s: m.sum(dim=1) > 0)  # the old path: all rows
    full, _ = _two_steps(tiny, [tied_second], beta=0.0)
    assert sum(seen) == 2 + 4
    moved = deltas(tiny, full)
    assert max(float(d.abs().max()) for d in moved.values()) > 1e-4  # the step did something
    for name, delta in deltas(tiny, skipped).items():
        torch.testing.assert_close(delta, moved[name], atol=1e-7, rtol=1e-5)


def test_all_tied_batch_runs_nothing_but_adam_moves_as_after_zero_gradients(monkeypatch) -> None:
    tiny = tiny_llama()
    base = make_batch(tiny, with_ref=False, with_old=False)
    signal, tied = _with_advantages(base, [1.0, -1.0, 0.5, -0.5]), _with_advantages(base, [0.0] * 4)
    seen = _counting_forward(monkeypatch)
    after_signal, _ = _two_steps(tiny, [signal], beta=0.0)
    runs_before = len(seen)
    skipped, stats = _two_steps(tiny, [signal, tied], beta=0.0)
    # the second step ran one gradient-free forward, for the entropy metric only (the diagnostics need it most
    # when every group ties)
    assert len(seen) == 2 * runs_before + 1 and stats.loss == 0.0 and stats.grad_norm == 0.0 and stats.kl_max == 0.0
    monkeypatch.setattr(update, "rows_with_gradient", lambda a, m, s: m.sum(dim=1) > 0)
    full, full_stats = _two_steps(tiny, [signal, tied], beta=0.0)
    # one micro-batch holds all 4 rows here, so the probe's entropy is the full update's
    assert stats.entropy > 0 and stats.entropy == pytest.approx(full_stats.entropy, rel=1e-5)
    momentum = deltas(after_signal, full)  # AdamW's first moment keeps moving the weights on a zero gradient
    assert max(float(d.abs().max()) for d in momentum.values()) > 1e-4
    for name, delta in deltas(after_signal, skipped).items():
        torch.testing.assert_close(delta, momentum[name], atol=1e-7, rtol=1e-5)


def test_with_a_kl_term_every_row_runs(monkeypatch) -> None:
    tiny = tiny_llama()
    batch = make_batch(tiny, with_ref=True, with_old=False)
    seen = _counting_forward(monkeypatch)
    _two_steps(tiny, [_with_advantages(batch, [1.0, -1.0, 0.0, 0.0])], beta=0.04)
    assert sum(seen) == 4  # the tied group's rows are pulled towards the reference


def test_logged_entropy_is_over_the_tokens_the_update_ran() -> None:
    """With a tied group skipped, the logged entropy is the mean over the rows that ran: the same as a step on those
    rows alone, not their sum spread over the skipped rows' tokens too (that mutation passed)."""
    tiny = tiny_llama()
    base = make_batch(tiny, with_ref=False, with_old=False)
    tied_second = _with_advantages(base, [1.0, -1.0, 0.0, 0.0])
    _, skipped = _two_steps(tiny, [tied_second], beta=0.0)
    _, first_group_alone = _two_steps(tiny, [tied_second.rows(torch.tensor([0, 1]))], beta=0.0)
    _, every_row = _two_steps(tiny, [_with_advantages(base, [1.0, -1.0, 0.5, -0.5])], beta=0.0)
    assert skipped.entropy == pytest.approx(first_group_alone.entropy, rel=1e-6)
    # the premise: the other group's tokens would change the mean (they are there, with other entropies)
    assert abs(every_row.entropy - skipped.entropy) > 1e-4
    assert int(base.completion_mask[2:].sum()) > 0


class RecordingRanks(OneProcess):
    """One process that answers as one of several ranks (torchrun): every row runs, and it records whether each
    micro-batch was announced as the step's last (DDP and FSDP2 synchronise gradients on that one only)."""

    enabled = True

    def __init__(self) -> None:
        self.last: list[bool] = []

    def micro_batch(self, policy, last: bool):
        self.last.append(last)
        return contextlib.nullcontext()


def _with_mask(batch, mask, advantages):
    return update.TrainBatch(batch.prompt_ids, batch.prompt_mask, batch.prompt_index, batch.completion_ids,
                             torch.tensor(mask), torch.tensor(advantages), None, None)


def test_one_loss_token_logs_that_token_s_entropy_whether_its_row_runs_or_only_the_probe_reads_it() -> None:
    """The logged entropy is a mean over the tokens: with a single loss token in the batch (row 0's first; the other
    rows masked) it is that token's entropy under the sampling temperature, from the update's forward when the row
    has an advantage, from the probe's when every group ties."""
    tiny = tiny_llama()
    base = make_batch(tiny, with_ref=False, with_old=False)
    mask = [[1.0, 0, 0, 0, 0, 0]] + [[0.0] * 6] * 3
    with torch.no_grad():
        _, entropy = completion_logprobs(tiny, base.prompt_ids, base.prompt_mask, base.prompt_index,
                                         base.completion_ids, torch.tensor(mask), 0.7, with_entropy=True)
    token = float(entropy[0, 0])
    assert token > 0.5  # a random model: far from a collapsed distribution
    _, ran = _two_steps(tiny, [_with_mask(base, mask, [1.0, 0.0, 0.0, 0.0])], beta=0.0)
    _, probed = _two_steps(tiny, [_with_mask(base, mask, [0.0] * 4)], beta=0.0)
    assert ran.loss != 0.0 and probed.loss == 0.0  # the premise: the row ran in the first step only
    assert ran.entropy == pytest.approx(token, rel=1e-5) and probed.entropy == pytest.approx(token, rel=1e-5)


def test_a_step_without_a_loss_token_logs_no_entropy_in_one_process_or_several() -> None:
    """Every completion masked (all truncated, masked): there is no token to average, so the entropy is NaN, no
    reading, in one process (the probe) as under torchrun (every rank runs its rows), never 0.0, which the collapse
    diagnostics would read as collapsed entropy (the probe divided 0 by 1). The step is a finite no-op."""
    tiny = tiny_llama()
    empty = _with_mask(make_batch(tiny, with_ref=False, with_old=False), [[0.0] * 6] * 4, [1.0, -1.0, 0.5, -0.5])
    for ranks in (OneProcess(), RecordingRanks()):
        settings = UpdateSettings(spec(), temperature=0.7, micro_batch_size=2, max_grad_norm=1e9, max_length=6,
                                  ranks=ranks)
        policy = copy.deepcopy(tiny)
        stats = train_step(policy, empty, torch.optim.AdamW(policy.parameters(), lr=1e-3), settings)
        assert math.isnan(stats.entropy)
        assert (stats.loss, stats.grad_norm, stats.clip_fraction, stats.skipped) == (0.0, 0.0, 0.0, 0.0)
    assert ranks.last == [False, True]  # under torchrun both micro-batches ran


@pytest.mark.parametrize("micro, flags", [(1, [False, False, False, True]), (2, [False, True]),
                                          (3, [False, True]), (4, [True])])
def test_under_torchrun_only_the_step_s_last_micro_batch_synchronises(micro: int, flags: list[bool]) -> None:
    """4 rows in micro-batches of `micro`: one gradient synchronisation per step, on the last micro-batch (a sync on
    none would leave each rank with its own gradient, one on every micro-batch would cost a collective each)."""
    tiny = tiny_llama()
    ranks = RecordingRanks()
    settings = UpdateSettings(spec(), temperature=0.7, micro_batch_size=micro, max_grad_norm=1e9, max_length=6,
                              ranks=ranks)
    policy = copy.deepcopy(tiny)
    train_step(policy, make_batch(tiny, with_ref=False, with_old=False), torch.optim.AdamW(policy.parameters()),
               settings)
    assert ranks.last == flags
