"""The Task contract: where prompts (with reference answers) come from, and the sampling helpers tasks share.

A Task has two views of its problems that never overlap:
  * `train_prompts(seed)`: an endless stream drawn uniformly *with replacement* from the train split,
    identical for the same seed (so a resumed or repeated run sees the same problems);
  * `eval_prompts(size)`: the first `size` problems of the held-out split in a fixed order. When fewer than
    `size` exist, all of them are returned (callers read `len()`; nothing is padded or repeated).

Apart from rlvr/tasks/__init__.py (the TASKS registry, which imports the tasks) so that a task imports this
module and not the package that imports it (issue 25: no import circles).
"""
from __future__ import annotations

import random
from typing import Iterator, Protocol, Sequence, TypeVar, runtime_checkable

from rlvr.types import Prompt

T = TypeVar("T")


@runtime_checkable
class Task(Protocol):
    name: str  # descriptive, e.g. "arithmetic-l2" or "qa:data/gsm8k.jsonl"

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        """Infinite, deterministic given seed, uniform with replacement over the train split."""
        ...

    def eval_prompts(self, size: int) -> list[Prompt]:
        """The first `size` held-out prompts in a fixed order; all of them if fewer exist."""
        ...


def sample_forever(items: Sequence[T], seed: int) -> Iterator[T]:
    """Uniform draws with replacement from a private RNG, so global random state never shifts the stream."""
    if not items:
        raise ValueError("cannot sample training prompts from an empty train split")
    rng = random.Random(seed)
    while True:
        yield items[rng.randrange(len(items))]


def first(items: Sequence[T], size: int) -> list[T]:
    """The first `size` items (all of them when fewer exist)."""
    if size < 0:
        raise ValueError(f"eval size must be >= 0, got {size}")
    return list(items[:size])
