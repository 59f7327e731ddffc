"""The fused RMSNorm and SwiGLU nodes (rlvr/model/fused_layers.py) give transformers' values and gradients."""
from __future__ import annotations

import math

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from conftest import tiny_llama
from rlvr.model.fused_layers import _RMSNorm, _SiluProduct, fused_layers_on

torch.set_num_threads(1)


def test_rms_norm_by_hand() -> None:
    """x = [3, 4], w = [1, 2], eps 0: mean x^2 = 12.5, r = 12.5^-1/2 = 0.2828427; y = w x r = [0.8485281, 2.2627417].
    With upstream g = [1, 0]: dL/dw = g x r = [0.8485281, 0]; dL/dx_j = r (g_j w_j - x_j r mean(g w x r))
    with mean(g w x r) = (1 * 1 * 0.8485281 + 0) / 2 = 0.4242641:
    dL/dx = 0.2828427 * ([1, 0] - [0.8485281, 1.1313708] * 0.4242641) = [0.1810193, -0.1357645]."""
    x = torch.tensor([[3.0, 4.0]], requires_grad=True)
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    y = _RMSNorm.apply(x, w, 0.0)
    torch.testing.assert_close(y, torch.tensor([[0.8485281, 2.2627417]]))
    (y * torch.tensor([[1.0, 0.0]])).sum().backward()
    torch.testing.assert_close(w.grad, torch.tensor([0.8485281, 0.0]))
    torch.testing.assert_close(x.grad, torch.tensor([[0.1810193, -0.1357645]]))


def test_silu_product_by_hand() -> None:
    """gate 0, up 2: silu(0) = 0, so y = 0 and dy/dup = 0; silu'(0) = s (1 + 0) = 1/2, dy/dgate = 2 / 2 = 1.
    gate = ln 3 (sigmoid 3/4), up 1: y = 0.75 ln 3 = 0.8239592; dy/dgate = 0.75 (1 + ln 3 / 4) = 0.9559898."""
    gate = torch.tensor([0.0, math.log(3)], requires_grad=True)
    up = torch.tensor([2.0, 1.0], requires_grad=True)
    y = _SiluProduct.apply(gate, up)
    torch.testing.assert_close(y, torch.tensor([0.0, 0.8239592]))
    y.sum().backward()
    torch.testing.assert_close(gate.grad, torch.tensor([1.0, 0.9559898]))
    torch.testing.assert_close(up.grad, torch.tensor([0.0, 0.8239592]))


def test_rms_norm_equals_transformers() -> None:
    torch.manual_seed(0)
    norm = LlamaRMSNorm(48, eps=1e-5)
    norm.weight.data.uniform_(0.5, 1.5)
    x = (torch.randn(2, 7, 48) * 3).requires_grad_()
    upstream = torch.randn(2, 7, 48)
    plain = norm(x)
    (plain * upstream).sum().backward()
    plain_grads = x.grad.clone(), norm.weight.grad.clone()
    x.grad = norm.weight.grad = None
    fused = _RMSNorm.apply(x, norm.weight, norm.variance_epsilon)
    (fused * upstream).sum().backward()
    assert torch.equal(fused, plain)  # the same ops in the same order
    torch.testing.assert_close(x.grad, plain_grads[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(norm.weight.grad, plain_grads[1], rtol=1e-5, atol=1e-5)


def test_whole_model_gradients_equal_and_modules_restored() -> None:
    model = tiny_llama()
    ids = torch.randint(0, 64, (1, 11), generator=torch.Generator().manual_seed(1))
    results = []
    for fused in (True, False):
        model.zero_grad(set_to_none=True)
        with fused_layers_on(model) if fused else torch.enable_grad():
            logits = model(input_ids=ids).logits
        (logits * torch.linspace(-1, 1, 64)).sum().backward()
        results.append((logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (fused_logits, fused_grads), (plain_logits, plain_grads) = results
    torch.testing.assert_close(fused_logits, plain_logits, rtol=0, atol=1e-6)
    for name, grad in plain_grads.items():
        assert grad.abs().max() > 0, name
        assert (fused_grads[name] - grad).abs().max() / grad.abs().max() < 1e-5, name
    # the replacements are instance attributes, gone after the block
    assert not any("forward" in vars(m) for m in model.modules())


def test_modules_restored_after_an_error() -> None:
    model = tiny_llama()
    with pytest.raises(RuntimeError, match="boom"):
        with fused_layers_on(model):
            assert any("forward" in vars(m) for m in model.modules())
            raise RuntimeError("boom")
    assert not any("forward" in vars(m) for m in model.modules())
