"""The environment protocol of multi-turn episodes: small, typed, torch-free.

An episode starts from a task row (a Prompt). The model speaks one turn; the driver (rlvr/agents/episodes.py)
parses the tool calls in it strictly (rlvr/agents/tool_calls.py) and hands the turn to the episode, which answers
with an Observation (tool results, a game's reply) or says the episode is done. The loop ends when the model
answers without a tool call and the environment has nothing to say, when the environment says done, or when a
budget (turns, tokens per turn, tokens per episode, tool time per episode) cuts it; a cut episode is marked
truncated. A turn's calls share a deadline (ModelTurn.deadline) that run_calls keeps.

The outcome is scored by the task's verifiers on the final answer (the last model turn) and, when the
environment has a state, by `Environment.score_state` on the episode's final state: a pure function of
(state text, prompt), so `rlvr verify` can re-score a recorded trajectory without running the episode again.

Tools are declared in the OpenAI function-calling form (`ToolSpec.as_openai()`, what transformers' chat templates
take as `tools=`). A malformed call or an unknown tool becomes an error observation and is counted; nothing a
model writes raises.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rlvr.types import Prompt, Verdict


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, what it does, and a JSON Schema of its arguments (an object schema)."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema, {"type": "object", "properties": {...}, "required": [...]}

    def as_openai(self) -> dict[str, Any]:
        """The OpenAI function-calling form: {"type": "function", "function": {name, description, parameters}}."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Deadline:
    """When a turn's tool calls must be done: the driver sets it from the turn's and the episode's time
    budgets; tool_calls.run_calls gives each call what is left, at most its own limit, and runs none past it."""

    at: float  # a time.monotonic() reading; -inf: no time at all (the calls are not run)
    why: str  # what a call past it is told, e.g. "this turn's 10 s of tool time is used up"

    def left(self) -> float:
        return self.at - time.monotonic()

    @classmethod
    def none_left(cls, why: str) -> Deadline:
        return cls(-math.inf, why)


@dataclass(frozen=True)
class ModelTurn:
    """What the model said in one turn, as the environment sees it."""

    index: int  # 0 for the first model turn of the episode
    text: str  # the turn decoded from its sampled ids, special tokens skipped
    calls: tuple[ToolCall, ...]  # the well-formed calls of known tools, in order (arguments checked by schema)
    errors: tuple[str, ...]  # one message per malformed call, unknown tool or schema violation
    deadline: Deadline | None = None  # the turn's tool time (the driver's budgets); None = each call's limit only


@dataclass(frozen=True)
class Observation:
    """The environment's answer to a turn."""

    text: str | None  # rendered as the next (tool) turn; None = nothing to say
    done: bool = False  # True = the episode ends here (the text, if any, is not shown to the model)
    reward: float = 0.0  # step-level reward of the turn just taken; 0 = none. Not read on the
    # final answer (text None, done or not): that turn is no step, the outcome scores it (episodes.EpisodeRunner._batch)
    valid_calls: int = 0  # tool calls that ran
    invalid_calls: int = 0  # malformed calls, unknown tools, schema violations, tools that failed or timed out


@runtime_checkable
class Episode(Protocol):
    """One live episode; made by Environment.start and dropped when it ends."""

    def respond(self, turn: ModelTurn) -> Observation:
        """The environment's answer to the model's turn. Must not raise on anything the model wrote, and must
        keep to turn.deadline (run_calls does): the driver runs the responds of a batch's rows on a pool of
        threads (one episode is never in two threads at once) and waits for each."""
        ...

    def final_state(self) -> str:
        """The environment's state when the episode ended, as text (JSON for structured state; "" = none)."""
        ...


@runtime_checkable
class Environment(Protocol):
    name: str
    tools: tuple[ToolSpec, ...]  # () for environments without tools (a game that reads the turn's text)
    scores_state: bool  # True: score_state gives every episode a verdict; False: it always returns None

    def start(self, prompt: Prompt) -> Episode:
        """A fresh episode for this task row (deterministic: the same prompt starts the same episode)."""
        ...

    def score_state(self, final_state: str, prompt: Prompt) -> Verdict | None:
        """The verdict on an episode's final state against the task row (pure; None = this environment has no
        state to check, the answer verifiers alone score the episode)."""
        ...


@dataclass(frozen=True)
class Budgets:
    """Where an episode is cut; a cut episode is truncated. The defaults are episode.*'s."""

    max_turns: int = 4  # model turns
    tokens_per_turn: int = 48  # sampled tokens in one model turn
    tokens_per_episode: int = 192  # all tokens after the prompt: sampled and environment ones
    tool_time_limit_s: float = 2.0  # one tool call's wall-clock limit
    turn_time_limit_s: float = 10.0  # all of one turn's calls of one episode, wall-clock
    episode_time_limit_s: float = 30.0  # all tool calls of one episode; spent, the episode ends ("time")
    tool_workers: int = 32  # rows whose calls run at once (a row's own calls stay in order)


STOP_REASONS = ("answered", "env_done", "max_turns", "turn_tokens", "episode_tokens", "time")


@dataclass
class EpisodeRecord:
    """How one episode went, for logs, views and `rlvr verify` (one per rollout row)."""

    messages: list[dict[str, str]] = field(default_factory=list)  # the turns after the prompt (assistant / tool)
    final_state: str = ""
    stop_reason: str = "answered"  # one of STOP_REASONS
    turn_rewards: list[float] = field(default_factory=list)  # one per model turn
    valid_calls: int = 0
    invalid_calls: int = 0

    def step_count(self) -> int:
        """Model turns that are steps (types.Turns.turn_mask): all but a final answer, which the outcome scores
        (a final answer counted as a step of reward 0 made answering look worse than calling again)."""
        turns = sum(message.get("role") == "assistant" for message in self.messages)
        return max(0, turns - (self.stop_reason == "answered"))

    def as_json(self) -> dict[str, Any]:
        return {"messages": self.messages, "final_state": self.final_state, "stop_reason": self.stop_reason,
                "turn_rewards": self.turn_rewards, "valid_calls": self.valid_calls,
                "invalid_calls": self.invalid_calls}
