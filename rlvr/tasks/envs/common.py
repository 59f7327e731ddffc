"""What the built-in environment tasks share: the one-shot exchange that shows a tool call, and
the train / eval streams over a fixed problem list. Their held-out split is every enumerated task's:
rlvr.tasks.base.split_by_hash.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from rlvr.agents.tool_calls import CLOSE, OPEN, response_block
from rlvr.config.run import TaskConfig
from rlvr.tasks.base import first, sample_forever
from rlvr.types import Prompt


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

    A tiny model copies the shape of the example (a 135M model should make valid calls). The sentence
    before the calls matters: without it SmolLM2-135M-Instruct begins its turn like the tool turn it saw last
    ("<tool_response>...") instead of with a call (greedy, 16 calculator prompts: 0 valid first turns without
    it, 6 with it). Two worked examples rather than one: with user-role observations SmolLM2-135M made a valid
    first call in 14 of 32 sampled turns with two, 1 of 32 with one (T = 1)."""
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
        return (self.prompt(problem, "train") for problem in sample_forever(self.train, seed))

    def eval_prompts(self, size: int) -> list[Prompt]:
        return [self.prompt(p, "eval") for p in first(self.held_out, size)]
