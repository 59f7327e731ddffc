"""Verifiable task sources: where prompts (with reference answers) come from.

A Task has two views of its problems that never overlap:
  * `train_prompts(seed)`: an endless stream drawn uniformly *with replacement* from the train split,
    identical for the same seed (so a resumed or repeated run sees the same problems);
  * `eval_prompts(size)`: the first `size` problems of the held-out split in a fixed order. When fewer than
    `size` exist, all of them are returned (callers read `len()`; nothing is padded or repeated).

Tasks are chosen once from `TASKS` (docs/design.md principle 5). The factories import their module lazily so
that the arithmetic path never pays for importing `datasets`.
"""
from __future__ import annotations

import random
from typing import Callable, Iterator, Protocol, Sequence, TypeVar, runtime_checkable

from rlvr.config.run import ConfigError, TaskConfig
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


def _arithmetic(config: TaskConfig) -> Task:
    from rlvr.tasks.arithmetic import ArithmeticTask

    return ArithmeticTask(config)


def _qa(config: TaskConfig) -> Task:
    from rlvr.tasks.qa import QATask

    return QATask(config)


TASKS: dict[str, Callable[[TaskConfig], Task]] = {
    "arithmetic": _arithmetic,
    "qa": _qa,
}


def build_task(config: TaskConfig) -> Task:
    """Look up config.name in TASKS and build it; an unknown name is a ConfigError listing the valid ones."""
    factory = TASKS.get(config.name)
    if factory is None:
        raise ConfigError(f"task.name: unknown task {config.name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    return factory(config)


__all__ = ["TASKS", "Task", "build_task", "first", "sample_forever"]
