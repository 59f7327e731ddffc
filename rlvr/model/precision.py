"""Mixed precision: bf16 forwards and backwards over fp32 master weights and fp32 AdamW state.

`model.dtype` is the COMPUTE dtype of the forwards; `model.master_weights` is the dtype the weights are STORED in:
- float32 (default): "mixed". Every model loaded from `model.*` keeps fp32 parameters, so the optimizer (built on
  them) keeps fp32 moments, and its forwards run under torch.autocast in model.dtype: matrix products in bf16;
  reductions, norms and the residual stream in fp32 (Micikevicius et al. 2018, "Mixed Precision Training"; bf16
  keeps fp32's exponent range, so no loss scaling is needed: Kalamkar et al. 2019), as transformers' Trainer (and so
  TRL) runs with bf16=True over fp32 weights. An update smaller than ~2^-8 of a weight survives here; stored in bf16
  it rounds away.
- same: "pure". Weights (and so the AdamW moments) stored in model.dtype, no autocast: half the weight, gradient
  and optimizer memory, at the price of that rounding.

Frozen models (the KL reference, an engine's own copy, eval/sample) follow the same rule: under mixed they keep fp32
weights and run under autocast, so before the first update the reference scores tokens exactly as the policy does
(tests/test_precision.py; a reference stored in bf16 would differ by ~1e-3 per token, and the KL would measure that
gap instead of the policy's drift), and an engine copy receives the policy's fp32 tensors as they are.
`model.master_weights=same` halves their memory too.

The compute dtype is recorded on the model object at load time (rlvr/model/load.py), so a forward site needs only the
model: `with precision.autocast(model): ...`, or the `in_compute_dtype` decorator on a function whose first argument
is the model. A peft wrapper forwards the attribute lookup to the model it wraps; a model that was not loaded
through load_model (tests) computes in its parameters' dtype.

Log-probs, ratios, KL and advantages stay fp32: the LM-head paths upcast the logits before any softmax
(rlvr/model/logprobs.py, fused_head.py), and everything downstream of them is fp32 already.
"""
from __future__ import annotations

import contextlib
import functools
import types
from typing import Callable, TypeVar

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# model.master_weights -> the storage dtype for a given model.dtype (a dict of variants, not an if-chain)
STORAGE = {"float32": lambda compute: torch.float32, "same": lambda compute: compute}
ATTRIBUTE = "rlvr_compute_dtype"  # set on the model object by record_compute_dtype

F = TypeVar("F", bound=Callable)


def storage_dtype(dtype: str, master_weights: str) -> torch.dtype:
    """The dtype weights are loaded in: ("bfloat16", "float32") -> float32 (mixed), ("bfloat16", "same") -> bf16."""
    return STORAGE[master_weights](DTYPES[dtype])


def record_compute_dtype(model, dtype: torch.dtype):
    """Remember on `model` the dtype its forwards run in; returns the model."""
    setattr(model, ATTRIBUTE, dtype)
    return model


def parameter_dtype(model) -> torch.dtype:
    dtype = getattr(model, "dtype", None)  # transformers' models (and peft's, through the wrapper) have one
    return dtype if isinstance(dtype, torch.dtype) else next(model.parameters()).dtype


def compute_dtype(model) -> torch.dtype:
    """The dtype this model's forwards run in: the recorded one, else its parameters' dtype."""
    recorded = getattr(model, ATTRIBUTE, None)
    return recorded if isinstance(recorded, torch.dtype) else parameter_dtype(model)


def is_mixed(model) -> bool:
    """Do the forwards run in another dtype than the weights are stored in (fp32 master weights)?"""
    return compute_dtype(model) != parameter_dtype(model)


def device_type(model) -> str:
    device = getattr(model, "device", None)
    return torch.device(device).type if device is not None else next(model.parameters()).device.type


def autocast(model) -> contextlib.AbstractContextManager:
    """torch.autocast on the model's device in its compute dtype when it is mixed-precision, else a null context.
    Wrap forwards only: the backward then replays the casts the forward recorded (PyTorch's amp recipe)."""
    if not is_mixed(model):
        return contextlib.nullcontext()
    return torch.autocast(device_type(model), dtype=compute_dtype(model))


def in_compute_dtype(function: F) -> F:
    """Decorator: run `function(model, ...)` under autocast(model)."""
    @functools.wraps(function)
    def wrapper(model, *args, **kwargs):
        with autocast(model):
            return function(model, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


def active_autocast(device: str) -> torch.dtype | None:
    """The autocast dtype in force for `device` now, None when off. A custom autograd Function records it in its
    forward and replays it in its backward (replay_autocast), as torch.amp.custom_fwd / custom_bwd do for one fixed
    device type: autocast is off while autograd runs the backward."""
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None


def replay_autocast(device: str, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext() if dtype is None else torch.autocast(device, dtype=dtype)


# model.lm_head_fp32: the LM head's product in fp32 under bf16 mixed precision, in the trainer and
# in the sampler alike, as ScaleRL (Khatri et al. 2025) and MiniMax-M1 (2025) do to shrink the gap between the
# sampler's and the trainer's token probabilities: the head turns hidden states into logits over the whole
# vocabulary, and a bf16 product there rounds every logit to ~3 significant digits.
HEAD_ATTRIBUTE = "rlvr_head_fp32"  # set on the head module; sites that read head.weight themselves ask for it


def keep_head_fp32(model) -> None:
    """Make `model`'s LM head compute in fp32 even under autocast (its weight must be an fp32 master weight): every
    transformers forward (prefill, the eager decode step, SFT) calls it as a module, and head_is_fp32 tells the sites
    that use its weight directly (the fused log-prob head, the static decode step)."""
    head = model.get_output_embeddings()
    if head.weight.dtype != torch.float32:
        raise ValueError(f"an fp32 LM head needs fp32 master weights; this head is stored in {head.weight.dtype}")
    head.forward = types.MethodType(_fp32_linear, head)  # a bound method: a deepcopy of the model binds its copy
    setattr(head, HEAD_ATTRIBUTE, True)


def _fp32_linear(self, x: torch.Tensor) -> torch.Tensor:
    with torch.autocast(x.device.type, enabled=False):
        return torch.nn.functional.linear(x.float(), self.weight, self.bias)


def head_is_fp32(head) -> bool:
    return bool(getattr(head, HEAD_ATTRIBUTE, False))


def head_context(head) -> contextlib.AbstractContextManager:
    """Autocast off around a site that multiplies by an fp32 head's weight itself (its input cast to fp32 there)."""
    if not head_is_fp32(head):
        return contextlib.nullcontext()
    return torch.autocast(head.weight.device.type, enabled=False)
