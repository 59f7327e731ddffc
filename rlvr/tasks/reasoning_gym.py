"""reasoning-gym's procedural datasets as a task (optional extra `gym`): `task.name=reasoning_gym`,
`task.gym_dataset` names the generator, `task.gym_config` its config, and the `reasoning_gym` verifier scores the
answers with the dataset's own scorer (rlvr/verifiers/reasoning_gym.py, which also holds the row reference).

Split by seed, disjoint by question. reasoning-gym's generators draw row i from Random(seed + i), so the seeds
0 and 1 share all but one row: seeds must be a whole stream apart. Train rows are rows 0..gym_size-1 of seed 0
(generator states 0..gym_size-1); the held-out stream is seed gym_size (states gym_size onwards), so no generator
state is used twice. Small problem spaces still repeat questions (chain_sum gives 496 distinct questions in 500
rows), so every held-out row whose question also occurs in train is dropped, and so is every row of either split
that repeats the one-shot example (row 0 of the held-out stream). The held-out stream has max(200, gym_size // 5)
rows after the example; an evaluation sees them in index order, the same for every run.

The prompt asks for reasoning-gym's answer layout, `<answer>...</answer>` (answers are grids, word lists,
expressions: an 'Answer:' line cannot hold a grid). The one-shot example is a real row of the same dataset with
its reference answer in that layout. task.instruction replaces the tag instruction when changed from its default.
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator

from rlvr.config.run import ConfigError, TaskConfig
from rlvr.tasks.base import first, held_out_size, sample_forever
from rlvr.tasks.chat import user_turn
from rlvr.types import Prompt
from rlvr.verifiers.reasoning_gym import GymRow, import_reasoning_gym, make_dataset

INSTRUCTION = "Put only the final answer between <answer> and </answer>."
TRAIN_SEED = 0
RESERVED = ("seed", "size")  # set by the split, never by task.gym_config


@dataclass(frozen=True)
class GymSplits:
    train: tuple[GymRow, ...]
    held_out: tuple[GymRow, ...]
    example: GymRow
    example_answer: str


def _check_config(dataset: str, config: dict[str, Any]) -> None:
    """One ConfigError for each way the user's dataset choice cannot work."""
    try:
        gym = import_reasoning_gym()
    except ImportError as err:
        raise ConfigError(f"task.name=reasoning_gym: {err}") from None
    names = sorted(gym.factory.DATASETS)
    if dataset not in names:
        close = difflib.get_close_matches(dataset, names, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; the {len(names)} datasets: {', '.join(names)}"
        raise ConfigError(f"task.gym_dataset: reasoning-gym has no dataset {dataset!r}{hint}")
    reserved = sorted(set(config) & set(RESERVED))
    if reserved:
        raise ConfigError(f"task.gym_config: {reserved} are set by rlvr's split (train seed {TRAIN_SEED}, held-out "
                          f"seed task.gym_size; size: task.gym_size); remove them")
    try:
        json.dumps(config)
        twice = [gym.create_dataset(dataset, seed=TRAIN_SEED, size=1, **config)[0]["question"] for _ in range(2)]
    except Exception as err:  # an unknown config key (TypeError), a failed validate() (AssertionError), ...
        raise ConfigError(f"task.gym_config: reasoning-gym's {dataset} refused {config}: "
                          f"{type(err).__name__}: {err}") from None
    if twice[0] != twice[1]:
        raise ConfigError(f"task.gym_dataset: {dataset} generates different rows from the same seed, so its answers "
                          f"could not be scored again in the reward workers; choose another dataset")


def _rows(dataset: str, config: dict[str, Any], seed: int, size: int) -> list[GymRow]:
    generator = make_dataset(dataset, config, seed, size)
    rows = []
    for index in range(size):
        try:
            question = generator[index]["question"]
        except Exception as err:
            raise ConfigError(f"task.gym_dataset: {dataset} failed to generate row {index} of seed {seed}: "
                              f"{type(err).__name__}: {err}") from None
        rows.append(GymRow(dataset, config, seed, size, index, question))
    return rows


@lru_cache(maxsize=4)
def _splits(dataset: str, config_json: str, size: int) -> GymSplits:
    config = json.loads(config_json)
    _check_config(dataset, config)
    held_size = held_out_size(size) + 1  # + the one-shot example, row 0 of the held-out stream
    held_stream = _rows(dataset, config, size, held_size)
    example = held_stream[0]
    example_answer = str(make_dataset(dataset, config, size, held_size)[0]["answer"])
    train = tuple(row for row in _rows(dataset, config, TRAIN_SEED, size) if row.question != example.question)
    seen = {row.question for row in train} | {example.question}
    held: list[GymRow] = []
    for row in held_stream[1:]:
        if row.question not in seen:
            held.append(row)
            seen.add(row.question)  # a held-out question repeated in its own stream is kept once
    if not train or not held:
        raise ConfigError(f"task.gym_dataset: {dataset} with {config} yields {len(train)} train and {len(held)} "
                          f"held-out questions after dropping repeats; widen task.gym_config or lower "
                          f"task.gym_size (fewer train rows leave more questions unseen)")
    return GymSplits(train, tuple(held), example, example_answer)


def splits(config: TaskConfig) -> GymSplits:
    """The task's (cached) train rows, held-out rows and one-shot example."""
    return _splits(config.gym_dataset, json.dumps(config.gym_config, sort_keys=True), config.gym_size)


class ReasoningGymTask:
    """One reasoning-gym dataset with a seed split; see the module docstring."""

    def __init__(self, config: TaskConfig) -> None:
        self.config = config
        self.name = f"reasoning_gym:{config.gym_dataset}"
        data = splits(config)
        self.train, self.held_out = data.train, data.held_out
        # task.instruction's default asks for 'Answer: <number>', which these rows are not; a changed one wins (compared
        # with the default, not model_fields_set: a resumed run reloads every field from its saved config.yaml)
        changed = config.instruction != TaskConfig.model_fields["instruction"].default
        self.instruction = config.instruction if changed else INSTRUCTION
        self.example = (data.example.question, f"<answer>{data.example_answer}</answer>")

    def messages(self, question: str) -> tuple[dict[str, str], ...]:
        turns: list[dict[str, str]] = []
        if self.config.system_prompt is not None:
            turns.append({"role": "system", "content": self.config.system_prompt})
        if self.config.one_shot:
            turns.append({"role": "user", "content": user_turn(self.example[0], self.instruction)})
            turns.append({"role": "assistant", "content": self.example[1]})
        turns.append({"role": "user", "content": user_turn(question, self.instruction)})
        return tuple(turns)

    def prompt(self, row: GymRow, split: str) -> Prompt:
        return Prompt(id=f"reasoning_gym/{row.dataset}/{split}/{row.seed}:{row.index}",
                      messages=self.messages(row.question), reference=row.as_reference(),
                      columns={"dataset": row.dataset})

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        for row in sample_forever(self.train, seed):
            yield self.prompt(row, "train")

    def eval_prompts(self, size: int) -> list[Prompt]:
        return [self.prompt(row, "eval") for row in first(self.held_out, size)]
