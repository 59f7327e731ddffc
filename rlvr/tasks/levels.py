"""Training on several levels of one task at once (`task.train_levels`), evaluating on one (`task.level`).

Why: a task the model almost never solves gives GRPO nothing to learn from; every group ties. On the calculator's
two-operation problems SmolLM2-135M is right in ~2 % of episodes, so a 4-prompt step of G = 8 holds a group with a
correct answer about one step in two; its one-operation problems (level 1, the same stories) are right several times
as often (docs/agents.md). Mixing the easier level into training keeps the signal while
the held-out measure stays on the harder one: the first rung of the recipe's curriculum builds on.

Each draw picks a level uniformly (not by split size: level 2 holds 6658 problems, level 1 573), then a problem from
that level's own stream; both from private RNGs derived from the seed, so the stream is exact on resume.
"""
from __future__ import annotations

import random
from typing import Any, Iterator

from rlvr.tasks.base import Task
from rlvr.types import Prompt


class LevelMix:
    """Train prompts from `levels` (each a Task of one level), held-out prompts and everything else (name,
    environment, answer verifiers) from `evaluated`, the task of task.level."""

    def __init__(self, levels: dict[int, Task], evaluated: Task) -> None:
        self.levels = levels
        self.evaluated = evaluated

    def __getattr__(self, name: str) -> Any:  # environment(), answer_verifiers, level, ... of the evaluated level
        if name in ("levels", "evaluated"):  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.evaluated, name)

    @property
    def name(self) -> str:
        return self.evaluated.name

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        order = sorted(self.levels)
        streams = {level: self.levels[level].train_prompts(seed * 1009 + level) for level in order}
        pick = random.Random(seed)
        while True:
            yield next(streams[order[pick.randrange(len(order))]])

    def eval_prompts(self, size: int) -> list[Prompt]:
        return self.evaluated.eval_prompts(size)
