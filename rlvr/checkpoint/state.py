"""What a checkpoint holds besides the weights, so that a resumed run continues bit for bit.

verl's bar is a bit-exact save/load/step test; TRL users report worse curves after resuming because the
generation state was not saved (trl#3347). So everything that decides the next step is saved: optimizer
(with its step counts) and scheduler, every RNG (python, numpy if loaded, torch CPU and CUDA; the sampler
draws from torch's), how many prompts the stream has handed out (the stream is a deterministic function
of the seed, so it is rebuilt and advanced), the curriculum and the critic, and the logger's clock.
"""
from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, TypeVar

import torch

from rlvr.config.run import ConfigError, RunConfig

T = TypeVar("T")
STATE_FILE = "trainer_state.pt"
MODEL_DIR = "model"


class CountingStream(Iterator[T]):
    """An iterator that counts what it handed out; `skip` replays a resumed run's prefix."""

    def __init__(self, stream: Iterator[T], skip: int = 0):
        self.stream, self.drawn = stream, 0
        for _ in range(skip):
            next(self)

    def __iter__(self) -> "CountingStream[T]":
        return self

    def __next__(self) -> T:
        item = next(self.stream)
        self.drawn += 1
        return item


@dataclass
class TrainerState:
    step: int  # optimizer steps completed (the next step is step + 1)
    prompts_drawn: int
    rng: dict[str, Any]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    elapsed_s: float
    consecutive_skips: int = 0
    skipped_steps: int = 0
    curriculum: dict[str, Any] | None = None
    critic: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if "numpy" in sys.modules:  # only when something loaded it; rlvr itself draws nothing from numpy
        state["numpy"] = sys.modules["numpy"].random.get_state()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy

        numpy.random.set_state(state["numpy"])


def save_state(state: TrainerState, directory: Path) -> None:
    torch.save(vars(state), directory / STATE_FILE)


def load_state(directory: Path) -> TrainerState:
    # weights_only=False: the file holds python RNG tuples and optimizer dicts, written by this run itself
    # and checked against the manifest's sha256 before it is read.
    return TrainerState(**torch.load(directory / STATE_FILE, map_location="cpu", weights_only=False))


def load_policy_weights(policy: torch.nn.Module, model_dir: Path) -> None:
    """Copy a checkpoint's safetensors into the already-built policy (tied weights are stored once)."""
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(model_dir.glob("*.safetensors")):
        tensors.update(load_file(shard))
    missing, unexpected = policy.load_state_dict(tensors, strict=False)
    tied = set(getattr(policy, "_tied_weights_keys", None) or [])
    if unexpected or set(missing) - tied:
        raise RuntimeError(f"checkpoint weights in {model_dir} do not fit the model: missing "
                           f"{sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]}")
    if missing and hasattr(policy, "tie_weights"):
        policy.tie_weights()


# Keys a resumed run may change without breaking exactness: how long to run, how often to save or evaluate,
# checkpointing itself, where logs go, how many verifier workers (verification is deterministic).
FREE_KEYS = ("max_steps", "max_minutes", "save_every", "checkpoint.", "output_dir", "eval.", "logging.",
             "reward.workers", "reward.deadline_s", "reward.retries", "samples_per_step")
# Keys that change no setting of the algorithm yet still break exactness, with the reason the refusal gives
# (`threads` used to be free, so a resume on another thread count drifted without a word).
WHY_EXACTNESS_NEEDS = {
    "threads": "torch's CPU kernels split their sums over the threads, so another thread count adds in another "
               "order and the weights drift from the uninterrupted run's in the last bits",
}


def with_current_defaults(saved: dict[str, Any]) -> dict[str, Any]:
    """A config dumped by an older rlvr lacks the sections added since (rollout.correction): read it
    back through RunConfig so those compare as their defaults instead of refusing every older run's resume.
    New sections default to the old behaviour, so that is what the older run ran with. A saved config that no
    longer validates is returned as it is (its differences are then listed key by key)."""
    try:
        return RunConfig.model_validate(saved).model_dump(mode="json")
    except (ValueError, ConfigError):
        return saved


def config_differences(saved: dict[str, Any], requested: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two dumped configs, except the FREE_KEYS."""
    out = []
    for key in sorted(set(saved) | set(requested)):
        dotted = f"{prefix}{key}"
        if any(dotted == free or (free.endswith(".") and dotted.startswith(free)) for free in FREE_KEYS):
            continue
        a, b = saved.get(key), requested.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_differences(a, b, dotted + ".")
        elif a != b:
            why = WHY_EXACTNESS_NEEDS.get(dotted)
            out.append(f"{dotted}: {a!r} -> {b!r}" + (f" ({why})" if why else ""))
    return out
