"""Model shapes without weights: `model.init=random` builds a randomly initialised model of a shipped shape,
with the tokenizer of `model.name_or_path` (the embedded SmolLM2's by default).

Why: throughput and memory at the sizes users train (0.5B-1.5B) depend on the shape alone, and a machine without the
Hugging Face Hub (the lent GPU machines) has no pretrained weights of that size. Such a model learns nothing useful;
the run log and the run directory say so. The shapes are those of the published config.json files (hidden size,
layers, heads, vocabulary, rotary base); every layer attends to all earlier tokens, as in those models' defaults.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from rlvr.config.model import SHAPES
from rlvr.errors import UserFacingError

# One seed for every random model: the policy, the frozen reference and an engine's own copy (hf_process) are then
# the same weights, as they would be when loaded from a checkpoint.
RANDOM_INIT_SEED = 0
MARKER = "RANDOM_WEIGHTS.txt"  # written into the run directory of a run with random weights


class ArchitectureError(UserFacingError, ValueError):
    """A shape that cannot be built, phrased for the user."""


def shape_values(architecture: str) -> dict:
    """A shipped shape's config values, or a config.json file's."""
    if architecture in SHAPES:
        return dict(SHAPES[architecture])
    path = Path(architecture).expanduser()
    try:
        values = json.loads(path.read_text())
    except OSError as err:
        raise ArchitectureError(f"model.architecture={architecture!r}: cannot read it ({err.strerror}); give one of "
                                f"{', '.join(SHAPES)} or a config.json file") from None
    except ValueError as err:
        raise ArchitectureError(f"model.architecture={architecture!r} is not JSON: {err}") from None
    if not isinstance(values, dict) or "model_type" not in values:
        raise ArchitectureError(f"model.architecture={architecture!r} holds no model_type: it must be a model's "
                                "config.json (e.g. one of a Hugging Face model directory)")
    layers, heads, kv_heads = (values.get(k) for k in ("num_hidden_layers", "num_attention_heads",
                                                       "num_key_value_heads"))
    if isinstance(layers, int) and layers < 1:
        raise ArchitectureError(f"model.architecture={architecture!r}: num_hidden_layers={layers}, at least 1 needed")
    if isinstance(heads, int) and isinstance(kv_heads, int) and (kv_heads < 1 or heads % kv_heads):
        raise ArchitectureError(f"model.architecture={architecture!r}: num_attention_heads={heads} is no multiple of "
                                f"num_key_value_heads={kv_heads} (each KV head serves a whole group of query heads)")
    return values


def random_config(values: dict, tokenizer):
    """A transformers config of the shape, with an embedding that holds every token id of the tokenizer (grown to
    len(tokenizer) when the shape's vocabulary is smaller; a larger one is kept, as published models pad theirs) and
    the tokenizer's special ids."""
    from transformers import AutoConfig

    values = {k: v for k, v in values.items() if k not in ("architectures", "quantization_config", "torch_dtype",
                                                            "dtype", "transformers_version")}
    model_type = values.pop("model_type")
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        values[name] = getattr(tokenizer, name)
    try:
        values["vocab_size"] = max(int(values.get("vocab_size") or 0), len(tokenizer))
        return AutoConfig.for_model(model_type, **values)
    except Exception as err:  # noqa: BLE001 - transformers' own (strict dataclass, unknown type...): one message
        raise ArchitectureError(f"cannot build a {model_type!r} config from model.architecture: "
                                f"{_what(err)}") from None


def random_model(model_config, dtype: torch.dtype, device: str):
    """The model of `model_config` with transformers' own initialisation, seeded by RANDOM_INIT_SEED, made on `device`
    (a 1.5B model initialised on a CPU takes tens of seconds; on the GPU, a fraction of one)."""
    from transformers import AutoModelForCausalLM

    where = torch.device(device)
    devices = [where.index or 0] if where.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), where:
        torch.manual_seed(RANDOM_INIT_SEED)
        if devices:
            torch.cuda.manual_seed(RANDOM_INIT_SEED)
        try:
            return AutoModelForCausalLM.from_config(model_config, dtype=dtype)
        except (ValueError, TypeError, KeyError, RuntimeError) as err:  # a shape whose numbers do not fit together
            raise ArchitectureError(f"cannot build a model of model.architecture's shape ({model_config.model_type}): "
                                    f"{_what(err)}") from None


def _what(err: BaseException) -> str:
    """An error's type and first line, for one message (transformers' can run to many lines)."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def describe(model, architecture: str | None) -> str:
    """One line for the log: the weights are random, the shape, the size (when the model is at hand)."""
    shape = architecture or "name_or_path's own"
    size = "" if model is None else (f" ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
                                     f"vocabulary {model.config.vocab_size})")
    return (f"model.init=random: RANDOM weights of the {shape} shape{size}: for measuring speed and memory; the model "
            "learns nothing useful")


def note_random_run(run_dir: Path, model_config, model=None) -> list[str]:
    """For a run with random weights: its log line (first, so that no one reads the rewards as learning), also written
    into the run directory, whose checkpoints and samples look like any other's; [] for pretrained weights."""
    if model_config.init != "random":
        return []
    line = describe(model, model_config.architecture)
    mark_run_directory(run_dir, line)
    return [line]


_SAID: set[str] = set()


def say_random(model, architecture: str | None) -> None:
    """On stderr, once a process (the policy, the reference and the critic load the same shape)."""
    line = describe(model, architecture)
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr, flush=True)


def mark_run_directory(run_dir: Path, line: str) -> None:
    """The run directory says its weights were random (a checkpoint saved from it looks like any other)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MARKER).write_text(line + "\nEvery checkpoint and sample in this directory comes from those weights.\n")
