"""Out of memory in a micro-batch: torch.OutOfMemoryError, raised for real by the embedding layer
whenever a forward carries more tokens than a 2-row micro-batch does, makes the step run again with half the
micro-batch; the result is bit-identical to a step run at that size from the start. The CPU allocator's failure
gets a clear message. Tokens, not rows, are counted: the training forward is packed, one [1, T]
sequence per micro-batch, and memory grows with T."""
from __future__ import annotations

import copy

import pytest
import torch

from rlvr.training.update import MicroBatchOutOfMemory, train_step
from test_update import make_batch, settings, tiny_llama  # the hand-built batch of the update tests


def _fail_above(model, tokens: int, error: Exception) -> None:
    def hook(module, args):
        if args[0].numel() > tokens:
            raise error
    model.get_input_embeddings().register_forward_pre_hook(hook)


def _largest_forward(model, batch, micro_batch_size: int) -> int:
    """Tokens in the largest forward of a step at this micro-batch size (run on a copy)."""
    seen = [0]
    probe = copy.deepcopy(model)
    probe.get_input_embeddings().register_forward_pre_hook(lambda m, a: seen.append(a[0].numel()))
    train_step(probe, batch, torch.optim.AdamW(probe.parameters(), lr=1e-2), settings(micro_batch_size))
    return max(seen)


def _fail_above_two_rows(model, batch, error: Exception) -> None:
    two, four = _largest_forward(model, batch, 2), _largest_forward(model, batch, 4)
    assert four > two  # otherwise the injected failure could not tell the sizes apart
    _fail_above(model, two, error)


def test_oom_retries_with_half_the_micro_batch_and_matches_that_size():
    model = tiny_llama()
    batch = make_batch(model, with_ref=True, with_old=False)
    clean = copy.deepcopy(model)
    _fail_above_two_rows(model, batch, torch.OutOfMemoryError("CUDA out of memory (injected)"))
    stats = train_step(model, batch, torch.optim.AdamW(model.parameters(), lr=1e-2), settings(4))
    reference = train_step(clean, batch, torch.optim.AdamW(clean.parameters(), lr=1e-2), settings(2))
    assert stats.micro_batch_size == 2 and reference.micro_batch_size == 2 and stats.skipped == 0.0
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), clean.parameters()))


def test_the_halved_micro_batch_is_kept_for_the_next_steps():
    # The step's update (rlvr/grpo/step.py): after one retry the later steps start at the size that fit, instead
    # of running out of memory again at every step.
    from rlvr.grpo.setup import Optimisation
    from rlvr.grpo.step import update

    model = tiny_llama()
    batch = make_batch(model, with_ref=True, with_old=False)
    two, failures = _largest_forward(model, batch, 2), []

    def hook(module, args):
        if args[0].numel() > two:
            failures.append(args[0].numel())
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")

    model.get_input_embeddings().register_forward_pre_hook(hook)
    messages: list[str] = []
    optim = Optimisation(torch.optim.AdamW(model.parameters(), lr=1e-2), None, settings(4))
    assert update(model, optim, batch, 1, messages.append).micro_batch_size == 2 and len(failures) == 1
    assert optim.update_settings.micro_batch_size == 2 and "continuing with 2 rows per micro-batch" in messages[0]
    assert update(model, optim, batch, 1, messages.append).micro_batch_size == 2
    assert len(failures) == 1 and len(messages) == 1  # the second step started at 2 rows: no second failure


def test_oom_at_one_row_is_a_clear_error():
    model = tiny_llama()
    batch = make_batch(model, with_ref=True, with_old=False)
    _fail_above(model, 0, torch.OutOfMemoryError("CUDA out of memory (injected)"))
    with pytest.raises(MicroBatchOutOfMemory, match="one row per micro-batch"):
        train_step(model, batch, torch.optim.AdamW(model.parameters(), lr=1e-2), settings(4))


def test_cpu_allocator_failure_names_the_setting():
    model = tiny_llama()
    batch = make_batch(model, with_ref=True, with_old=False)
    _fail_above(model, 0, RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate "
                                       "memory: you tried to allocate 123 bytes (injected)"))
    with pytest.raises(MicroBatchOutOfMemory, match="optimizer.micro_batch_size"):
        train_step(model, batch, torch.optim.AdamW(model.parameters(), lr=1e-2), settings(4))


def test_oom_on_one_of_several_ranks_stops_instead_of_retrying():
    # A retry changes this rank's micro-batch count, and with it its gradient collectives: the other ranks
    # would wait forever. One clear error instead (torchrun then ends the other ranks).
    class TwoRanks(type(settings(4).ranks)):
        enabled = True

    model = tiny_llama()
    batch = make_batch(model, with_ref=True, with_old=False)
    _fail_above_two_rows(model, batch, torch.OutOfMemoryError("CUDA out of memory (injected)"))
    from dataclasses import replace

    with pytest.raises(MicroBatchOutOfMemory, match="one of several ranks: lower optimizer.micro_batch_size"):
        train_step(model, batch, torch.optim.AdamW(model.parameters(), lr=1e-2), replace(settings(4), ranks=TwoRanks()))
