"""Tool calls read strictly from a model turn, and run with a time limit.

The call format is the Hermes / Qwen one that most chat templates with `tools=` render and that
rlvr.verifiers.tools already reads: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one block per call,
prose allowed around the blocks, reasoning inside <think>...</think> ignored. "arguments" may be an object or a
JSON-encoded object string (as OpenAI's API returns it). Strict means: a block that does not close, JSON that does
not parse, keys other than name/arguments, an unknown tool or arguments that violate the tool's JSON Schema are
each one counted error, told back to the model, and never an exception; so is a lone surrogate in any string of the
call (I-JSON; rlvr/agents/text_safety.py). A message quoting the call is cut to MAX_ERROR_CHARS.

Counting: every `<tool_call>` the model opens is one call, and a call that is not run is exactly one
error, whatever is wrong with it. A block ends at the `</tool_call>` after its JSON value, so the tag inside one of
the call's JSON strings (a file's text) does not end it; a block whose text is not such a value ends at the first
`</tool_call>`. A `<tool_call>` that opens again before it closes, or never closes, is one unclosed call; a
`</tool_call>` that closes no block is one error of its own. Calls past MAX_CALLS_PER_TURN are not run: one error
each.

Time: a call gets the tool's own limit (episode.tool_time_limit_s), never more than what is left of the
turn's deadline (ModelTurn.deadline, set by the driver from episode.turn_time_limit_s and what is left of
episode.episode_time_limit_s). A call stopped by the deadline answers "error: stopped: <why>", a call that finds no
time left "error: not run: <why>"; both count as invalid, as a timed-out call does.
"""
from __future__ import annotations

import json
import math
import re
import threading
from typing import Any, Callable, Mapping, Sequence

import jsonschema

from rlvr.agents.protocol import Deadline, ModelTurn, Observation, ToolCall, ToolSpec
from rlvr.agents.text_safety import clip, unicode_problem
from rlvr.verifiers.math.extract import strip_thinking
from rlvr.verifiers.tools import parse_json

MAX_CALLS_PER_TURN = 8  # calls past this in one turn are errors (a turn of 100 calls is a loop, not a plan)
MAX_RESULT_CHARS = 1000  # a tool's answer is cut here: it becomes prompt tokens of every later turn
MAX_ERROR_CHARS = 300  # a malformed call's message is cut here (it quotes the model's text)
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"\s*")
OPEN, CLOSE = "<tool_call>", "</tool_call>"

ToolHandler = Callable[..., Any]  # handler(**arguments) -> result (str, or JSON-able data)


def _one_call(payload: str, tools: Mapping[str, ToolSpec]) -> ToolCall | str:
    """A block's text -> the call, or the message that says why it is not one, cut to MAX_ERROR_CHARS: the
    messages quote what the model wrote (a 100 kB key, jsonschema's repr of a huge value)."""
    parsed = _read_call(payload, tools)
    return parsed if isinstance(parsed, ToolCall) else clip(parsed, MAX_ERROR_CHARS)


def _read_call(payload: str, tools: Mapping[str, ToolSpec]) -> ToolCall | str:
    # A lone surrogate in any string is a malformed call, whatever the tool (text_safety): no tool can
    # store, run or print it, and echoed into an observation it made the tokenizer raise.
    value, why = parse_json(payload.strip())
    why = why or unicode_problem(value)
    if why:
        return f"malformed tool call: {why}"
    if not isinstance(value, dict) or set(value) != {"name", "arguments"}:
        keys = sorted(value) if isinstance(value, dict) else type(value).__name__
        return f'malformed tool call: expected {{"name": ..., "arguments": {{...}}}}, got {keys}'
    name, arguments = value["name"], value["arguments"]
    if isinstance(arguments, str):  # OpenAI's form: the arguments as a JSON-encoded string
        arguments, why = parse_json(arguments)
        why = why or unicode_problem(arguments)
        if why:
            return f"malformed tool call: arguments {why}"
    if not isinstance(name, str) or name not in tools:
        return f"unknown tool {name!r}; tools: {', '.join(sorted(tools)) or 'none'}"
    if not isinstance(arguments, dict):
        return f"malformed tool call: arguments of {name} must be an object, got {type(arguments).__name__}"
    try:
        jsonschema.validate(arguments, tools[name].parameters)
    except jsonschema.ValidationError as err:
        return f"invalid arguments for {name}: {err.message}"
    return ToolCall(name, arguments)


def _json_end(text: str, start: int) -> int | None:
    """Where `</tool_call>` starts when text[start:] is one JSON value (then optional whitespace) and that tag; else
    None. Read this way, a tag inside the value's strings is text, not the block's end."""
    try:
        _, stop = _DECODER.raw_decode(text, _SPACE.match(text, start).end())
    except (ValueError, RecursionError):  # not JSON (parse_json says why), or nested past the parser's depth
        return None
    close = _SPACE.match(text, stop).end()
    return close if text.startswith(CLOSE, close) else None


def blocks(text: str) -> list[tuple[int, int, str | None]]:
    """(start, end, payload) of each call `<tool_call>` opens in `text`, in order (module docstring); payload None:
    the block does not close (it runs to the next `<tool_call>` or the end of the text)."""
    found: list[tuple[int, int, str | None]] = []
    start = text.find(OPEN)
    while start != -1:
        body = start + len(OPEN)
        again = text.find(OPEN, body)
        stop = len(text) if again == -1 else again
        close = _json_end(text, body)
        if close is None:  # not a JSON value then the tag: the block ends at its first `</tool_call>`
            close = text.find(CLOSE, body, stop)
        if close == -1:  # it opens again, or the text ends, before it closes
            found.append((start, stop, None))
            start = again
        else:
            end = close + len(CLOSE)
            found.append((start, end, text[body:close]))
            start = text.find(OPEN, end)
    return found


def _visible_start(text: str) -> int:
    """Where strip_thinking's text starts in `text`: after the last `</think>`."""
    close = text.rfind("</think>")
    return close + len("</think>") if close >= 0 else 0


def last_call_end(text: str) -> int | None:
    """How many leading characters of a turn's text hold every closed call parse_turn reads (outside <think>);
    None when it reads none. A `</tool_call>` inside reasoning or in prose closes no call."""
    ends = [end for _, end, payload in blocks(strip_thinking(text)) if payload is not None]
    return _visible_start(text) + ends[-1] if ends else None


def parse_turn(index: int, text: str, tools: Sequence[ToolSpec]) -> ModelTurn:
    """The model's turn text -> ModelTurn with its well-formed calls and one error per bad one."""
    visible = strip_thinking(text)
    by_name = {tool.name: tool for tool in tools}
    calls: list[ToolCall] = []
    errors: list[str] = []
    rest, position = [], 0
    for number, (start, end, payload) in enumerate(blocks(visible)):
        rest.append(visible[position:start])
        position = end
        if number >= MAX_CALLS_PER_TURN:
            errors.append(f"call {number + 1} not run: more than {MAX_CALLS_PER_TURN} tool calls in one turn")
        elif payload is None:
            errors.append(f"malformed tool call: {OPEN} without {CLOSE}")
        else:
            parsed = _one_call(payload, by_name)
            (calls if isinstance(parsed, ToolCall) else errors).append(parsed)
    rest.append(visible[position:])
    strays = "".join(rest).count(CLOSE)
    errors += [f"malformed tool call: {CLOSE} without {OPEN}"] * strays
    return ModelTurn(index, text, tuple(calls), tuple(errors))


class ToolFailure(str):
    """A tool's answer when the call could not be carried out (a bad expression, a missing file): the model reads
    the text, and the call counts as invalid, as a malformed one does. The seeds judge a tool call by whether it
    succeeds and returns the expected shape, so "valid" means parsed, known, schema-conform AND carried out; counted
    as valid, a calculator policy that copied the question's words into the expression (about half of its episodes
    after one training run) scored a valid-call share of 1.00; counted as failed, 0.35."""


def tool_failure(message: str) -> ToolFailure:
    return ToolFailure(f"error: {message}")


def _run_with_limit(handler: ToolHandler, arguments: dict[str, Any], limit_s: float,
                    late: str | None = None) -> tuple[str, bool]:
    """(result text, ok). The handler runs in a daemon thread: a call past the limit is reported as timed out and
    left to finish on its own, abandoned: the caller (a worker of the driver's pool, episodes.py) is back at the
    limit, so stuck calls never use up the pool. Tools here are pure Python and short; the code tool has
    the sandbox's own limit. `late`: what a call stopped at the limit is told when a budget, not its own limit,
    stopped it."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = handler(**arguments)
        except Exception as err:  # noqa: BLE001 - whatever a tool raises on model input is an observation
            box["error"] = f"{type(err).__name__}: {err}"

    worker = threading.Thread(target=target, daemon=True, name="rlvr-tool")
    worker.start()
    worker.join(limit_s)
    if worker.is_alive():
        return f"error: {late or f'the tool ran past its time limit of {limit_s:g} s'}", False
    if "error" in box:
        return f"error: {box['error']}", False
    value = box.get("value")
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return str(text[:MAX_RESULT_CHARS]), not isinstance(value, ToolFailure)


def response_block(text: str) -> str:
    """One call's result as the environment's turn shows it: the plain text. The template already marks the turn
    as the tool's; the Hermes <tool_response> wrapper made SmolLM2-135M open its own turns with that wrapper
    instead of a call (measured on the calculator: 0/16 valid greedy first turns on level 2 with it,
    11/16 without). The same function writes the tasks' worked examples, so they show what episodes show."""
    return text


def _run_in_time(handler: ToolHandler, arguments: dict[str, Any], limit_s: float,
                 deadline: Deadline | None) -> tuple[str, bool]:
    """One call, given its own limit and never more than what is left of the turn's time (module docstring)."""
    left = math.inf if deadline is None else deadline.left()
    if left <= 0:
        return f"error: not run: {deadline.why}", False
    if left < limit_s:
        return _run_with_limit(handler, arguments, left, late=f"stopped: {deadline.why}")
    return _run_with_limit(handler, arguments, limit_s)


def run_calls(turn: ModelTurn, handlers: Mapping[str, ToolHandler], limit_s: float) -> Observation:
    """Run the turn's calls in order, each within `limit_s` and what is left of turn.deadline, and answer with
    their results (and its errors). A turn without calls or errors is the model's final answer: the observation is
    empty and done."""
    if not turn.calls and not turn.errors:
        return Observation(None, done=True)
    parts, valid, invalid = [], 0, len(turn.errors)
    for call in turn.calls:
        text, ok = _run_in_time(handlers[call.name], call.arguments, limit_s, turn.deadline)
        parts.append(response_block(text))
        valid, invalid = valid + ok, invalid + (not ok)
    parts.extend(response_block(f"error: {message}") for message in turn.errors)
    return Observation("\n".join(parts), valid_calls=valid, invalid_calls=invalid)
