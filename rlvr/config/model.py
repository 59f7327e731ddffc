"""The model section of RunConfig (split from config/run.py): which weights, in which precision, on which device,
and LoRA. Defaults live here and only here."""
from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, model_validator

from rlvr.config.base import _Section

EMBEDDED_MODEL = "embedded:SmolLM2-135M-Instruct"
# Shapes without weights for model.init=random (built by rlvr/model/architectures.py): the values of the
# published config.json files. Plain data, here so that model.dtype=auto can size a model without importing torch.
_QWEN2 = dict(model_type="qwen2", num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
              rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False)
SHAPES: dict[str, dict] = {
    "smollm2-135m": dict(model_type="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192,
                         rope_theta=100_000.0, rms_norm_eps=1e-5, tie_word_embeddings=True),
    "qwen2.5-0.5b": dict(_QWEN2, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14),
    "qwen2.5-1.5b": dict(_QWEN2, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                         num_attention_heads=12),
    "llama-3.2-1b": dict(model_type="llama", hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
                         max_position_embeddings=131072, rope_theta=500_000.0, rms_norm_eps=1e-5,
                         tie_word_embeddings=True,
                         rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                           original_max_position_embeddings=8192)),
    # for tests on a CPU: the smallest Llama that runs every rlvr path
    "tiny": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=49152, max_position_embeddings=2048, rope_theta=10_000.0,
                 rms_norm_eps=1e-5, tie_word_embeddings=True),
}
ARCHITECTURES = tuple(SHAPES)
EMBEDDED_ALIASES = ("embedded", "smollm2-135m-instruct")  # name_or_path values that mean EMBEDDED_MODEL too

# model.dtype=auto (docs/gpu.md, one H200, 2026-11-29): bf16 mixed precision ran the default
# config (135M parameters) at 0.96 s a step against fp32's 0.91, and a 0.5B model at 2.97 against 5.19. So auto is
# bf16 on a CUDA GPU from a size between the two measured up, fp32 below it, and fp32 always on a CPU (bf16 matrix
# products are ~600x slower there) and on MPS.
AUTO_BF16_MIN_PARAMETERS = 300_000_000


def approximate_parameters(values: dict) -> int:
    """A Llama-family config's parameter count: attention, gated MLP and norms per layer, the embedding, the head when
    it is not tied; biases left out (Qwen2.5-0.5B: 494.005M of its 494.033M)."""
    hidden, layers = values["hidden_size"], values["num_hidden_layers"]
    heads = values["num_attention_heads"]
    head_dim = values.get("head_dim") or hidden // heads
    kv_heads = values.get("num_key_value_heads") or heads
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    mlp = 3 * hidden * values["intermediate_size"]
    embedding = values["vocab_size"] * hidden * (1 if values.get("tie_word_embeddings", False) else 2)
    return layers * (attention + mlp + 2 * hidden) + embedding + hidden


def _shape_of(data: dict) -> dict | None:
    """The config values of the model a model section names, where they can be read without loading anything."""
    name, architecture = str(data.get("name_or_path", EMBEDDED_MODEL)), data.get("architecture")
    if data.get("init") == "random" and architecture is not None:
        return SHAPES.get(architecture) or _read_json(Path(str(architecture)).expanduser())
    if name == EMBEDDED_MODEL or name.lower() in EMBEDDED_ALIASES:
        return SHAPES["smollm2-135m"]
    return _read_json(Path(name).expanduser() / "config.json")  # a hub id: no such file here, so None


def _read_json(path: Path) -> dict | None:
    try:
        values = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return values if isinstance(values, dict) else None


def auto_dtype(data: dict) -> str:
    """model.dtype=auto -> float32 or bfloat16 (see AUTO_BF16_MIN_PARAMETERS). A model whose size cannot be read here
    (a hub id, an unusual config) gets bf16 on a GPU: the models people train from the hub are mostly 0.5B and up."""
    if not str(data.get("device", "cpu")).startswith("cuda"):
        return "float32"
    shape = _shape_of(data)
    try:
        size = approximate_parameters(shape) if shape else None
    except (KeyError, TypeError, ZeroDivisionError):
        size = None
    return "bfloat16" if size is None or size >= AUTO_BF16_MIN_PARAMETERS else "float32"


class LoraConfig(_Section):
    """LoRA adapters through peft; the KL reference is the base model with the adapter off."""

    enabled: bool = Field(False, description="train low-rank adapters (peft) instead of all weights")
    r: int = Field(16, ge=1, description="adapter rank")
    alpha: float = Field(32.0, gt=0, description="the adapter's update is scaled by alpha / r (Hu et al. 2021, 4.1)")
    dropout: float = Field(0.0, ge=0, lt=1, description="adapter dropout; must be 0: the policy runs in eval mode")
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                      "up_proj", "down_proj"], description="Linear layers given adapters (Llama names)")


class ModelConfig(_Section):
    name_or_path: str = Field(EMBEDDED_MODEL, description="HF hub id, local HF directory, or the embedded default")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="compute dtype of the forwards and backwards (rlvr/model/precision.py); auto = bfloat16 "
                            "(mixed) on a CUDA GPU for models of 0.3B parameters and up, where it measured faster, "
                            "else float32 (always on a CPU, where bf16 matmul is ~600x slower)")
    master_weights: Literal["float32", "same"] = Field(
        "float32", description="dtype the weights and AdamW state are stored in: float32 = mixed precision (fp32 "
                               "master weights, forwards under torch.autocast in model.dtype) | same = pure "
                               "model.dtype (half the memory; updates below ~2^-8 of a weight round away)")
    # cpu:0 is the CPU too: the device trap's name for the policy's device (tests/device_trap.py)
    device: str = Field("cpu", pattern=r"^(cpu(:0)?|cuda(:\d+)?|mps)$",
                        description="torch device for policy, reference and rollouts: cpu, cuda, cuda:N, mps")
    trust_remote_code: bool = Field(False, description="allow custom modeling code from the model directory")
    # measured on an H100 (docs/gpu.md): with cuDNN's attention (PyTorch's pick in bf16, a plan
    # built per new shape) the default config's bf16 update took 1.3-1.9 s in steps 1-4, 0.32-0.64 s without
    cudnn_attention: bool = Field(False, description="let PyTorch use cuDNN's attention kernels (GPU, bf16/fp16); "
                                                     "false = flash / memory-efficient ones only, for the process")
    tf32: bool = Field(False, description="fp32 matmuls on TF32 tensor cores (GPU; 10-bit mantissa products, for the "
                                          "process): the H100 decode step 2.80 -> 1.95 ms (docs/gpu.md)")
    lm_head_fp32: bool = Field(False, description="under bf16/fp16 mixed precision, the LM head's product in fp32 in "
                                                  "the sampler and the trainer (ScaleRL, MiniMax-M1): less sampler-"
                                                  "trainer mismatch for one fp32 [tokens, vocabulary] product")
    # throughput and memory at the sizes users train need those shapes, not their weights (the GPU machine
    # has no hub). Random weights learn nothing: the run log and the run directory say so (rlvr/model/architectures.py)
    init: Literal["pretrained", "random"] = Field(
        "pretrained", description="pretrained = load the weights at name_or_path | random = a randomly initialised "
                                  "model of model.architecture's shape (for speed and memory, not learning)")
    architecture: str | None = Field(
        None, description=f"model.init=random: the shape, one of {', '.join(ARCHITECTURES)}, or a config.json "
                          "file; None = name_or_path's own. The tokenizer is always name_or_path's")
    lora: LoraConfig = Field(default_factory=LoraConfig)
    _auto: str | None = PrivateAttr(None)  # the dtype model.dtype=auto chose, while dtype still holds that choice

    @model_validator(mode="after")
    def _combinations(self):
        # auto is resolved here, so that every reader (and the saved config.yaml) sees which dtype; again when the
        # model or device it was chosen for is assigned another (an eval target); set without validation, which
        # would run this again
        if self.dtype == "auto" or (self._auto is not None and self.dtype == self._auto):
            object.__setattr__(self, "dtype", auto_dtype(self.__dict__))
            self._auto = self.dtype
        else:
            self._auto = None
        if self.architecture is not None and self.init != "random":
            raise ValueError(f"model.architecture={self.architecture} names the shape of randomly initialised "
                              "weights: set model.init=random too (pretrained weights bring their own shape)")
        if self.lm_head_fp32 and self.dtype == "float32":
            raise ValueError("model.lm_head_fp32 is for mixed precision (model.dtype=bfloat16 or float16): with "
                             "model.dtype=float32 the head computes in fp32 already")
        if self.lm_head_fp32 and self.master_weights != "float32":
            raise ValueError("model.lm_head_fp32 needs model.master_weights=float32: with master_weights=same the "
                             "head's weight is stored in model.dtype, and no fp32 weight is left to multiply by")
        name = self.architecture
        if name is not None and name not in ARCHITECTURES and not name.endswith(".json"):
            close = difflib.get_close_matches(name.lower(), ARCHITECTURES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"model.architecture={name!r} is no shipped shape{hint}; choose one of "
                              f"{', '.join(ARCHITECTURES)} or give a config.json file")
        return self

    def __eq__(self, other: object) -> bool:
        """Equal settings are equal configs: which dtype auto chose is remembered (for `at` and assignments), but a
        config.yaml that names it (float32) holds the same settings."""
        return isinstance(other, ModelConfig) and self.model_dump() == other.model_dump()

    def at(self, path: str) -> ModelConfig:
        """These settings, loading the weights saved at `path` (a checkpoint of this model: model.init=random and its
        shape apply no more; an auto dtype is chosen again for it)."""
        data = {**self.model_dump(), "name_or_path": path, "init": "pretrained", "architecture": None}
        return ModelConfig.model_validate({**data, "dtype": "auto"} if self._auto is not None else data)
