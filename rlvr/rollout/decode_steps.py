"""One decode step of the in-process engine, two ways. The sampling loop (rollout/hf.py) asks a
stepper for the next-token logits of its active rows, and tells it which rows to keep when finished ones leave.

- HFStepper: the transformers model's own forward on a DynamicCache (any causal LM transformers can run).
- FusedStepper: the same Llama-family computation written as one short loop over the layers, for models whose
  blocks are plain Linear layers (Llama, SmolLM2, Qwen2, Mistral without a sliding window). On this 2-core CPU a
  decode step of 16 rows of SmolLM2-135M is bound by its ~200 matrix products, each a skinny [16, 576] product:
  fusing q/k/v into one product and gate/up into another makes 4 per layer instead of 7 (measured: 114 -> 88 ms
  for all of them), the KV cache is written in place into buffers sized once (the dynamic cache concatenates
  every layer's keys and values every step), and the Python work per step is a few ops per layer instead of
  transformers' generic path; on CPU the products read weights prepacked for oneDNN (Projection). Its logits
  equal transformers' to float tolerance (tests/test_decode_steps.py).
  The fused q/k/v and gate/up weights are copies made once per generate call (the policy changes every step)
  and dropped with the stepper, before the update needs the memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from rlvr.model.family import full_attention_llama
from rlvr.rollout.prefill import SharedPrefix, prefill


class Stepper(Protocol):
    def step(self, tokens: torch.Tensor) -> torch.Tensor: ...  # [A] last tokens -> [A, V] next-token logits

    def keep(self, rows: torch.Tensor) -> None: ...  # [A'] indices of the active rows that stay


class HFStepper:
    """transformers' forward with its DynamicCache; the attention mask is allocated once and sliced."""

    def __init__(self, model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, group_size: int, max_new: int,
                 shared: SharedPrefix | None = None):
        self.model = model
        logits, self.cache, prompt_mask = prefill(model, prompt_ids, prompt_mask, shared)
        self.cache.batch_repeat_interleave(group_size)
        self.first_logits = logits.repeat_interleave(group_size, dim=0)  # [N*G, V]
        mask = prompt_mask.repeat_interleave(group_size, dim=0)
        self.position = mask.sum(dim=1, keepdim=True)
        self.mask = torch.cat([mask, mask.new_ones(mask.shape[0], max_new)], dim=1)
        self.width = prompt_mask.shape[1]

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.width += 1
        out = self.model(input_ids=tokens[:, None], attention_mask=self.mask[:, :self.width],
                         position_ids=self.position, past_key_values=self.cache, use_cache=True)
        self.position = self.position + 1
        return out.logits[:, -1]

    def keep(self, rows: torch.Tensor) -> None:
        self.cache.batch_select_indices(rows)
        self.mask, self.position = self.mask[rows], self.position[rows]


def _prepacking_available() -> bool:
    ops = getattr(torch.ops, "mkldnn", None)
    return torch.backends.mkldnn.is_available() and ops is not None and hasattr(ops, "_reorder_linear_weight") \
        and hasattr(ops, "_linear_pointwise")


class Projection:
    """x [A, in] -> x W^T + b [A, out]. On CPU in fp32 the weight is copied once per generate call into oneDNN's
    blocked layout (the prepacking inductor does for frozen CPU graphs): the skinny [<= 16, H] products of a decode
    step then read it at ~2x the rate MKL reads the plain row-major weight (measured on this CPU: the [16, 576] x
    [576, 49152] LM head 34 -> 12 ms, the layers' products ~1.3x). Elsewhere, plain F.linear."""

    PACK_ROWS = 16  # the row count oneDNN is told to expect (any count works; this is the usual decode batch)

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        self.weight, self.bias, self.packed = weight, bias, None
        if weight.device.type == "cpu" and weight.dtype == torch.float32 and _prepacking_available():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), self.PACK_ROWS)
            self.weight = None  # not kept: a fused q/k/v or gate/up copy would otherwise live twice while decoding

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)


class _Norm:
    """A Llama-family RMSNorm module as F.rms_norm (the same x * rsqrt(mean(x^2) + eps) * w, fewer ops and no
    module call: 44 vs 79 us for 16 rows on this CPU, 61 calls a step). Other norms are called as they are."""

    def __init__(self, module: torch.nn.Module):
        self.module, self.eps = module, getattr(module, "variance_epsilon", None)
        self.weight = getattr(module, "weight", None)  # the same Parameter for the stepper's life (one generate call)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.eps is None or self.weight is None or x.dtype != self.weight.dtype:
            return self.module(x)
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


@dataclass
class _Layer:
    attn_norm: _Norm
    qkv: Projection  # [(Hq + 2 Hkv) d, H]
    o: Projection
    mlp_norm: _Norm
    gate_up: Projection  # [2 I, H]
    down: Projection
    act: object


PROJECTIONS = {"self_attn": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ("gate_proj", "up_proj", "down_proj")}


def llama_blocks_supported(model, projection_ok) -> bool:
    """Is `model` a Llama-family causal LM with full attention (no sharded FSDP wrapper) whose every projection
    passes `projection_ok` and whose LM head is a plain Linear? The hand-written steps' shared precondition."""
    config = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    if not full_attention_llama(config) or inner is None:
        return False
    if getattr(inner, "rotary_emb", None) is None or not hasattr(inner, "layers"):
        return False
    for layer in inner.layers:
        for block, names in PROJECTIONS.items():
            part = getattr(layer, block, None)
            if not all(projection_ok(getattr(part, n, None)) for n in names):
                return False
    return type(model.get_output_embeddings()) is torch.nn.Linear


def fused_supported(model) -> bool:
    """Llama-family blocks built from plain Linear layers (a LoRA layer's adapter would be skipped by a copy)."""
    return llama_blocks_supported(model, lambda x: type(x) is torch.nn.Linear)


def cat_bias(*linears) -> torch.Tensor | None:
    """The concatenated biases of linears fused into one product (zeros for those without; a peft LoRA layer's
    bias is its base layer's), or None when none has one."""
    linears = [getattr(x, "base_layer", x) for x in linears]
    if all(x.bias is None for x in linears):
        return None
    return torch.cat([x.bias if x.bias is not None else x.weight.new_zeros(x.out_features) for x in linears])


def _fuse(layer) -> _Layer:
    a, m = layer.self_attn, layer.mlp
    return _Layer(attn_norm=_Norm(layer.input_layernorm),
                  qkv=Projection(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]),
                                 cat_bias(a.q_proj, a.k_proj, a.v_proj)),
                  o=Projection(a.o_proj.weight, a.o_proj.bias), mlp_norm=_Norm(layer.post_attention_layernorm),
                  gate_up=Projection(torch.cat([m.gate_proj.weight, m.up_proj.weight]),
                                     cat_bias(m.gate_proj, m.up_proj)),
                  down=Projection(m.down_proj.weight, m.down_proj.bias), act=m.act_fn)


def signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin [A, 1, d] = [s1, s2] -> [-s1, s2], so that rotate_half(x) * sin = roll(x, d/2) * signed sin."""
    half = sin.shape[-1] // 2
    return torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)


def rope_rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """RoPE as transformers' Llama applies it, x cos + rotate_half(x) sin with rotate_half(x) = [-x2, x1], written
    x cos + [x2, x1] [-s1, s2]: a roll and one multiply-add instead of two slices, a negation, a cat, two products
    and a sum. x [A, heads, d], cos/signed_sin [A, 1, d] (the sign folded in once a step, not once a layer)."""
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), signed_sin)


class FusedStepper:
    """Llama-family decode with fused projections and a preallocated KV cache. Prefill runs transformers' forward
    once (N prompts), whose per-layer keys/values are copied into the buffers, G rows per prompt."""

    @torch.no_grad()
    def __init__(self, model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, group_size: int, max_new: int,
                 shared: SharedPrefix | None = None):
        config, inner = model.config, model.model
        self.model, self.inner = model, inner
        self.layers = [_fuse(layer) for layer in inner.layers]
        head = model.get_output_embeddings()
        self.head = Projection(head.weight, head.bias)
        self.final_norm = _Norm(inner.norm)
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.scale = self.head_dim ** -0.5
        logits, cache, prompt_mask = prefill(model, prompt_ids, prompt_mask, shared)
        self.first_logits = logits.repeat_interleave(group_size, dim=0)  # [N*G, V]
        rows, prompt_len = prompt_mask.shape[0] * group_size, prompt_mask.shape[1]
        total = prompt_len + max_new
        self.keys, self.values = [], []
        for layer_cache in cache.layers:
            k = layer_cache.keys.new_empty(rows, self.kv_heads, total, self.head_dim)
            v = torch.empty_like(k)
            k[:, :, :prompt_len] = layer_cache.keys.repeat_interleave(group_size, dim=0)
            v[:, :, :prompt_len] = layer_cache.values.repeat_interleave(group_size, dim=0)
            self.keys.append(k)
            self.values.append(v)
        del cache
        mask = prompt_mask.repeat_interleave(group_size, dim=0).bool()
        self.mask = torch.cat([mask, mask.new_ones(rows, max_new)], dim=1)  # [R, total] True = attend
        self.position = mask.sum(dim=1)  # [R] next position of each row (left padding skipped)
        self.length = prompt_len  # filled cache columns

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        rows, t = tokens.shape[0], self.length
        x = self.inner.embed_tokens(tokens)  # [A, H]
        cos, sin = self.inner.rotary_emb(x[:, None], self.position[:, None])  # [A, 1, d] each
        sin = signed_sin(sin)
        # additive, in x's dtype, made once a step: SDPA would turn a bool mask into one in every layer
        mask = torch.zeros((rows, 1, 1, t + 1), dtype=x.dtype, device=x.device).masked_fill_(
            ~self.mask[:, None, None, :t + 1], float("-inf"))  # broadcast over heads and grouped queries
        groups = self.heads // self.kv_heads
        q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        for i, layer in enumerate(self.layers):
            qkv = layer.qkv(layer.attn_norm(x))
            # queries and keys rotated in one go: [A, Hq + Hkv, d]
            qk = rope_rotate(qkv[:, :q_size + kv_size].view(rows, self.heads + self.kv_heads, self.head_dim), cos, sin)
            q, k = qk[:, :self.heads], qk[:, self.heads:]
            self.keys[i][:, :, t] = k
            self.values[i][:, :, t] = qkv[:, q_size + kv_size:].view(rows, self.kv_heads, self.head_dim)
            # grouped-query attention without repeating K/V: a KV head's query heads become its query rows
            attn = F.scaled_dot_product_attention(q.view(rows, self.kv_heads, groups, self.head_dim),
                                                  self.keys[i][:, :, :t + 1], self.values[i][:, :, :t + 1],
                                                  attn_mask=mask, scale=self.scale)
            x = x + layer.o(attn.reshape(rows, q_size))
            gate, up = layer.gate_up(layer.mlp_norm(x)).chunk(2, dim=-1)
            x = x + layer.down(layer.act(gate) * up)
        self.length, self.position = t + 1, self.position + 1
        return self.head(self.final_norm(x))

    def keep(self, rows: torch.Tensor) -> None:
        self.keys = [k[rows] for k in self.keys]  # one copy per drop (rare: see rollout/hf.py)
        self.values = [v[rows] for v in self.values]
        self.mask, self.position = self.mask[rows], self.position[rows]


def make_stepper(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, group_size: int, max_new: int,
                 fused: bool = True, shared: SharedPrefix | None = None) -> HFStepper | FusedStepper:
    if fused and fused_supported(model):
        return FusedStepper(model, prompt_ids, prompt_mask, group_size, max_new, shared)
    return HFStepper(model, prompt_ids, prompt_mask, group_size, max_new, shared)
