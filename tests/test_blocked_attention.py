"""Blocked attention of the packed forward: the blocks are the packed mask cut by hand, and the
log-probs and their gradients equal the dense [T, T]-mask forward's on a tiny random Llama with grouped KV heads."""
from __future__ import annotations

import pytest
import torch

from rlvr.model import logprobs as logprobs_module
from rlvr.model.blocked_attention import NAME, blocked_attention_on, blocked_supported
from rlvr.model.logprobs import completion_logprobs
from rlvr.model.packing import pack
from test_logprobs import TEMPERATURE, batch, tiny_llama

torch.set_num_threads(1)


def test_blocks_of_one_prompt_and_two_rows_by_hand():
    # prompt [5, 6] (left-padded by 1); row 0: 3 tokens -> its first 2 go in; row 1: 1 token -> nothing goes in.
    # Packed: t0 t1 = prompt, t2 t3 = row 0. Blocks: the prompt (queries t0 t1, keys t0 t1, causal) and row 0
    # (queries t2 t3, keys t0..t3: the whole prompt, then its own tokens causally).
    packed = pack(torch.tensor([[0, 5, 6]]), torch.tensor([[0, 1, 1]]), torch.tensor([0, 0]),
                  torch.tensor([[7, 8, 9], [4, 0, 0]]), torch.tensor([[1, 1, 1], [1, 0, 0]]))
    b = packed.blocks
    assert packed.input_ids.tolist() == [[5, 6, 7, 8]]
    assert b.query_index.tolist() == [[0, 1], [2, 3]] and b.query_valid.all()
    assert b.key_index.tolist() == [[0, 1, 0, 0], [0, 1, 2, 3]]
    assert b.allowed.int().tolist() == [[[1, 0, 0, 0], [1, 1, 0, 0]],
                                        [[1, 1, 1, 0], [1, 1, 1, 1]]]


def test_padding_queries_attend_one_key_so_no_softmax_row_is_empty():
    # prompt of 1 token, rows of 4 and 2 tokens: blocks hold 1, 3 and 1 queries; padded to 3 queries each
    packed = pack(torch.tensor([[3]]), torch.tensor([[1]]), torch.tensor([0, 0]),
                  torch.tensor([[1, 2, 3, 4], [5, 6, 0, 0]]), torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]))
    b = packed.blocks
    assert b.query_valid.sum(dim=1).tolist() == [1, 3, 1]
    assert bool(b.allowed.any(dim=2).all())  # every query row, padding included, has a key
    assert b.allowed[~b.query_valid].int().tolist() == [[1, 0, 0, 0]] * 4  # padding: key 0 only


def _dense(monkeypatch):
    monkeypatch.setattr(logprobs_module, "blocked_supported", lambda model: False)


@pytest.mark.parametrize("rows", [[1, 0, 1], [2, 0, 2, 1], [0, 1, 2, 2]], ids=str)
def test_blocked_equals_dense_in_value_and_gradient(rows, monkeypatch):
    model = tiny_llama()
    assert blocked_supported(model)  # a Llama with SDPA: the blocked path is the one under test
    prompt_ids, prompt_mask, completion_ids, completion_mask = batch()
    index = torch.tensor(rows)
    ids, mask = completion_ids[:len(rows)], completion_mask[:len(rows)]
    results = []
    for dense in (False, True):
        if dense:
            _dense(monkeypatch)
        model.zero_grad()
        lp, entropy = completion_logprobs(model, prompt_ids, prompt_mask, index, ids, mask, TEMPERATURE,
                                          with_entropy=True, entropy_grad=True)
        (lp.sum() + entropy.sum()).backward()
        results.append((lp.detach(), entropy.detach(), [p.grad.clone() for p in model.parameters()]))
    (lp_b, ent_b, grads_b), (lp_d, ent_d, grads_d) = results
    torch.testing.assert_close(lp_b, lp_d, rtol=0, atol=1e-5)
    torch.testing.assert_close(ent_b, ent_d, rtol=0, atol=1e-5)
    assert lp_b.abs().max() > 1  # real log-probs, not zeros everywhere
    for g_b, g_d in zip(grads_b, grads_d):
        torch.testing.assert_close(g_b, g_d, rtol=1e-4, atol=1e-6)


def test_the_config_is_restored_even_when_the_forward_fails():
    model = tiny_llama()
    before = model.config._attn_implementation
    with pytest.raises(RuntimeError, match="boom"):
        with blocked_attention_on(model):
            assert model.config._attn_implementation == NAME
            raise RuntimeError("boom")
    assert model.config._attn_implementation == before


def test_other_attention_implementations_keep_the_dense_path():
    model = tiny_llama()
    model.config._attn_implementation = "flex_attention"  # not an exact-softmax path we reproduce: left alone
    assert not blocked_supported(model)
    model.config._attn_implementation = "sdpa"
    model.config.model_type = "gpt2"  # not a Llama-family attention
    assert not blocked_supported(model)
