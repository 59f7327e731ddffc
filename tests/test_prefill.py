"""The sampler's shared-opening prefill (rollout/prefill.py): rows that open alike (an episode's later turns: a
group's prompt) run the opening once; the decode then continues exactly as from the whole contexts. Tiny Llama."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import rlvr.rollout.hf as hf
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.decode_steps import FusedStepper, HFStepper
from rlvr.rollout.graph_step import StaticDecoders
from rlvr.rollout.prefill import SharedPrefix, left_pad, prefill, split_contexts
from test_decode_steps import assert_steps_agree, tiny

torch.set_num_threads(1)

OPENING = list(range(4, 24))  # 20 tokens every row of the group starts with
CONTEXTS = [OPENING + [30, 31], OPENING + [40], OPENING + [30, 31, 32], [7, 8, 9]]


def test_left_pad_by_hand() -> None:
    """Rows [5], [6 7 8] and [] left-padded with 0 to the longest: ids and a 0/1 mask, long like a tokenizer's."""
    ids, mask = left_pad([[5], [6, 7, 8], []], 0, torch.device("cpu"))
    assert ids.tolist() == [[0, 0, 5], [6, 7, 8], [0, 0, 0]] and mask.tolist() == [[0, 0, 1], [1, 1, 1], [0, 0, 0]]
    assert ids.dtype == mask.dtype == torch.long


def test_a_shared_prefix_cannot_be_changed_once_made() -> None:
    """The openings' cache is gathered to the rows by `rows`: a SharedPrefix is a value (frozen), so nothing can pair
    the rows with other openings after it was made."""
    from dataclasses import FrozenInstanceError

    ids, mask, shared = _shared_batch()
    with pytest.raises(FrozenInstanceError):
        shared.rows = torch.tensor([1, 1, 1, 0])
    assert shared.rows.tolist() == [0, 0, 0, 1]


def test_split_contexts_by_hand() -> None:
    openings, rows, rests = split_contexts(CONTEXTS)
    # rows 0-2 share the 20-token opening; row 3 shares nothing (< 16 tokens): its opening is all but its last token
    assert openings == [OPENING, [7, 8]] and rows == [0, 0, 0, 1]
    assert rests == [[30, 31], [40], [30, 31, 32], [9]]
    # a row that is the next row's opening keeps its last token as its rest (its logits start the turn)
    openings, rows, rests = split_contexts([OPENING, OPENING + [5]])
    assert openings == [OPENING[:-1]] and rests == [[OPENING[-1]], [OPENING[-1], 5]]
    # nothing shared (only consecutive rows are compared): no split
    assert split_contexts([OPENING, [5] + OPENING, OPENING]) is None
    assert split_contexts([OPENING + [1], OPENING + [2]], min_shared=21) is None
    # exactly min_shared tokens in common is enough
    assert split_contexts([OPENING + [1], OPENING + [2]], min_shared=20) == ([OPENING], [0, 0], [[1], [2]])


def test_split_contexts_keeps_a_token_for_every_rest_and_compares_every_row() -> None:
    """A later row that is the opening of the row before it still keeps its last token as its rest (an empty rest
    would be an all-padding row); every row of a run is compared with the run's first, so a row that shares nothing
    ends the run even right after it starts."""
    assert split_contexts([OPENING + [5], OPENING]) == ([OPENING[:-1]], [0, 0], [[OPENING[-1], 5], [OPENING[-1]]])
    other = [50 + t for t in OPENING]
    assert split_contexts([OPENING + [1], OPENING + [2], other + [3]]) == (
        [OPENING, other], [0, 0, 1], [[1], [2], [3]])


def _shared_batch():
    openings, rows, rests = split_contexts(CONTEXTS)
    ids, mask = left_pad(rests, 0, torch.device("cpu"))
    return ids, mask, SharedPrefix(*left_pad(openings, 0, torch.device("cpu")), torch.tensor(rows))


def test_prefill_with_shared_openings_equals_the_whole_contexts() -> None:
    model = tiny("llama")
    whole_ids, whole_mask = left_pad(CONTEXTS, 0, torch.device("cpu"))
    ids, mask, shared = _shared_batch()
    with torch.no_grad():
        plain_logits, _, plain_mask = prefill(model, whole_ids, whole_mask)
        logits, cache, full = prefill(model, ids, mask, shared)
    torch.testing.assert_close(logits, plain_logits, rtol=0, atol=1e-5)
    assert full.sum(dim=1).tolist() == plain_mask.sum(dim=1).tolist() == [len(c) for c in CONTEXTS]
    assert cache.get_seq_length() == full.shape[1] == 20 + 3  # longest opening + longest rest


def test_prefill_returns_a_cache_even_when_the_checkpoint_says_use_cache_false() -> None:
    """A checkpoint saved from a run with gradient checkpointing carries use_cache=False in its config; the sampler
    asks for the cache itself, so both prefills still give the cache the decode continues from (23 columns: the
    longest context, or the longest opening + the longest rest) and the same logits."""
    model = tiny("llama")
    model.config.use_cache = False
    whole_ids, whole_mask = left_pad(CONTEXTS, 0, torch.device("cpu"))
    ids, mask, shared = _shared_batch()
    with torch.no_grad():
        plain_logits, plain_cache, _ = prefill(model, whole_ids, whole_mask)
        logits, cache, _ = prefill(model, ids, mask, shared)
    assert plain_cache.get_seq_length() == cache.get_seq_length() == 23
    torch.testing.assert_close(logits, plain_logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("stepper", ["hf", "fused", "static"])
def test_decode_from_shared_openings_follows_the_whole_contexts(stepper: str) -> None:
    model = tiny("llama")
    whole_ids, whole_mask = left_pad(CONTEXTS, 0, torch.device("cpu"))
    ids, mask, shared = _shared_batch()
    make = {"hf": HFStepper, "fused": FusedStepper,
            "static": lambda m, i, k, g, n, s=None: StaticDecoders(graphs=False).stepper(m, torch.float32, i, k, g, n,
                                                                                         s)}[stepper]
    with torch.no_grad():
        plain, candidate = make(model, whole_ids, whole_mask, 1, 8), make(model, ids, mask, 1, 8, shared)
        torch.testing.assert_close(candidate.first_logits, plain.first_logits, rtol=0, atol=1e-5)
        assert_steps_agree(plain, candidate, steps=8, drop_at=4, keep=torch.tensor([0, 2, 3]))


def _engine(model):
    engine = hf.HFRolloutEngine.__new__(hf.HFRolloutEngine)
    engine.model, engine.tokenizer, engine.stop_ids = model, SimpleNamespace(pad_token_id=0), [1]
    return engine


def test_continue_tokens_samples_the_same_turns_and_prefills_fewer_tokens(monkeypatch) -> None:
    model = tiny("llama")
    seen: list[int] = []
    forward = model.model.forward

    def counted(*args, input_ids=None, **kwargs):  # tokens through the model, prefill and decode
        seen.append(int(input_ids.numel()))
        return forward(*args, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(model.model, "forward", counted)
    sampling = SamplingParams(1.0, 1.0, 6, seed=21)
    shared_turns = _engine(model).continue_tokens(CONTEXTS, 1, sampling)
    shared_prefill = seen[:2]
    seen.clear()
    monkeypatch.setattr(hf, "split_contexts", lambda contexts: None)  # every row's whole context
    plain_turns = _engine(model).continue_tokens(CONTEXTS, 1, sampling)
    assert [t.ids for t in shared_turns] == [t.ids for t in plain_turns] and any(t.ids for t in plain_turns)
    for a, b in zip(shared_turns, plain_turns):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), rtol=0, atol=1e-5)
    # openings 2 x 20 (left-padded) + rests 4 x 3, against 4 rows x 23 columns
    assert shared_prefill == [2 * 20, 4 * 3] and seen[0] == 4 * 23


def test_first_turn_prompts_share_their_opening_and_sample_the_same_tokens(monkeypatch) -> None:
    """generate's prompts: every prompt of a task opens with the same system turn and one-shot pair; that
    opening is prefilled once, and the sampled tokens and log-probs are those of the whole prompts (group size 2:
    the opening's cache is gathered to the prompts, then repeated to their groups)."""
    model = tiny("llama")
    seen: list[int] = []
    forward = model.model.forward

    def counted(*args, input_ids=None, **kwargs):
        seen.append(int(input_ids.numel()))
        return forward(*args, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(model.model, "forward", counted)
    prompts = [OPENING + [30, 31], OPENING + [40], OPENING + [30, 31, 32]]
    ids, mask = left_pad(prompts, 0, torch.device("cpu"))
    sampling = SamplingParams(1.0, 1.0, 6, seed=5)
    shared_ids, shared_logprobs = _engine(model)._sample_prompts(ids, mask, 2, sampling)
    shared_prefill = seen[:2]
    seen.clear()
    monkeypatch.setattr(hf, "split_contexts", lambda contexts: None)
    plain_ids, plain_logprobs = _engine(model)._sample_prompts(ids, mask, 2, sampling)
    assert torch.equal(shared_ids, plain_ids) and shared_ids.shape == (6, 6)
    torch.testing.assert_close(shared_logprobs, plain_logprobs, rtol=0, atol=1e-5)
    # the opening: 1 x 20 tokens, then the rests 3 x 3 (left-padded); without it 3 prompts x 23 columns
    assert shared_prefill == [20, 3 * 3] and seen[0] == 3 * 23


def test_continue_tokens_says_stopped_only_for_turns_that_sampled_a_stop_token(monkeypatch) -> None:
    """A turn cut by max_new_tokens is not a stopped turn: the episode driver marks the episode truncated from this
    flag (reported as stopped, cut episodes were scored as finished)."""
    engine = _engine(tiny("llama"))
    pad, stop = 0, 1  # _engine's pad and stop ids
    sampled = torch.tensor([[5, 6, stop, pad], [5, 6, 7, 8], [stop, pad, pad, pad]])
    monkeypatch.setattr(engine, "sample", lambda ids, mask, group, sampling, shared=None: (
        sampled, -torch.ones(sampled.shape)))
    turns = engine.continue_tokens([[9, 9], [9, 8], [7]], 1, SamplingParams(1.0, 1.0, 4, seed=0))
    # row 0 stopped after 3 tokens (its stop token kept), row 1 ran out of its 4 tokens, row 2 stopped at once
    assert [(t.ids, t.stopped) for t in turns] == [([5, 6, stop], True), ([5, 6, 7, 8], False), ([stop], True)]
    assert [len(t.logprobs) for t in turns] == [3, 4, 1]
    # each flag is its own row's: row 0 stopped at its second token, row 1 ran out (the columns that hold a stop
    # token, [False, True, False], would say otherwise)
    sampled = torch.tensor([[5, stop, pad], [5, 6, 7]])
    turns = engine.continue_tokens([[9, 9], [9, 8]], 1, SamplingParams(1.0, 1.0, 3, seed=0))
    assert [(t.ids, t.stopped) for t in turns] == [([5, stop], True), ([5, 6, 7], False)]


def test_continue_tokens_makes_no_host_tensor_that_meets_the_policy_s() -> None:
    """Under the device trap (tests/device_trap.py: the policy on cpu:0, and any op that would combine a host tensor
    with the policy's on a GPU fails): a later turn's shared-opening prefill, its sampling and its stop flags keep
    every tensor that meets the policy's on the policy's device (a CUDA run would crash at the first that did not)."""
    from device_trap import POLICY_DEVICE, device_trap

    with device_trap() as trap:
        model = tiny("llama").to(POLICY_DEVICE)
        turns = _engine(model).continue_tokens(CONTEXTS, 1, SamplingParams(1.0, 1.0, 6, seed=21))
    assert not trap.violations and len(turns) == len(CONTEXTS) and all(t.ids for t in turns)


def test_prefill_runs_the_lm_head_on_each_row_s_last_position_only() -> None:
    """memory_plan.generation_bytes budgets one [rows, vocab] logits row per context: both prefills (whole contexts,
    shared openings) ask the LM head for the last position only, never [R, W, vocab] (at 16 prompts x 300 tokens x
    49152 x 4 B that is 0.94 GB against 3 MB). Catches logits_to_keep dropped, 0 (all positions) or 2 at either call:
    the values read, out.logits[:, -1], are the same under each of those."""
    model = tiny("llama")
    shapes = []
    model.lm_head.register_forward_hook(lambda module, args, out: shapes.append(tuple(out.shape[:-1])))
    whole_ids, whole_mask = left_pad(CONTEXTS, 0, torch.device("cpu"))
    ids, mask, shared = _shared_batch()
    with torch.no_grad():
        prefill(model, whole_ids, whole_mask)
        prefill(model, ids, mask, shared)
    assert shapes == [(len(CONTEXTS), 1), (len(CONTEXTS), 1)]
