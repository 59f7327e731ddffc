"""Prefix-shared completion log-probs equal the plain "concatenate prompt and completion" forward, in value and
in gradient, on a tiny random Llama."""
from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rlvr.logprobs import batched_logprobs, completion_logprobs, position_ids_from_mask

torch.set_num_threads(1)

TEMPERATURE = 0.7


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return LlamaForCausalLM(config).float().eval()


def naive_logits(model, prompt_ids, prompt_mask, rows, completion_ids, temperature):
    """Per row: its own prompt without padding + its completion, one full forward, logits predicting the
    completion tokens ([B, C, V], divided by the temperature)."""
    out = []
    for b, r in enumerate(rows.tolist()):
        prompt = prompt_ids[r][prompt_mask[r].bool()]
        ids = torch.cat([prompt, completion_ids[b]])[None]
        logits = model(input_ids=ids).logits[0]
        out.append(logits[len(prompt) - 1: len(prompt) - 1 + completion_ids.shape[1]] / temperature)
    return torch.stack(out)


def naive_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, temperature):
    logits = naive_logits(model, prompt_ids, prompt_mask, rows, completion_ids, temperature)
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, completion_ids[..., None])[..., 0]


def batch(pad_value: int = 0):
    """3 prompts of length 6 left-padded by 0, 2 and 5 (a 1-token prompt); 4 completions of 5 tokens."""
    g = torch.Generator().manual_seed(1)
    prompt_ids = torch.randint(0, 64, (3, 6), generator=g)
    prompt_mask = torch.ones(3, 6, dtype=torch.long)
    prompt_mask[1, :2] = 0
    prompt_mask[2, :5] = 0
    prompt_ids = prompt_ids.masked_fill(prompt_mask == 0, pad_value)
    completion_ids = torch.randint(0, 64, (4, 5), generator=g)
    completion_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0]])
    return prompt_ids, prompt_mask, completion_ids, completion_mask


def test_position_ids_skip_left_padding() -> None:
    # mask [0,0,1,1,1] -> cumsum [0,0,1,2,3] - 1 = [-1,-1,0,1,2] -> clamp [0,0,0,1,2]
    assert position_ids_from_mask(torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])).tolist() == [
        [0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]


@pytest.mark.parametrize("rows", [[1, 0, 1], [2, 0, 2, 1], [0, 1, 2, 2], [2]], ids=lambda r: str(r))
def test_prefix_shared_logprobs_equal_concatenated_forward(rows) -> None:
    model = tiny_llama()
    prompt_ids, prompt_mask, completion_ids, completion_mask = batch()
    rows = torch.tensor(rows)
    completion_ids, completion_mask = completion_ids[: len(rows)], completion_mask[: len(rows)]
    with torch.no_grad():
        fast, entropy = completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids,
                                            completion_mask, TEMPERATURE)
        slow = naive_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, TEMPERATURE)
    assert entropy is None
    assert fast.shape == completion_ids.shape and fast.dtype == torch.float32
    assert (fast < 0).all()  # log-probs of a 64-token vocabulary, none certain
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-5)


def test_temperature_is_applied() -> None:
    # the log-probs at T differ from those at T = 1 (guards against the temperature being ignored)
    model = tiny_llama()
    prompt_ids, prompt_mask, completion_ids, completion_mask = batch()
    rows = torch.tensor([1, 0, 1, 2])
    with torch.no_grad():
        at_t = completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, 0.5)[0]
        slow = naive_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, 0.5)
        at_1 = completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, 1.0)[0]
    torch.testing.assert_close(at_t, slow, rtol=0, atol=1e-5)
    assert (at_t - at_1).abs().max() > 1e-3


def test_padding_content_does_not_matter() -> None:
    model = tiny_llama()
    rows = torch.tensor([1, 0, 1, 2])
    with torch.no_grad():
        a = completion_logprobs(model, *batch(pad_value=0)[:2], rows, *batch(pad_value=0)[2:], TEMPERATURE)[0]
        b = completion_logprobs(model, *batch(pad_value=37)[:2], rows, *batch(pad_value=37)[2:], TEMPERATURE)[0]
    torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_gradient_equals_concatenated_forward() -> None:
    model = tiny_llama()
    prompt_ids, prompt_mask, completion_ids, completion_mask = batch()
    rows = torch.tensor([1, 0, 1, 2])
    fast, _ = completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask,
                                  TEMPERATURE)
    (fast * completion_mask).sum().backward()
    fast_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    slow = naive_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, TEMPERATURE)
    (slow * completion_mask).sum().backward()
    # every parameter, including the ones only the prompt pass reaches through the shared KV cache
    # (first layer's k/v projections get gradient from the prompt tokens of all rows)
    checked = 0
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert p.grad.abs().max() > 0, name
        torch.testing.assert_close(fast_grads[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)
        checked += 1
    assert checked == len(list(model.parameters()))


def test_entropy_equals_direct_computation() -> None:
    model = tiny_llama()
    prompt_ids, prompt_mask, completion_ids, completion_mask = batch()
    rows = torch.tensor([1, 0, 1, 2])
    logprobs, entropy = completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids,
                                            completion_mask, TEMPERATURE, with_entropy=True)
    assert logprobs.requires_grad and not entropy.requires_grad
    with torch.no_grad():
        logits = naive_logits(model, prompt_ids, prompt_mask, rows, completion_ids, TEMPERATURE)
        logp_all = torch.log_softmax(logits, dim=-1)
        direct = -(logp_all.exp() * logp_all).sum(dim=-1)  # H = -sum_v p_v log p_v
    torch.testing.assert_close(entropy, direct, rtol=0, atol=1e-5)
    # 0 < H <= log |V| = log 64 = 4.1588831
    assert (entropy > 0).all() and (entropy <= 4.1588831 + 1e-5).all()


def test_entropy_of_uniform_logits_is_log_vocab() -> None:
    # a zero LM head gives uniform logits: H = log 64 = 4.1588831, every log-prob = -log 64 = -4.1588831
    model = tiny_llama()
    with torch.no_grad():
        model.get_output_embeddings().weight.zero_()
    prompt_ids, prompt_mask, completion_ids, completion_mask = batch()
    rows = torch.tensor([1, 0, 1, 2])
    with torch.no_grad():
        logprobs, entropy = completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids,
                                                completion_mask, TEMPERATURE, with_entropy=True)
    torch.testing.assert_close(entropy, torch.full((4, 5), 4.1588831), rtol=0, atol=1e-5)
    torch.testing.assert_close(logprobs, torch.full((4, 5), -4.1588831), rtol=0, atol=1e-5)


def test_batched_logprobs_micro_batch_invariant() -> None:
    model = tiny_llama()
    prompt_ids, prompt_mask, completion_ids, completion_mask = batch()
    rows = torch.tensor([1, 0, 1, 2])
    one = batched_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, TEMPERATURE, 1)
    three = batched_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, TEMPERATURE, 3)
    assert not one.requires_grad and one.shape == (4, 5)
    torch.testing.assert_close(one, three, rtol=0, atol=1e-5)
    with torch.no_grad():
        slow = naive_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, TEMPERATURE)
    # batched_logprobs runs each micro-batch only up to its longest completion and returns 0 past each
    # row's end; on the real tokens it must equal the plain full forward.
    torch.testing.assert_close(three, slow * completion_mask, rtol=0, atol=1e-5)


def test_length_order_keeps_groups_whole_longest_first() -> None:
    from rlvr.logprobs import length_order

    # rows -> prompt [0,0,1,1,2,2], lengths [1,2, 5,1, 3,3]: group maxima 2, 5, 3
    # -> group 1 first (rows 2,3), then group 2 (rows 4,5), then group 0 (rows 0,1)
    mask = torch.zeros(6, 5)
    for row, length in enumerate([1, 2, 5, 1, 3, 3]):
        mask[row, :length] = 1
    order = length_order(mask, torch.tensor([0, 0, 1, 1, 2, 2]))
    assert order.tolist() == [2, 3, 4, 5, 0, 1]
