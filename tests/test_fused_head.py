"""The fused LM head (model/fused_head.py) equals the plain logits -> logsumexp path in values and gradients, and the
tied embedding's rows-into-.grad backward equals nn.Embedding's dense backward."""
from __future__ import annotations

import math

import pytest
import torch

import rlvr.model.logprobs as lp
from conftest import tiny_llama
from rlvr.model.fused_head import fused_head_applies, head_logprobs_fused, tied_input_embeddings
from rlvr.model.logprobs import token_logprobs

torch.set_num_threads(1)


def test_by_hand_three_word_vocabulary() -> None:
    """H = 1, states [[1]], weight [[0], [ln 3], [0]]: logits [0, ln 3, 0], softmax [1/5, 3/5, 1/5].
    log p(1) = ln(3/5) = -0.510826; entropy = 2 (1/5) ln 5 + (3/5) ln(5/3) = 0.643775 + 0.306495 = 0.950271.
    d log p / d logits = onehot - p = [-0.2, 0.4, -0.2]; d/d states = 0.4 ln 3 = 0.439445;
    d/d weight = [[-0.2], [0.4], [-0.2]] (times states = 1)."""
    states = torch.ones(1, 1, requires_grad=True)
    weight = torch.tensor([[0.0], [math.log(3)], [0.0]], requires_grad=True)
    logprob, entropy = head_logprobs_fused(states, weight, torch.tensor([1]), 1.0, with_entropy=True)
    torch.testing.assert_close(logprob, torch.tensor([-0.510826]), rtol=0, atol=1e-6)
    torch.testing.assert_close(entropy, torch.tensor([0.950271]), rtol=0, atol=1e-6)
    assert not entropy.requires_grad
    logprob.sum().backward()
    torch.testing.assert_close(states.grad, torch.tensor([[0.439445]]), rtol=0, atol=1e-6)
    torch.testing.assert_close(weight.grad, torch.tensor([[-0.2], [0.4], [-0.2]]), rtol=0, atol=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("with_entropy", [True, False])
@pytest.mark.parametrize("rows", [5, 40])  # 40 > EXP_BLOCK_ROWS: the entropy's row blocks
def test_fused_equals_plain(temperature, with_entropy, rows) -> None:
    g = torch.Generator().manual_seed(0)
    states = (torch.randn(rows, 16, generator=g) * 3).requires_grad_()
    weight = torch.randn(97, 16, generator=g).requires_grad_()
    targets = torch.randint(0, 97, (rows,), generator=g)
    upstream = torch.randn(rows, generator=g)  # every token weighed differently
    results = []
    for fused in (True, False):
        states.grad = weight.grad = None
        if fused:
            values, entropy = head_logprobs_fused(states, weight, targets, temperature, with_entropy)
        else:
            values, entropy = token_logprobs(states @ weight.t() / temperature, targets, with_entropy)
        (values * upstream).sum().backward()
        results.append((values.detach(), entropy, states.grad.clone(), weight.grad.clone()))
    (fv, fe, fs, fw), (pv, pe, ps, pw) = results
    torch.testing.assert_close(fv, pv, rtol=0, atol=1e-5)
    # relative to the tensor's largest entry (float32 sums in another order: measured <= 3e-7 of it)
    for fast, plain in ((fs, ps), (fw, pw)):
        assert (fast - plain).abs().max() / plain.abs().max() < 2e-6
    if with_entropy:
        torch.testing.assert_close(fe, pe, rtol=0, atol=1e-5)
    else:
        assert fe is None and pe is None


def test_second_backward_is_refused() -> None:
    """The backward turns its saved buffer into the gradient in place: a retained graph must not be reused."""
    states = torch.randn(3, 4, requires_grad=True)
    values, _ = head_logprobs_fused(states, torch.randn(7, 4), torch.tensor([0, 1, 2]), 1.0, False)
    values.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice"):
        values.sum().backward()


def test_applies_to_plain_bias_free_linear_only() -> None:
    assert fused_head_applies(torch.nn.Linear(4, 7, bias=False))
    assert not fused_head_applies(torch.nn.Linear(4, 7))  # a bias: the plain path
    assert not fused_head_applies(torch.nn.Sequential(torch.nn.Linear(4, 7, bias=False)))


def test_tied_rows_into_grad_equal_dense_embedding_backward() -> None:
    """Two backward passes (two micro-batches) through the rows-into-.grad embedding accumulate the same weight
    gradient as nn.Embedding's dense backward; a repeated token's rows add up; the padding row stays 0."""
    model = tiny_llama(tied=True)
    embed = model.get_input_embeddings()
    embed.padding_idx = 5
    head = model.get_output_embeddings().weight
    ids = torch.tensor([[3, 9, 3, 5, 60]])  # 3 twice, 5 the padding row
    grads = []
    for fast in (True, False):
        model.zero_grad(set_to_none=True)
        for scale in (1.0, -0.5):
            embeds = tied_input_embeddings(model, ids) if fast else embed(ids)
            assert embeds is not None
            # the head uses the same weight: its dense gradient and the embedding's rows meet in .grad
            (scale * (embeds @ head.t()).square().sum()).backward()
        grads.append(embed.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-6, atol=1e-6)
    assert grads[0][3].abs().max() > 0


def test_untied_model_embeds_as_usual() -> None:
    assert tied_input_embeddings(tiny_llama(tied=False), torch.tensor([[1, 2]])) is None


@pytest.mark.parametrize("chunk", [1024, 3], ids=["one-chunk", "checkpointed-chunks"])
def test_packed_fused_forward_equals_padded_plain_forward(monkeypatch, chunk) -> None:
    """completion_logprobs on a tied tiny Llama (fused head + rows-into-.grad embedding, entropy as a metric) against
    the padded forward (plain head, nn.Embedding): log-probs, entropy and every parameter's gradient."""
    monkeypatch.setattr(lp, "HEAD_CHUNK_TOKENS", chunk)
    model = tiny_llama(tied=True)
    g = torch.Generator().manual_seed(1)
    prompt_ids = torch.randint(0, 64, (2, 6), generator=g)
    prompt_mask = torch.ones(2, 6, dtype=torch.long)
    prompt_mask[1, :2] = 0
    completion_ids = torch.randint(0, 64, (3, 5), generator=g)
    completion_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])
    rows = torch.tensor([0, 1, 1])
    weights = torch.arange(1, 16, dtype=torch.float32).reshape(3, 5) * completion_mask
    results = []
    for forward in (lp.completion_logprobs, lp.padded_completion_logprobs):
        model.zero_grad(set_to_none=True)
        values, entropy = forward(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, 0.7,
                                  with_entropy=True)
        (values * weights).sum().backward()
        results.append((values.detach() * completion_mask, entropy.detach() * completion_mask,
                        {n: p.grad.clone() for n, p in model.named_parameters()}))
    (fv, fe, fg), (pv, pe, pg) = results
    torch.testing.assert_close(fv, pv, rtol=0, atol=1e-5)
    torch.testing.assert_close(fe, pe, rtol=0, atol=1e-5)
    for name, grad in pg.items():
        scale = grad.abs().max()
        assert scale > 0, name
        assert (fg[name] - grad).abs().max() / scale < 1e-5, name
