"""Training on the problems a model still misses (`task.focus`: "a final RL stage that works on what is
still missed").

R1's last RL pass (Guo et al. 2025, sec. 2.3.4) follows a rejection-sampling stage that has just sampled N answers
to each of a few hundred train prompts. Those samples already say which prompts the model solves every time: a
group of G all-correct answers gives GRPO no gradient (every advantage is 0), so a step spent on them is wasted.
The sampling stage writes the other prompts' ids (rlvr/sampling/run.py, MISSES); `task.focus=FILE` restricts the
train stream to them, everything else (held-out prompts, verifiers, environment) staying the task's own.

The focused prompts are found by reading the task's own train stream (so they are exactly the prompts the task
builds, with the current config) until every id has appeared, or until the stream stops giving new prompts, then
drawn uniformly with a private RNG: exact on resume, like every train stream.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterator

from rlvr.config.run import ConfigError
from rlvr.tasks.base import Task, sample_forever
from rlvr.types import Prompt

PATIENCE = 20  # as rlvr.sampling.records.draw_distinct: draws without a new prompt, per distinct prompt seen


def read_focus_ids(path: str) -> frozenset[str]:
    """Prompt ids from a JSONL file of {"id": ...} rows (what a sampling run writes) or a text file of one id per
    line; a missing file, an unreadable line or no id at all is one ConfigError naming task.focus."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"task.focus: {path!r} is not a file (a sampling run's misses.jsonl, or one prompt id "
                          "per line)")
    ids = []
    for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        text = line.strip()
        if not text:
            continue
        if text.startswith("{"):
            try:
                text = json.loads(text)["id"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ConfigError(f"task.focus: {path!r} line {number} is not a JSON object with an 'id'") from None
        if not isinstance(text, str) or not text:
            raise ConfigError(f"task.focus: {path!r} line {number}: a prompt id must be a non-empty string")
        ids.append(text)
    if not ids:
        raise ConfigError(f"task.focus: {path!r} holds no prompt id: nothing to train on (a model that solved "
                          "every sampled prompt leaves this file empty; drop task.focus then)")
    return frozenset(ids)


def find_prompts(stream: Iterator[Prompt], ids: frozenset[str]) -> tuple[list[Prompt], int]:
    """(the prompts of `stream` whose id is in `ids`, in first-seen order; draws read). Stops once every id was
    seen, or when PATIENCE x (distinct prompts seen) draws in a row bring no new prompt (the split is read)."""
    found: dict[str, Prompt] = {}
    seen: set[str] = set()
    draws = since_new = 0
    while len(found) < len(ids):
        prompt = next(stream)
        draws += 1
        if prompt.id in seen:
            since_new += 1
            if since_new >= PATIENCE * len(seen):
                break
            continue
        seen.add(prompt.id)
        since_new = 0
        if prompt.id in ids:
            found[prompt.id] = prompt
    return list(found.values()), draws


class Focused:
    """`task`'s train stream restricted to the prompts named in task.focus; the rest is `task`'s own."""

    def __init__(self, task: Task, path: str) -> None:
        self.task = task
        self.path = path
        self.ids = read_focus_ids(path)

    def __getattr__(self, name: str) -> Any:  # environment(), answer_verifiers, level, ... of the wrapped task
        if name in ("task", "path", "ids"):  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.task, name)

    @property
    def name(self) -> str:
        return self.task.name

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        prompts, draws = find_prompts(self.task.train_prompts(seed), self.ids)
        if not prompts:
            raise ConfigError(f"task.focus: none of the {len(self.ids)} prompt ids in {self.path!r} is a train "
                              f"prompt of task {self.task.name!r} ({draws} draws read; was the file written for "
                              "another task, level or phrasing?)")
        # trained on the part found: said, so that a stale or mixed file is seen
        if len(prompts) < len(self.ids):
            missing = sorted(self.ids - {p.id for p in prompts})
            print(f"rlvr: task.focus: {len(prompts)} of the {len(self.ids)} prompt ids in {self.path!r} are train "
                  f"prompts of task {self.task.name!r}; training on those ({len(missing)} not found, e.g. "
                  f"{missing[0]!r})", file=sys.stderr, flush=True)
        return sample_forever(prompts, seed)

    def eval_prompts(self, size: int) -> list[Prompt]:
        return self.task.eval_prompts(size)
