"""What the built-in environment tasks share (issue 26, item 5): the hashed held-out split, the one-shot exchange
that shows a tool call, and the train / eval streams over a fixed problem list.

The split follows rlvr/tasks/arithmetic.py: a problem's identity is its canonical text; ranking every problem by
the sha256 of that text gives an order that depends on nothing else (not the seed, not Python's hash salt, not
the enumeration order); the first max(200, n // 5) are held out, the rest train.

rlvr.tasks imports these tasks (its registry's factories), so nothing here imports rlvr.tasks (tests/test_layout.py:
no two subpackages import each other): the few lines of rlvr.tasks.base and chat that the tasks need are restated.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TypeVar

from rlvr.agents.tool_calls import CLOSE, OPEN, response_block
from rlvr.config.run import TaskConfig
from rlvr.types import Prompt

MIN_HELD_OUT = 200  # enough problems for a pass@1 estimate with a usable confidence interval
P = TypeVar("P")


def split_by_hash(problems: Sequence[P], canonical: Callable[[P], str]) -> tuple[tuple[P, ...], tuple[P, ...]]:
    """(train, held_out); held_out is in its fixed evaluation order. Fails loudly on duplicate identities: two
    problems with one canonical text would put the same id in both splits."""
    names = [canonical(p) for p in problems]
    if len(set(names)) != len(names):
        raise ValueError("two problems share a canonical text; the held-out split would leak")
    ranked = sorted(problems, key=lambda p: hashlib.sha256(canonical(p).encode()).hexdigest())
    held = max(MIN_HELD_OUT, len(ranked) // 5)
    if held >= len(ranked):
        raise ValueError(f"{len(ranked)} problems leave none to train on after {held} held out")
    return tuple(ranked[held:]), tuple(ranked[:held])


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """One tool call in the format parse_turn reads (Hermes / Qwen)."""
    return f"{OPEN}{json.dumps({'name': name, 'arguments': arguments})}{CLOSE}"


def tool_turn(results: Sequence[str]) -> str:
    """The tool turn of the example, as the episode will show real results: run_calls's text."""
    return "\n".join(response_block(r) for r in results)


@dataclass(frozen=True)
class ExampleTurn:
    """One assistant turn of a worked example: its calls and what the tools answered."""

    calls: tuple[tuple[str, dict[str, Any]], ...]  # (tool name, arguments)
    results: tuple[str, ...]


@dataclass(frozen=True)
class Example:
    """The worked exchange of a task's prompts: its question, the assistant's turns (each the sentence, then its
    calls, answered by the tools) and the final answer."""

    question: str
    lead: str
    turns: tuple[ExampleTurn, ...]
    answer: str


def one_shot_messages(examples: Sequence[Example], question: str, config: TaskConfig) -> tuple[dict[str, str], ...]:
    """System turn (if config.system_prompt), the worked exchange (if config.one_shot): user / assistant with a
    sentence then the calls / tool with their results / assistant's final answer; then the real question.

    A tiny model copies the shape of the example (issue 26: a 135M model should make valid calls). The sentence
    before the calls matters: without it SmolLM2-135M-Instruct begins its turn like the tool turn it saw last
    ("<tool_response>...") instead of with a call (greedy, 16 calculator prompts: 0 valid first turns without
    it, 6 with it). Two worked examples rather than one: with user-role observations SmolLM2-135M made a valid
    first call in 14 of 32 sampled turns with two, 1 of 32 with one (issue 26, T = 1)."""
    messages: list[dict[str, str]] = []
    if config.system_prompt is not None:
        messages.append({"role": "system", "content": config.system_prompt})
    for example in examples if config.one_shot else ():
        messages.append({"role": "user", "content": example.question})
        for turn in example.turns:
            calls = [call_text(name, arguments) for name, arguments in turn.calls]
            messages.append({"role": "assistant", "content": "\n".join([example.lead, *calls])})
            messages.append({"role": "tool", "content": tool_turn(turn.results)})
        messages.append({"role": "assistant", "content": example.answer})
    messages.append({"role": "user", "content": question})
    return tuple(messages)


class SplitTask:
    """train_prompts / eval_prompts over fixed splits; a subclass sets name, train, held_out and `prompt`."""

    name: str
    train: tuple[Any, ...]
    held_out: tuple[Any, ...]

    def prompt(self, problem: Any, split: str) -> Prompt:
        raise NotImplementedError

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        """Uniform draws with replacement from a private RNG (the Task contract, rlvr/tasks/base.py)."""
        rng = random.Random(seed)
        while True:
            yield self.prompt(self.train[rng.randrange(len(self.train))], "train")

    def eval_prompts(self, size: int) -> list[Prompt]:
        if size < 0:
            raise ValueError(f"eval size must be >= 0, got {size}")
        return [self.prompt(p, "eval") for p in self.held_out[:size]]


def user_turn(question: str, instruction: str) -> str:
    """`question instruction` with no doubled space when either is empty (as rlvr.tasks.chat.user_turn)."""
    return " ".join(part for part in (question.strip(), instruction.strip()) if part)
