"""The Task contract: where prompts (with reference answers) come from, and the sampling helpers tasks share.

A Task has two views of its problems that never overlap:
  * `train_prompts(seed)`: an endless stream drawn uniformly *with replacement* from the train split,
    identical for the same seed (so a resumed or repeated run sees the same problems);
  * `eval_prompts(size)`: the first `size` problems of the held-out split in a fixed order. When fewer than
    `size` exist, all of them are returned (callers read `len()`; nothing is padded or repeated).

The held-out split of the tasks that enumerate their problems (arithmetic, calculator, filesystem, code) is written
once here: `split_by_hash`.

Apart from rlvr/tasks/__init__.py (the TASKS registry, which imports the tasks) so that a task imports this
module and not the package that imports it (no import circles).
"""
from __future__ import annotations

import hashlib
import random
from typing import Callable, Iterator, Protocol, Sequence, TypeVar, runtime_checkable

from rlvr.types import Prompt

T = TypeVar("T")
MIN_HELD_OUT = 200  # enough problems for a pass@1 estimate with a usable confidence interval


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


def held_out_size(total: int) -> int:
    """How many of `total` problems are held out: a fifth, and at least MIN_HELD_OUT."""
    return max(MIN_HELD_OUT, total // 5)


def split_by_hash(problems: Sequence[T], canonical: Callable[[T], str]) -> tuple[tuple[T, ...], tuple[T, ...]]:
    """(train, held_out), held_out in its fixed evaluation order. A problem's identity is its canonical text; ranking
    every problem by the sha256 of that text gives an order that depends on nothing else (not the seed, not Python's
    hash salt, not the enumeration order); the first held_out_size(n) are held out, the rest train. Fails loudly on
    duplicate identities (two problems with one canonical text would put the same id in both splits) and on a
    split that leaves nothing to train on."""
    names = [canonical(p) for p in problems]
    if len(set(names)) != len(names):
        raise ValueError("two problems share a canonical text; the held-out split would leak")
    ranked = sorted(problems, key=lambda p: hashlib.sha256(canonical(p).encode()).hexdigest())
    held = held_out_size(len(ranked))
    if held >= len(ranked):
        raise ValueError(f"{len(ranked)} problems leave none to train on after {held} held out")
    return tuple(ranked[held:]), tuple(ranked[:held])
