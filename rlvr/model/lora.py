"""LoRA through peft (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models").

Only the low-rank adapters train; the base weights stay frozen, so the KL reference pi_ref *is* the policy with
the adapter switched off (peft's `disable_adapter()`): no second model in memory. The loop keeps working on the
plain transformers model (peft injects its layers in place), because rlvr/model/logprobs.py calls `model.base_model`,
which on a PeftModel would be the whole LoRA wrapper rather than the transformer body.

On disk a LoRA run looks like any other run: final/ and each checkpoint's model/ hold the *merged* weights as a
plain Hugging Face model (eval, the pipeline's next stage, vLLM), plus the adapter alone under adapter/.
"""
from __future__ import annotations

from pathlib import Path

import torch

from rlvr.config.run import LoraConfig
from rlvr.errors import UserFacingError
from rlvr.model import precision

ADAPTER_DIR = "adapter"  # inside final/ and checkpoints/step-N/model/
ADAPTER_NAME = "default"  # peft's name for the one adapter get_peft_model adds


class LoraError(UserFacingError, ValueError):
    """A LoRA setting that does not fit the model, phrased for the user."""


def refuse_outside_grpo(enabled: bool, command: str) -> None:
    """`rlvr sft` and `rlvr sample` share RunConfig but do not wrap the model: refuse rather than silently train
    (or sample) without the adapters the user asked for."""
    if enabled:
        raise LoraError(f"model.lora is supported by `rlvr train` (GRPO) only; {command} would ignore it: set "
                        "model.lora.enabled=false")


def wrap_policy(model, config: LoraConfig):
    """-> PeftModel whose adapters alone require gradients (peft freezes every base weight)."""
    try:
        import peft
    except ImportError:
        raise LoraError("model.lora.enabled=true needs peft: pip install 'rlvr[lora]'") from None
    names = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    missing = sorted(set(config.target_modules) - names)
    if missing:
        raise LoraError(f"model.lora.target_modules: {missing} are not Linear layers of this model; "
                        f"it has {sorted(names)}")
    settings = peft.LoraConfig(r=config.r, lora_alpha=config.alpha, lora_dropout=config.dropout,
                               target_modules=list(config.target_modules), task_type="CAUSAL_LM")
    wrapped = peft.get_peft_model(model, settings)
    wrapped.eval()  # as load_model: no dropout, so log-probs of the ratio and of pi_old are deterministic
    return wrapped


class _AdapterOff:
    """Calls `module` with the adapter switched off; the module itself is shared with the policy."""

    def __init__(self, module, wrapped):
        self.module, self.wrapped = module, wrapped

    def __call__(self, *args, **kwargs):
        with self.wrapped.disable_adapter():
            return self.module(*args, **kwargs)


class AdapterOffReference:
    """The frozen reference for the KL term: the policy's own modules with the adapter disabled.

    It offers what rlvr/model/logprobs.py uses of a model (`base_model(...)`, `get_output_embeddings()(...)`, `dtype`,
    and rlvr/model/precision.py's compute dtype and `device`), so the reference forward stays one
    `batched_logprobs(run.reference, ...)` call as with a separate model.
    Exact: with the adapter off a LoRA layer returns its base layer's output unchanged.
    """

    def __init__(self, wrapped):
        self._wrapped = wrapped
        self._model = wrapped.get_base_model()
        precision.record_compute_dtype(self, precision.compute_dtype(self._model))  # the policy's

    @property
    def base_model(self) -> _AdapterOff:
        return _AdapterOff(self._model.base_model, self._wrapped)

    def get_output_embeddings(self):
        head = self._model.get_output_embeddings()
        if type(head) is torch.nn.Linear:  # no adapter on the head: itself, so the fused head path applies to it too
            return head
        return _AdapterOff(head, self._wrapped)

    @property
    def dtype(self) -> torch.dtype:  # the packed forward builds its attention mask in the model's dtype
        return self._model.dtype

    @property
    def config(self):  # the packed forward picks its attention path from the model's config
        return self._model.config

    @property
    def device(self) -> torch.device:  # precision.autocast takes the device type from it
        return self._model.device


def merged_state_dict(wrapped) -> dict[str, torch.Tensor]:
    """The plain model's state dict with each adapter folded in: W + (alpha / r) B A (Hu et al. 2021, eq. 3).

    Computed out of place, so the live base weights stay bit-identical (peft's merge_adapter / unmerge_adapter
    would add and subtract the delta, leaving float round-off in the frozen weights).
    """
    from peft.tuners.lora import LoraLayer

    model = wrapped.get_base_model()
    merged: dict[str, torch.Tensor] = {}
    lora_layers = {name: module for name, module in model.named_modules() if isinstance(module, LoraLayer)}
    for key, tensor in model.state_dict().items():
        if ".lora_" in key:
            continue
        owner, _, leaf = key.rpartition(".base_layer.")
        if not owner:
            merged[key] = tensor
        elif leaf == "weight":
            merged[f"{owner}.weight"] = tensor + lora_layers[owner].get_delta_weight(ADAPTER_NAME).to(tensor.dtype)
        else:  # bias: untouched by LoRA
            merged[f"{owner}.{leaf}"] = tensor
    return merged


class MergedWeights:
    """What an engine with its own weights (hf_process, a Ray actor) receives from a LoRA policy: the plain model's
    parameters, named and ordered as in a model without adapters, each adapter folded in (merged_state_dict). It
    offers the one method a weight sync reads (rollout/host.py `synced_parameters`), recomputed at every sync."""

    def __init__(self, wrapped):
        self.wrapped = wrapped

    def named_parameters(self):
        merged = merged_state_dict(self.wrapped)
        plain = [name.replace(".base_layer.", ".") for name, _ in self.wrapped.get_base_model().named_parameters()
                 if ".lora_" not in name]
        return iter([(name, merged[name]) for name in plain])


class LoraPolicy:
    """What the saving code sees of a LoRA policy: `save_pretrained` writes merged weights + adapter/.

    rlvr/checkpoint/resume.py also loads a checkpoint's model/ back through `load_state_dict`; those are the
    merged weights, from which the adapter cannot be recovered, so this ignores them and `restore_adapter`
    reads adapter/ instead. The base weights need nothing: they never change and are loaded from
    model.name_or_path, which a resume requires to be the same.
    """

    def __init__(self, wrapped):
        self.wrapped = wrapped

    def save_pretrained(self, directory: Path | str) -> None:
        directory = Path(directory)
        model = self.wrapped.get_base_model()
        model.save_pretrained(directory, state_dict=merged_state_dict(self.wrapped))
        self.wrapped.save_pretrained(directory / ADAPTER_DIR)

    def load_state_dict(self, tensors: dict[str, torch.Tensor], strict: bool = False) -> tuple[list, list]:
        return [], []  # (missing, unexpected): nothing to load here, see the class docstring

    def merged_weights(self) -> MergedWeights:
        return MergedWeights(self.wrapped)

    def restore_adapter(self, model_dir: Path) -> None:
        """Load the adapter weights saved under model_dir/adapter/ into the live adapter (exact resume)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        source = Path(model_dir) / ADAPTER_DIR / "adapter_model.safetensors"
        if not source.is_file():
            raise LoraError(f"{source} is missing: this checkpoint was not written by a LoRA run "
                            "(set model.lora.enabled as in the run being resumed)")
        result = set_peft_model_state_dict(self.wrapped, load_file(source))
        if result.unexpected_keys:
            raise LoraError(f"the adapter in {source} does not fit model.lora (r, target_modules): "
                            f"unexpected {result.unexpected_keys[:3]}")
