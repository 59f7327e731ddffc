"""Model forward -> per-token log-probs (and entropy) of completion tokens. With rlvr/model/fused_head.py (the LM
head and log p(target) as one autograd node), the only modules that touch logits.

Savings over the usual "concatenate prompt and completion, pad to the longest, run the model on B rows":
- Packing: the micro-batch's real tokens go through the model as ONE sequence without
  padding: each distinct prompt once, then each completion, with a block mask so that a completion sees its own
  prompt and its own earlier tokens only. On the benchmark's batch (2 prompts of 49 tokens, 16 completions of
  7-48 tokens) that is 441 tokens instead of 98 + 16 x 48 = 866, and one large matrix product per weight instead
  of a skinny one per row.
- Prefix sharing: the G completions of a group share one prompt, run once (packing keeps this); the opening that
  all distinct prompts of a micro-batch share (system turn, fixed task wording) is run once too.
- With gradients, RMSNorm and the SwiGLU product run as single autograd nodes (rlvr/model/fused_layers.py) and a tied
  embedding adds its gradient rows straight into the weight's gradient (rlvr/model/fused_head.py).
- Only real completion tokens go through the LM head (49k vocabulary: ~20 % of a 135M model's FLOPs), in chunks
  of HEAD_CHUNK_TOKENS rows, recomputed in the backward pass (torch.utils.checkpoint) when there are several, so
  the [tokens, vocabulary] fp32 logits never exist for the whole micro-batch at once.
"""
from __future__ import annotations

import contextlib

import torch
from torch.utils.checkpoint import checkpoint

from rlvr.model.blocked_attention import blocked_attention_on, blocked_supported
from rlvr.model.fused_head import fused_head_applies, head_logprobs_fused, tied_input_embeddings
from rlvr.model.fused_layers import fused_layers_on
from rlvr.model.packing import Packed, additive_mask, is_prefix_mask, pack, packed_tokens, row_groups
from rlvr.model.precision import head_context, head_is_fp32, in_compute_dtype
from rlvr.types import length_order, row_extent

# Rows of [tokens, vocabulary] logits made at once: 1024 x 49152 fp32 = 200 MB for SmolLM2's vocabulary.
HEAD_CHUNK_TOKENS = 1024
# Tokens in one packed sequence; its [T, T] mask (and attention scores) grow with the square, so longer micro-
# batches are cut into several packs of whole rows.
MAX_PACKED_TOKENS = 4096


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, matching the positions used when sampling (else log-probs drift)."""
    return (attention_mask.long().cumsum(dim=-1) - 1).clamp(min=0)


def prefill(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, rows: torch.Tensor):
    """Run distinct prompts once; return (last prompt hidden state [B, 1, H], KV cache gathered to B rows).

    `rows` [B] maps each completion row to its prompt's row in prompt_ids.
    """
    used, gather = torch.unique(rows, return_inverse=True)
    out = model.base_model(input_ids=prompt_ids[used], attention_mask=prompt_mask[used],
                           position_ids=position_ids_from_mask(prompt_mask[used]), use_cache=True)
    cache = out.past_key_values
    cache.batch_select_indices(gather)  # differentiable gather: gradients accumulate into the shared prompt
    return out.last_hidden_state[gather, -1:], cache


def completion_hidden_states(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, rows: torch.Tensor,
                             completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """[B, C, H] hidden states whose LM-head output predicts completion token t (state of token t - 1)."""
    last_prompt_state, cache = prefill(model, prompt_ids, prompt_mask, rows)
    mask = prompt_mask[rows]
    attention = torch.cat([mask, torch.ones_like(completion_mask, dtype=mask.dtype)], dim=1)
    positions = mask.sum(dim=1, keepdim=True) + torch.arange(completion_ids.shape[1], device=mask.device)
    out = model.base_model(input_ids=completion_ids, attention_mask=attention, position_ids=positions,
                           past_key_values=cache, use_cache=True)
    return torch.cat([last_prompt_state, out.last_hidden_state[:, :-1]], dim=1)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, with_entropy: bool, entropy_grad: bool = False
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """logits [..., V], targets [...] -> (log p(target) [...], entropy [...] or None).

    The entropy keeps its graph only when asked (an entropy bonus in the loss): as a metric, its [..., V]
    softmax would otherwise be held for the backward pass for nothing.
    """
    log_norm = torch.logsumexp(logits, dim=-1)
    logprobs = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_norm
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = log_norm - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)
    return logprobs, entropy


def head_logprobs(head, states: torch.Tensor, targets: torch.Tensor, temperature: float, with_entropy: bool,
                  entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """states [N, H], targets [N] -> (log p(target) [N], entropy [N] or None) under head(states) / temperature.

    The [N, V] logits are made HEAD_CHUNK_TOKENS rows at a time. With gradients and several chunks each chunk is
    checkpointed: its logits are freed after the forward and made again in the backward, one chunk at a time
    (one extra LM-head product per chunk, in exchange for never holding [N, V] fp32 for the backward)."""
    fused, fp32 = fused_head_applies(head) and not entropy_grad, head_is_fp32(head)

    def chunk(h: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        if fused:  # one buffer of [n, V] instead of ~10 (rlvr/model/fused_head.py)
            with head_context(head):  # model.lm_head_fp32: the product in fp32 (precision.keep_head_fp32)
                return head_logprobs_fused(h.float() if fp32 else h, head.weight, t, temperature, with_entropy)
        return token_logprobs(head(h).float() / temperature, t, with_entropy, entropy_grad)

    n = states.shape[0]
    if n <= HEAD_CHUNK_TOKENS:
        return chunk(states, targets)
    recompute = torch.is_grad_enabled() and states.requires_grad
    parts = [checkpoint(chunk, states[i:i + HEAD_CHUNK_TOKENS], targets[i:i + HEAD_CHUNK_TOKENS], use_reentrant=False)
             if recompute else chunk(states[i:i + HEAD_CHUNK_TOKENS], targets[i:i + HEAD_CHUNK_TOKENS])
             for i in range(0, n, HEAD_CHUNK_TOKENS)]
    entropy = torch.cat([e for _, e in parts]) if with_entropy else None
    return torch.cat([lp for lp, _ in parts]), entropy


def prefix_mask(mask: torch.Tensor) -> torch.Tensor:
    """[B, C] -> 1 at every position up to and including each row's last nonzero one (0 after it)."""
    return (torch.arange(mask.shape[1], device=mask.device) < row_extent(mask)[:, None]).to(mask.dtype)


def _unpack(values: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """[N] values of the real tokens (row-major) -> [B, C], 0 elsewhere (differentiable)."""
    return torch.zeros(real.shape, dtype=values.dtype, device=values.device).masked_scatter(real, values)


@in_compute_dtype  # under torch.autocast for a mixed-precision model (rlvr/model/precision.py)
def completion_logprobs(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, rows: torch.Tensor,
                        completion_ids: torch.Tensor, completion_mask: torch.Tensor, temperature: float = 1.0,
                        with_entropy: bool = False, entropy_grad: bool = False
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """-> (log pi(token) [B, C], entropy [B, C] or None) under logits / temperature, 0 past each row's end.

    Logits are divided by the sampling temperature so that pi_theta is the distribution the rollouts were
    drawn from (TRL does the same); the ratio and the KL are then taken on like terms. The forward is packed
    (rlvr.model.packing); a mask with holes (an episode's environment turns) is packed over its span.
    """
    # An episode's loss mask has holes where the environment spoke: its tokens are packed up to the
    # row's last sampled one (`span`, a prefix mask), and only the sampled positions' states reach the LM head.
    span = completion_mask if is_prefix_mask(completion_mask) else prefix_mask(completion_mask)
    if rows.numel() > 1 and packed_tokens(prompt_mask, rows, span) > MAX_PACKED_TOKENS:
        parts = [completion_logprobs(model, prompt_ids, prompt_mask, rows[g], completion_ids[g], completion_mask[g],
                                     temperature, with_entropy, entropy_grad)
                 for g in row_groups(prompt_mask, rows, span, MAX_PACKED_TOKENS)]  # consecutive runs
        return torch.cat([lp for lp, _ in parts]), torch.cat([e for _, e in parts]) if with_entropy else None
    packed = pack(prompt_ids, prompt_mask, rows, completion_ids, span)
    states = _packed_states(model, packed)
    head = model.get_output_embeddings()
    real = completion_mask.bool()
    if span is not completion_mask:  # the states are row-major over the span; keep the sampled positions'
        states = states[real[span.bool()]]
    logprobs, entropy = head_logprobs(head, states, completion_ids[real], temperature, with_entropy, entropy_grad)
    return _unpack(logprobs, real), None if entropy is None else _unpack(entropy, real)


def _packed_states(model, packed: Packed) -> torch.Tensor:
    """[N, H]: the hidden state that predicts each real completion token. Llama-family models attend by blocks
    (rlvr/model/blocked_attention.py); others through the [T, T] mask."""
    training = torch.is_grad_enabled()
    embeds = tied_input_embeddings(model, packed.input_ids) if training else None
    tokens = {"input_ids": packed.input_ids} if embeds is None else {"inputs_embeds": embeds}
    if blocked_supported(model):
        with blocked_attention_on(model), fused_layers_on(model) if training else contextlib.nullcontext():
            out = model.base_model(**tokens, position_ids=packed.positions, attention_mask=None, use_cache=False,
                                   rlvr_blocks=packed.blocks)
    else:
        out = model.base_model(**tokens, position_ids=packed.positions,
                               attention_mask=additive_mask(packed.allowed, model.dtype), use_cache=False)
    # index_select, not out.last_hidden_state[0, state_index]: the G rows of a group all read their prompt's last
    # state, and indexing's backward (index_put with accumulate) adds those duplicates from several threads in a
    # racy order on a CPU (torch.use_deterministic_algorithms' list), so two runs of one seed ended ~1e-7 apart
    # index_select's backward is index_add, which sums the duplicates in index order on a CPU.
    return out.last_hidden_state[0].index_select(0, packed.state_index)


@in_compute_dtype  # under torch.autocast for a mixed-precision model (rlvr/model/precision.py)
def padded_completion_logprobs(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, rows: torch.Tensor,
                               completion_ids: torch.Tensor, completion_mask: torch.Tensor, temperature: float = 1.0,
                               with_entropy: bool = False, entropy_grad: bool = False
                               ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The plain forward: B rows padded to C on top of the shared prompts' cache, the LM head on every position.
    Kept for masks with holes and as the reference the packed forward is tested against."""
    states = completion_hidden_states(model, prompt_ids, prompt_mask, rows, completion_ids, completion_mask)
    logits = model.get_output_embeddings()(states).float() / temperature
    return token_logprobs(logits, completion_ids, with_entropy, entropy_grad)


@torch.no_grad()
def batched_logprobs(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, rows: torch.Tensor,
                     completion_ids: torch.Tensor, completion_mask: torch.Tensor, temperature: float,
                     micro_batch_size: int) -> torch.Tensor:
    """Log-probs without gradients (old policy, reference), in micro-batches to bound memory.

    Rows are taken longest group first (`length_order`) and each micro-batch is cut to its longest
    completion (padding costs as much as real tokens); the result is [B, C] in the original order, 0 past
    each row's end.
    """
    out = torch.zeros(completion_ids.shape, dtype=torch.float32, device=completion_ids.device)
    order = length_order(completion_mask, rows)
    for i in range(0, completion_ids.shape[0], micro_batch_size):
        part = order[i:i + micro_batch_size]
        width = max(int(row_extent(completion_mask[part]).max()), 1)  # holes: episodes
        out[part, :width] = completion_logprobs(model, prompt_ids, prompt_mask, rows[part],
                                                completion_ids[part, :width], completion_mask[part, :width],
                                                temperature)[0]
    return out * completion_mask
