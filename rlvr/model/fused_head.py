"""LM head + log p(target) (+ entropy) in one autograd node, for the vocabulary-sized work.

The plain composition `logsumexp(head(h) / T)` then `gather` makes ~10 full passes over the [N, V] logits (49k
columns for SmolLM2), each into a freshly allocated buffer: the division by T, logsumexp's max / subtract / exp /
sum, a softmax and a product for the entropy metric, then in the backward logsumexp's subtract / exp / multiply and
the division's gradient. On the benchmark's update (455 tokens, [455, 49152] fp32 = 89 MB a pass) those passes took
about a tenth of the step. Here the forward keeps one buffer: logits, shifted by their row max in place,
exponentiated (in place, or into one second buffer when the entropy is wanted), summed; the backward turns that
same buffer into d(log p)/d(logits) = onehot - softmax in place and runs the head's two products. Same values and
gradients as the plain path to float tolerance (tests/test_fused_head.py).

Entropy is a metric here (no gradient through it); an entropy bonus in the loss takes the plain path.

Mixed precision (rlvr/model/precision.py): under the caller's autocast the head product runs in bf16 and the
logits are upcast to fp32 before anything else, as in the plain `head(h).float()`; autocast is off while autograd
runs a backward, so the backward replays the forward's autocast for its two products (what torch.amp.custom_bwd
does for one fixed device type) instead of running them in fp32 on fp32 master weights.
"""
from __future__ import annotations

import torch

from rlvr.model.precision import active_autocast, replay_autocast


def fused_head_applies(head) -> bool:
    """A bias-free nn.Linear holding a plain tensor (a DTensor shard or a wrapped head takes the plain path)."""
    if type(head) is not torch.nn.Linear or head.bias is not None:
        return False
    from torch.distributed.tensor import DTensor

    return not isinstance(head.weight, DTensor)


def head_logprobs_fused(states: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float,
                        with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """states [N, H], weight [V, H], targets [N] -> (log softmax(states W^T / T)[target] [N], entropy [N] or None).

    Differentiable in states and weight through log p only (the entropy is returned detached)."""
    logprobs, entropy = _HeadLogprob.apply(states, weight, targets, temperature, with_entropy)
    return logprobs, entropy if with_entropy else None


# Rows exponentiated at once when the entropy needs exp(y) beside y: 16 x 49152 fp32 = 3 MB, a cache-sized temporary
# where a whole second [N, V] buffer would be fresh memory (page faults) on every call.
EXP_BLOCK_ROWS = 16


def _exp_in_place(shifted: torch.Tensor, row_dots: bool) -> torch.Tensor | None:
    """shifted [N, V] = y -> exp(y) in place; with row_dots, also returns sum_j exp(y_j) y_j per row [N]."""
    if not row_dots:
        shifted.exp_()
        return None
    dots = shifted.new_empty(shifted.shape[0])
    for start in range(0, shifted.shape[0], EXP_BLOCK_ROWS):
        block = shifted[start:start + EXP_BLOCK_ROWS]
        exps = torch.exp(block)
        dots[start:start + EXP_BLOCK_ROWS] = torch.linalg.vecdot(exps, block)
        block.copy_(exps)
    return dots


class _HeadLogprob(torch.autograd.Function):
    @staticmethod
    def forward(ctx, states, weight, targets, temperature, with_entropy):
        logits = (states @ weight.t()).float()  # [N, V]; the only full-size buffer unless the entropy is wanted
        if temperature != 1.0:
            logits.div_(temperature)
        picked = logits.gather(1, targets[:, None]).squeeze(1)  # z[target], before the buffer is overwritten
        top = logits.amax(dim=1)
        shifted = logits.sub_(top[:, None])  # y = z - max z: exp(y) <= 1, no overflow
        weighted = _exp_in_place(shifted, with_entropy)  # shifted now holds e = exp(y)
        exps = shifted
        total = exps.sum(dim=1)  # s = sum e
        log_total = total.log()
        logprobs = picked - top - log_total  # z_t - logsumexp z
        entropy = torch.zeros_like(logprobs)
        if with_entropy:
            # H = -sum p log p with p = e / s and log p = y - log s:  H = log s - (sum e y) / s
            entropy = log_total - weighted / total
        ctx.temperature = temperature
        ctx.consumed = False
        # under mixed precision the product above ran in bf16: the backward's two products run the same way
        ctx.autocast = active_autocast(states.device.type)
        ctx.save_for_backward(states, weight, targets, exps, total)
        ctx.mark_non_differentiable(entropy)
        return logprobs, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_logprobs, _grad_entropy):
        if ctx.consumed:  # the saved buffer is turned into the gradient in place: a second backward would be wrong
            raise RuntimeError("rlvr fused LM head: backward ran twice on one graph (retain_graph is not supported)")
        ctx.consumed = True
        states, weight, targets, exps, total = ctx.saved_tensors
        # d log p_t / d z_j = [j = t] - p_j, and z = logits / T:  d/d logits = (onehot - e / s) * g / T
        scale = grad_logprobs / ctx.temperature
        grad_logits = exps.mul_((-scale / total)[:, None])
        grad_logits.scatter_add_(1, targets[:, None], scale[:, None])
        grad_logits = grad_logits.to(ctx.autocast or weight.dtype)  # the [N, V] copy autocast would make
        with replay_autocast(states.device.type, ctx.autocast):  # autograd casts bf16 results to the inputs' fp32
            grad_states = grad_logits @ weight if ctx.needs_input_grad[0] else None
            grad_weight = grad_logits.t() @ states if ctx.needs_input_grad[1] else None
        return grad_states, grad_weight, None, None, None



def tied_input_embeddings(model, input_ids: torch.Tensor) -> torch.Tensor | None:
    """input_ids [1, T] -> inputs_embeds [1, T, H] whose backward adds its T gradient rows straight into the weight's
    .grad, when the input embedding is the LM head's own weight (tied, as in SmolLM2) in a single process; None
    otherwise (the model embeds as usual).

    Why: the plain embedding backward builds a dense [V, H] zero gradient (113 MB for SmolLM2), writes T rows into
    it, and autograd then adds it, whole, to the head's gradient of the same weight, ~0.2 s of the benchmark's
    update on this CPU. A sparse gradient does not help: autograd sums a dense and a late sparse gradient out of
    place (a full copy). The rows are added to .grad after the head's gradient has been accumulated there, or, if
    the order ever differs, first (accumulation adds into an existing .grad in place): the sum is the same.
    Single process only: DDP and FSDP read a weight's gradient when autograd accumulates it, before these rows.
    It assumes gradients are taken with .backward() (rlvr's update), not torch.autograd.grad."""
    embed = model.get_input_embeddings()
    head = model.get_output_embeddings()
    if type(embed) is not torch.nn.Embedding or not fused_head_applies(head) or embed.weight is not head.weight:
        return None
    if embed.max_norm is not None or embed.scale_grad_by_freq or not embed.weight.requires_grad:
        return None
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return None
    # puts the lookup in the graph without tracking the weight itself. host: an empty leaf whose gradient
    # (backward's torch.empty(0)) must be on its device; no op combines it with the policy's tensors
    anchor = torch.empty(0, requires_grad=True)
    return _RowsIntoGrad.apply(anchor, input_ids, [embed.weight], embed.padding_idx)


class _RowsIntoGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, anchor, input_ids, holder, padding_idx):
        (weight,) = holder
        ctx.holder, ctx.padding_idx = holder, padding_idx
        ctx.save_for_backward(input_ids)
        return torch.nn.functional.embedding(input_ids, weight.detach())

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_embeds):
        (input_ids,) = ctx.saved_tensors
        (weight,) = ctx.holder
        ids = input_ids.reshape(-1)
        rows = grad_embeds.reshape(ids.numel(), -1).to(weight.dtype)
        if ctx.padding_idx is not None:  # nn.Embedding leaves the padding row's gradient at zero
            rows = rows.masked_fill((ids == ctx.padding_idx)[:, None], 0.0)
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)
        weight.grad.index_add_(0, ids, rows)
        return torch.empty(0), None, None, None  # host: the host anchor's gradient
