"""Attention of the packed training forward by blocks of shared keys.

The packed sequence (rlvr/model/packing.py) holds every distinct prompt of a micro-batch and every completion row; its
mask lets a completion token see its own prompt and its own earlier tokens only. Dense attention over that
sequence computes a [T, T] score matrix of which ~85 % is masked out on the benchmark's batch, and on this CPU the
masked softmax over it was a visible share of the update. Here each block (a prompt, or a completion row) gathers
its own queries and keys, runs one scaled_dot_product_attention over the [blocks, queries, keys] batch, and the
outputs are scattered back to their tokens. The result is the dense one to float tolerance, values and gradients
(tests/test_blocked_attention.py).

It is wired into transformers through its attention registry (AttentionInterface): for the duration of one packed
forward the model's config names "rlvr_blocked" and the blocks travel as a keyword argument, which Llama-family
models pass from the model's forward down to the attention function. Any other call (no blocks given) takes
transformers' SDPA path unchanged.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from rlvr.model.family import full_attention_llama
from rlvr.model.packing import AttentionBlocks

NAME = "rlvr_blocked"
# Attention implementations whose numerics the blocked path reproduces (both are exact softmax attention).
REPLACEABLE = ("sdpa", "eager")


def blocked_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      rlvr_blocks: AttentionBlocks | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """query [1, Hq, T, d], key/value [1, Hkv, T, d] -> ([1, T, Hq, d], None), transformers' attention contract."""
    if rlvr_blocks is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    b = rlvr_blocks
    # index_select, not advanced indexing: its backward is an index_add, where indexing's is a slower index_put
    q, k, v = (_gather(x[0], index) for x, index in ((query, b.query_index), (key, b.key_index),
                                                     (value, b.key_index)))  # [K, H, Q or S, d]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=b.allowed[:, None], dropout_p=dropout, scale=scaling,
                                         enable_gqa=q.shape[1] != k.shape[1])  # [K, Hq, Q, d]
    tokens = out.transpose(1, 2).flatten(0, 1).index_select(0, b.token_slot)  # [T, Hq, d] in sequence order
    return tokens[None], None


def _gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x [H, T, d], index [K, N] -> [K, H, N, d]."""
    return x.index_select(1, index.flatten()).unflatten(1, index.shape).transpose(0, 1)


AttentionInterface.register(NAME, blocked_attention)


def blocked_supported(model) -> bool:
    """Llama-family attention with full causal windows, run by SDPA or eager (both exact softmax)."""
    config = getattr(model, "config", None)
    return full_attention_llama(config) and getattr(config, "_attn_implementation", None) in REPLACEABLE


@contextlib.contextmanager
def blocked_attention_on(model) -> Iterator[None]:
    """Route the model's attention through blocked_attention for one forward (and its backward: autograd keeps
    the functions it ran, so the config may be restored before backward)."""
    config = model.config
    before = config._attn_implementation
    config._attn_implementation = NAME
    try:
        yield
    finally:
        config._attn_implementation = before
