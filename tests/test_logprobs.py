"""Completion log-probs (packed, prefix-shared, LM head on real tokens only) equal the plain "concatenate prompt
and completion" forward, in value and in gradient, on a tiny random Llama; past each row's end they are 0."""
from __future__ import annotations

import pytest
import torch

from conftest import tiny_llama
from rlvr.model.logprobs import batched_logprobs, completion_logprobs, position_ids_from_mask

torch.set_num_threads(1)

TEMPERATURE = 0.7


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
    real = completion_mask.bool()
    assert (fast[real] < 0).all() and (fast[~real] == 0).all()  # a 64-token vocabulary: no token is certain
    torch.testing.assert_close(fast, slow * completion_mask, rtol=0, atol=1e-5)


def test_temperature_is_applied() -> None:
    # the log-probs at T differ from those at T = 1 (guards against the temperature being ignored)
    model = tiny_llama()
    prompt_ids, prompt_mask, completion_ids, completion_mask = batch()
    rows = torch.tensor([1, 0, 1, 2])
    with torch.no_grad():
        at_t = completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, 0.5)[0]
        slow = naive_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, 0.5)
        at_1 = completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, 1.0)[0]
    torch.testing.assert_close(at_t, slow * completion_mask, rtol=0, atol=1e-5)
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
    torch.testing.assert_close(entropy, direct * completion_mask, rtol=0, atol=1e-5)
    # 0 < H <= log |V| = log 64 = 4.1588831 on the real tokens
    real = completion_mask.bool()
    assert (entropy[real] > 0).all() and (entropy[real] <= 4.1588831 + 1e-5).all()


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
    torch.testing.assert_close(entropy, 4.1588831 * completion_mask, rtol=0, atol=1e-5)
    torch.testing.assert_close(logprobs, -4.1588831 * completion_mask, rtol=0, atol=1e-5)


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
    from rlvr.types import length_order

    # rows -> prompt [0,0,1,1,2,2], lengths [1,2, 5,1, 3,3]: group maxima 2, 5, 3
    # -> group 1 first (rows 2,3), then group 2 (rows 4,5), then group 0 (rows 0,1)
    mask = torch.zeros(6, 5)
    for row, length in enumerate([1, 2, 5, 1, 3, 3]):
        mask[row, :length] = 1
    order = length_order(mask, torch.tensor([0, 0, 1, 1, 2, 2]))
    assert order.tolist() == [2, 3, 4, 5, 0, 1]


# --- the fast paths equal the plain one ---

def _padded_vs_packed(monkeypatch, chunk: int, budget: int, entropy_grad: bool = False):
    """(packed values, packed grads, padded values, padded grads) with the LM head cut into `chunk`-token pieces
    and packs of at most `budget` tokens."""
    import rlvr.model.logprobs as lp

    monkeypatch.setattr(lp, "HEAD_CHUNK_TOKENS", chunk)
    monkeypatch.setattr(lp, "MAX_PACKED_TOKENS", budget)
    model = tiny_llama()
    prompt_ids, prompt_mask, completion_ids, completion_mask = batch()
    rows = torch.tensor([1, 0, 1, 2])
    results = []
    for forward in (lp.completion_logprobs, lp.padded_completion_logprobs):
        model.zero_grad(set_to_none=True)
        values, entropy = forward(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask,
                                  TEMPERATURE, with_entropy=True, entropy_grad=entropy_grad)
        # a loss that weighs every token differently, so a token scored from the wrong state changes the gradient
        weights = torch.arange(1, 21, dtype=torch.float32).reshape(4, 5) * completion_mask
        ((values + 0.1 * entropy) * weights).sum().backward()
        results += [(values.detach(), entropy.detach()), {n: p.grad.clone() for n, p in model.named_parameters()}]
    return results


@pytest.mark.parametrize("chunk, budget", [(1024, 4096), (3, 4096), (1024, 8), (2, 8)],
                         ids=["one-pack-one-chunk", "head-chunks", "several-packs", "both"])
def test_packed_chunked_equals_padded_forward(monkeypatch, chunk, budget) -> None:
    """Rows of 5, 3, 1 and 4 real tokens (13) on prompts of 4, 6, 4 and 1 tokens: chunk 3 cuts the LM head into 5
    checkpointed pieces (13 = 3+3+3+3+1); budget 8 cuts the rows into 3 packs of prompt + inputs (a row's last token
    is no input): [row 0] 4+4, [row 1] 6+2, [rows 2, 3] (4+0) + (1+3)."""
    packed, packed_grads, padded, padded_grads = _padded_vs_packed(monkeypatch, chunk, budget, entropy_grad=True)
    mask = batch()[3]
    torch.testing.assert_close(packed[0], padded[0] * mask, rtol=0, atol=1e-5)
    torch.testing.assert_close(packed[1], padded[1] * mask, rtol=0, atol=1e-5)
    for name, grad in padded_grads.items():
        # relative to the tensor's largest entry: the sums run in another order (measured <= 6.5e-7); a token
        # scored from the wrong hidden state, or a pack that sees another row, moves it by orders of magnitude
        scale = grad.abs().max()
        assert scale > 0, name
        assert (packed_grads[name] - grad).abs().max() / scale < 1e-5, name


def test_packing_layout_by_hand() -> None:
    """Prompts [a b] (row 0, left-padded by one) and [c]; completions: row 0 -> prompt 0 [x y], row 1 -> prompt 1
    [z]. Packed: a b x c (y predicts nothing; z's row has no input token), positions 0 1 2 0. x sees a b x; c sees
    only itself. States: x <- b (index 1), y <- x (2), z <- c (3)."""
    from rlvr.model.packing import pack

    prompt_ids = torch.tensor([[0, 11, 12], [0, 0, 13]])
    prompt_mask = torch.tensor([[0, 1, 1], [0, 0, 1]])
    completion_ids = torch.tensor([[21, 22], [23, 0]])
    completion_mask = torch.tensor([[1, 1], [1, 0]])
    packed = pack(prompt_ids, prompt_mask, torch.tensor([0, 1]), completion_ids, completion_mask)
    assert packed.input_ids.tolist() == [[11, 12, 21, 13]]
    assert packed.positions.tolist() == [[0, 1, 2, 0]]
    assert packed.allowed.int().tolist() == [[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 1]]]
    assert packed.state_index.tolist() == [1, 2, 3]


def test_packing_two_rows_of_one_prompt_do_not_see_each_other() -> None:
    """Prompt [a]; rows 0 and 1 both on it with [x y] and [u v]: sequence [a x u]. u (row 1) sees a and u, not x."""
    from rlvr.model.packing import pack

    packed = pack(torch.tensor([[11]]), torch.tensor([[1]]), torch.tensor([0, 0]), torch.tensor([[21, 22], [31, 32]]),
                  torch.tensor([[1, 1], [1, 1]]))
    assert packed.input_ids.tolist() == [[11, 21, 31]]
    assert packed.positions.tolist() == [[0, 1, 1]]
    assert packed.allowed.int().tolist() == [[[1, 0, 0], [1, 1, 0], [1, 0, 1]]]
    assert packed.state_index.tolist() == [0, 1, 0, 2]  # x <- a, y <- x, u <- a, v <- u


def test_shared_prompt_prefix_laid_out_once_by_hand() -> None:
    """Prompts [s s s s a] and (left-padded) [s s s s b c] open with 4 equal tokens (MIN_SHARED_PREFIX): packed
    s s s s | a x | b c z, positions 0-3 | 4 5 | 4 5 6. a and b see the shared s's, not each other; x sees s a x;
    z sees s b c z. States: x <- a (4), y <- x (5), z <- c (7), w <- z (8)."""
    from rlvr.model.packing import pack

    prompt_ids = torch.tensor([[0, 9, 9, 9, 9, 11], [9, 9, 9, 9, 12, 13]])
    prompt_mask = torch.tensor([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    packed = pack(prompt_ids, prompt_mask, torch.tensor([0, 1]), torch.tensor([[21, 22], [31, 32]]),
                  torch.tensor([[1, 1], [1, 1]]))
    assert packed.input_ids.tolist() == [[9, 9, 9, 9, 11, 21, 12, 13, 31]]
    assert packed.positions.tolist() == [[0, 1, 2, 3, 4, 5, 4, 5, 6]]
    s = [1, 1, 1, 1]
    assert packed.allowed.int().tolist() == [[
        [1, 0, 0, 0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0, 0, 0],
        s + [1, 0, 0, 0, 0], s + [1, 1, 0, 0, 0],  # a, x
        s + [0, 0, 1, 0, 0], s + [0, 0, 1, 1, 0], s + [0, 0, 1, 1, 1]]]  # b, c, z
    assert packed.state_index.tolist() == [4, 5, 7, 8]


def test_prompt_that_is_all_shared_prefix() -> None:
    """Prompts [s s s s] and [s s s s b]: the first is all prefix, so its row's first token is predicted by the last
    shared token (index 3); packed s s s s | x | b z."""
    from rlvr.model.packing import pack

    packed = pack(torch.tensor([[0, 9, 9, 9, 9], [9, 9, 9, 9, 12]]), torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]]),
                  torch.tensor([0, 1]), torch.tensor([[21, 22], [31, 32]]), torch.tensor([[1, 1], [1, 1]]))
    assert packed.input_ids.tolist() == [[9, 9, 9, 9, 21, 12, 31]]
    assert packed.positions.tolist() == [[0, 1, 2, 3, 4, 4, 5]]
    assert packed.state_index.tolist() == [3, 4, 5, 6]


@pytest.mark.parametrize("chunk, budget", [(1024, 4096), (3, 12)], ids=["one-pack", "chunks-and-packs"])
def test_shared_prefix_packing_equals_padded_forward(monkeypatch, chunk, budget) -> None:
    """Three prompts opening with the same 5 tokens (one of them nothing more, one left-padded): log-probs and every
    gradient equal the padded forward's, also with the LM head in chunks and the rows cut into several packs."""
    import rlvr.model.logprobs as lp

    monkeypatch.setattr(lp, "HEAD_CHUNK_TOKENS", chunk)
    monkeypatch.setattr(lp, "MAX_PACKED_TOKENS", budget)
    model = tiny_llama()
    prefix = [7, 3, 9, 1, 4]
    prompt_ids = torch.tensor([[0, 0] + prefix, prefix + [11, 12], [0] + prefix + [13]])
    prompt_mask = (torch.arange(7)[None] >= torch.tensor([[2], [0], [1]])).long()
    g = torch.Generator().manual_seed(3)
    completion_ids = torch.randint(0, 64, (5, 4), generator=g)
    completion_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    rows = torch.tensor([0, 0, 1, 2, 2])
    weights = torch.arange(1, 21, dtype=torch.float32).reshape(5, 4) * completion_mask
    results = []
    for forward in (lp.completion_logprobs, lp.padded_completion_logprobs):
        model.zero_grad(set_to_none=True)
        values, _ = forward(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, TEMPERATURE)
        (values * weights).sum().backward()
        results.append((values.detach() * completion_mask, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (packed, packed_grads), (padded, padded_grads) = results
    torch.testing.assert_close(packed, padded, rtol=0, atol=1e-5)
    for name, grad in padded_grads.items():
        scale = grad.abs().max()
        assert scale > 0, name
        assert (packed_grads[name] - grad).abs().max() / scale < 1e-5, name
