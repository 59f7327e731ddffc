"""RMSNorm and the SwiGLU product of the packed training forward as single autograd nodes (for speed and
resident memory).

transformers' Llama-family RMSNorm is ~6 autograd ops (pow, mean, add, rsqrt, two products) and its MLP's
silu(gate) * up two more; autograd keeps each op's inputs for the backward. Per decoder layer at the benchmark's
536 packed tokens that is ~3 MB of saved tensors per norm (two per layer, plus the final one) and ~10 MB for
silu(gate), gate and up, 30 layers deep. Here a norm keeps its input and one scale per token, and the SwiGLU product
keeps gate and up only (silu(gate) is recomputed in the backward, one cheap element-wise pass): ~250 MB less held
for the backward on the benchmark's update, and fewer passes over memory. The forward values are transformers'
own (same ops in the same order); gradients equal to float tolerance (tests/test_fused_layers.py).

Applied for the duration of one forward with gradients (logprobs.py), to Llama-family fp32 modules only: other
dtypes (bf16 upcasts inside the norm) and other MLPs keep transformers' own forward. Under mixed precision
(torch.autocast over fp32 weights, precision.py) the norms still take the fused node, correctly: their
input is the fp32 residual stream and they run no op autocast casts, so forward and backward are the fp32 ones
transformers' norm computes there too; the SwiGLU product's inputs are then bf16 projections, and it keeps
transformers' forward (tests/test_precision.py compares both paths under autocast).
"""
from __future__ import annotations

import contextlib
import types
from typing import Iterator

import torch
import torch.nn.functional as F

from rlvr.model.family import full_attention_llama


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)  # r = (mean x^2 + eps)^-1/2, [..., 1]
        ctx.save_for_backward(x, weight, scale)
        return weight * (x * scale)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, weight, scale = ctx.saved_tensors
        # y_i = w_i x_i r with dr/dx_j = -r^3 x_j / n:
        #   dL/dx_j = r (g_j w_j - (x_j r) mean_i(g_i w_i x_i r)),   dL/dw_i = sum over tokens of g_i x_i r
        normed = x * scale
        grad_normed = grad * weight
        grad_x = (grad_normed - normed * (grad_normed * normed).mean(-1, keepdim=True)) * scale
        grad_weight = (grad * normed).reshape(-1, weight.shape[0]).sum(0) if ctx.needs_input_grad[1] else None
        return grad_x, grad_weight, None


class _SiluProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return F.silu(gate) * up

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        gate, up = ctx.saved_tensors
        # silu(g) = g s with s = sigmoid(g);  silu'(g) = s (1 + g (1 - s))
        s = torch.sigmoid(gate)
        silu = gate * s
        grad_up = grad * silu
        grad_gate = grad * up * (s * (1 + gate * (1 - s)))
        return grad_gate, grad_up


def _norm_forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
    if hidden_states.dtype != torch.float32 or self.weight.dtype != torch.float32:
        return type(self).forward(self, hidden_states)
    return _RMSNorm.apply(hidden_states, self.weight, self.variance_epsilon)


def _mlp_forward(self, x: torch.Tensor) -> torch.Tensor:
    gate, up = self.gate_proj(x), self.up_proj(x)
    if gate.dtype != torch.float32:
        return self.down_proj(self.act_fn(gate) * up)
    return self.down_proj(_SiluProduct.apply(gate, up))


def _targets(model) -> list[tuple[torch.nn.Module, object]]:
    """(module, replacement forward) for each Llama-family RMSNorm and SiLU-gated MLP of `model`."""
    if not isinstance(model, torch.nn.Module) or not full_attention_llama(getattr(model, "config", None)):
        return []
    found = []
    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RMSNorm") and hasattr(module, "variance_epsilon") and hasattr(module, "weight"):
            found.append((module, _norm_forward))
        elif name.endswith("MLP") and all(hasattr(module, n) for n in ("gate_proj", "up_proj", "down_proj")) \
                and type(getattr(module, "act_fn", None)).__name__ in ("SiLU", "SiLUActivation"):
            found.append((module, _mlp_forward))
    return found


@contextlib.contextmanager
def fused_layers_on(model) -> Iterator[None]:
    """For the duration, the model's RMSNorm and MLP modules run the fused nodes above (instance attributes that
    shadow the class's forward; removed on exit, whatever happens)."""
    targets = _targets(model)
    for module, forward in targets:
        module.forward = types.MethodType(forward, module)
    try:
        yield
    finally:
        for module, _ in targets:
            del module.forward
