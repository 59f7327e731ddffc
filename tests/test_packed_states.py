"""The packed forward's hidden states (rlvr/model/logprobs.py `_packed_states`) on both of its attention paths: the
blocked one (Llama family) and the dense [T, T] mask every other model takes. In a pack, prompts that open alike
share that opening and several completions follow one prompt, so positions jump back inside the sequence: each
token's position and the tokens it may see must come from the layout, never from its index in the pack. Tiny
random Llama."""
from __future__ import annotations

import torch

import rlvr.model.logprobs as lp
from conftest import tiny_llama
from rlvr.model.packing import pack

torch.set_num_threads(1)

TEMPERATURE = 0.7
PREFIX = [7, 3, 9, 1, 4]


def shared_prefix_batch():
    """Three prompts opening with the same 5 tokens (one of them nothing more, one left-padded), two completions on
    prompts 0 and 2: the layout of tests/test_logprobs.py::test_shared_prefix_packing_equals_padded_forward."""
    prompt_ids = torch.tensor([[0, 0] + PREFIX, PREFIX + [11, 12], [0] + PREFIX + [13]])
    prompt_mask = (torch.arange(7)[None] >= torch.tensor([[2], [0], [1]])).long()
    completion_ids = torch.randint(0, 64, (5, 4), generator=torch.Generator().manual_seed(3))
    completion_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    return prompt_ids, prompt_mask, torch.tensor([0, 0, 1, 2, 2]), completion_ids, completion_mask


def test_the_dense_path_equals_the_padded_forward_with_a_shared_prefix(monkeypatch) -> None:
    """A model without blocked attention (the dense [T, T] mask): log-probs and every gradient equal the padded
    forward's. The premise: the pack's positions are not its indices (they jump back after the shared opening and
    between completions of one prompt), so a forward that numbered the tokens 0..T-1, or let them attend causally
    to the whole pack, would see other rows' tokens at other distances."""
    monkeypatch.setattr(lp, "blocked_supported", lambda model: False)
    model = tiny_llama()
    prompt_ids, prompt_mask, rows, completion_ids, completion_mask = shared_prefix_batch()
    positions = pack(prompt_ids, prompt_mask, rows, completion_ids, completion_mask).positions[0]
    assert (positions.diff() != 1).sum() >= 3  # positions jump back at least at every row after the first
    weights = torch.arange(1, 21, dtype=torch.float32).reshape(5, 4) * completion_mask
    results = []
    for forward in (lp.completion_logprobs, lp.padded_completion_logprobs):
        model.zero_grad(set_to_none=True)
        values, _ = forward(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, TEMPERATURE)
        (values * weights).sum().backward()
        results.append((values.detach() * completion_mask, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (packed, packed_grads), (padded, padded_grads) = results
    assert padded.abs().max() > 1  # real log-probs
    torch.testing.assert_close(packed, padded, rtol=0, atol=1e-5)
    for name, grad in padded_grads.items():
        scale = grad.abs().max()
        assert scale > 0, name
        assert (packed_grads[name] - grad).abs().max() / scale < 1e-5, name


def _saved_bytes(model, batch) -> int:
    """Bytes autograd keeps for the backward of one training forward (rlvr/model/fused_layers.py's claim)."""
    saved = 0

    def keep(t: torch.Tensor) -> torch.Tensor:
        nonlocal saved
        saved += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        values, _ = lp.completion_logprobs(model, *batch, TEMPERATURE)
    values.sum().backward()
    return saved


def test_the_training_forward_runs_the_fused_layers(monkeypatch) -> None:
    """fused_layers.py: in the update's forward (the blocked path of a Llama-family fp32 model) RMSNorm and the SwiGLU
    product are single autograd nodes that keep less for the backward than transformers' layers do."""
    model = tiny_llama()
    batch = shared_prefix_batch()
    fused = _saved_bytes(model, batch)
    monkeypatch.setattr(lp, "fused_layers_on", lambda model: torch.enable_grad())  # transformers' own layers
    plain = _saved_bytes(model, batch)
    assert fused < plain  # 0.86 of it on this model and batch


def test_the_packed_forward_builds_no_kv_cache_on_either_path(monkeypatch) -> None:
    """Scoring keeps one layer's intermediates at a time (grpo/memory_plan.py scoring_bytes): a KV cache built by the
    packed forward would hold every layer's keys and values until it returns, 2 x layers x T x kv heads x head dim
    more, with the same hidden states. Catches use_cache=False turned True or dropped (the config's default is True)
    on the blocked path and on the dense one."""
    prompt_ids, prompt_mask, rows, completion_ids, completion_mask = shared_prefix_batch()
    for blocked in (True, False):
        model, seen = tiny_llama(), []
        model.base_model.register_forward_hook(
            lambda module, args, kwargs, out, seen=seen: seen.append(out.past_key_values), with_kwargs=True)
        monkeypatch.setattr(lp, "blocked_supported", lambda m, blocked=blocked: blocked)
        with torch.no_grad():
            lp.completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, TEMPERATURE)
        assert model.config.use_cache and seen == [None], (blocked, seen)  # the config would build one


def test_the_training_forward_of_a_tied_model_skips_the_plain_embedding() -> None:
    """With the head's weight tied to the input embedding (SmolLM2), the update's forward takes the lookup that
    adds its rows straight into .grad (fused_head.tied_input_embeddings): the plain nn.Embedding's backward would
    build a dense [V, H] zero gradient (113 MB for SmolLM2) and add it whole to the head's. Scoring without
    gradients takes the plain lookup. Catches the condition inverted or dropped."""
    model = tiny_llama(tied=True)
    prompt_ids, prompt_mask, rows, completion_ids, completion_mask = shared_prefix_batch()
    plain_lookups = []
    model.get_input_embeddings().register_forward_hook(lambda module, args, out: plain_lookups.append(out.shape))
    with torch.no_grad():
        lp.completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask, TEMPERATURE)
    assert len(plain_lookups) == 1
    logprobs, _ = lp.completion_logprobs(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask,
                                         TEMPERATURE)
    logprobs.sum().backward()
    assert len(plain_lookups) == 1 and model.get_input_embeddings().weight.grad.abs().sum() > 0
