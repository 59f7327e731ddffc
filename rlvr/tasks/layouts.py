"""The dataset layouts the qa task reads, told apart by their columns; docs/data.md shows each.

* plain: a question column (task.question_field) and an answer column (task.answer_field), as GSM8K and MATH.
* trl: TRL's prompt-only layout: a `prompt` column holding a text ("standard") or a list of {"role", "content"}
  messages ("conversational"), the reference in task.answer_field (TRL leaves the answer column to the user's
  reward functions; DeepMath-style sets call it `solution`).
* verl: verl's RL parquet: `prompt` (chat messages), `reward_model` {"style": "rule", "ground_truth": ...},
  with `data_source`, `ability` and `extra_info` beside them.

auto picks verl when both `prompt` and `reward_model` exist, else plain when the question column exists, else trl;
task.format names one outright. Every other column travels with the row (Prompt.columns), for reward functions.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from rlvr.config.run import ConfigError, TaskConfig

PROMPT = "prompt"  # TRL's and verl's prompt column
REWARD_MODEL = "reward_model"  # verl: {"style": "rule", "ground_truth": ...}
ROLES = ("system", "user", "assistant")


class DatasetError(ConfigError):
    """A dataset that cannot be used as given; a ConfigError so the CLI reports it without a traceback."""


class BadCell(ValueError):
    """Why one row cannot be used (it is skipped and counted, or stops the run: task.bad_rows)."""


@dataclass(frozen=True)
class Layout:
    name: str  # "plain" | "trl" | "verl"
    prompt: str  # the column holding the question text or the chat messages
    answer: str | None  # the column holding the reference; None for verl (reward_model.ground_truth)

    def describe(self) -> str:
        reference = f"{REWARD_MODEL}.ground_truth" if self.answer is None else f"column {self.answer!r}"
        asked = "questions" if self.name == "plain" else "prompts"
        return f"layout {self.name} ({asked} from column {self.prompt!r}, references from {reference})"


@dataclass(frozen=True)
class Cells:
    """One row's prompt and reference text as read, before the reference is extracted."""

    question: str  # the question, or the conversation as canonical JSON: the key of duplicates and of the split
    messages: tuple[dict[str, str], ...] | None  # a conversational prompt, used as written; None for a text question
    answer: str


def choose_layout(columns: list[str], config: TaskConfig, source: str) -> Layout:
    """The layout of a source with these columns (task.format, or told from the columns); one DatasetError naming
    the columns found when a column the layout needs is missing."""
    found = ", ".join(columns)
    name = config.format
    if name == "auto":
        name = ("verl" if {PROMPT, REWARD_MODEL} <= set(columns) else "plain" if config.question_field in columns
                else "trl" if PROMPT in columns else "")
    if not name:
        raise DatasetError(f"{source}: no column {config.question_field!r} (task.question_field), nor a {PROMPT!r} "
                           f"column (TRL and verl layouts); columns: {found}")
    layout = Layout(name, config.question_field if name == "plain" else PROMPT,
                    None if name == "verl" else config.answer_field)
    needed = [layout.prompt] + ([REWARD_MODEL] if name == "verl" else [config.answer_field])
    for column in needed:
        if column not in columns:
            raise DatasetError(f"{source}: no column {column!r} ({_option(column, layout, config)}); columns: {found}"
                               + _hint(column, columns, config))
    return layout


def _option(column: str, layout: Layout, config: TaskConfig) -> str:
    if layout.name == "plain":
        return "task.question_field" if column == config.question_field else "task.answer_field"
    if column == config.answer_field and layout.name == "trl":
        return "task.answer_field: TRL's prompt-only rows carry the reference in a column of their own"
    return f"needed by the {layout.name} layout" + (" (task.format=auto chose it)" if config.format == "auto" else "")


def _hint(column: str, columns: list[str], config: TaskConfig) -> str:
    """A column that likely holds the reference, when the configured answer column is missing."""
    if column != config.answer_field:
        return ""
    likely = [c for c in ("answer", "solution", "ground_truth", "reference", "target") if c in columns]
    return f"; set task.answer_field={likely[0]}?" if likely else ""


def read_cells(record: dict[str, Any], layout: Layout) -> Cells:
    """The row's prompt and answer; raises BadCell saying why the row cannot be used."""
    value = record.get(layout.prompt)
    if isinstance(value, (dict, bool)):  # not an empty question: the wrong kind of cell
        raise BadCell(f"field {layout.prompt!r} has the wrong type: {type(value).__name__} {str(value)[:40]!r} "
                      "(expected text or a list of chat messages)")
    messages = conversation(value, layout.prompt) if isinstance(value, (list, tuple)) else None
    question = json.dumps(messages, ensure_ascii=False, sort_keys=True) if messages else text(value)
    if question is None:
        raise BadCell(f"field {layout.prompt!r} is missing or empty")
    if layout.answer is None:
        answer = text(_typed(_ground_truth(record.get(REWARD_MODEL)), f"field {REWARD_MODEL!r}'s 'ground_truth'"))
        if answer is None:
            raise BadCell(f"field {REWARD_MODEL!r} has an empty 'ground_truth'")
    else:
        answer = text(_typed(record.get(layout.answer), f"field {layout.answer!r}"))
        if answer is None:
            raise BadCell(f"field {layout.answer!r} is missing or empty")
    return Cells(question, messages, answer)


def conversation(value: list | tuple, column: str) -> tuple[dict[str, str], ...]:
    """Chat messages as {"role", "content"} pairs (other keys, such as the nulls Arrow adds, dropped)."""
    turns = []
    for position, turn in enumerate(value, 1):
        if not isinstance(turn, dict) or turn.get("role") not in ROLES or not isinstance(turn.get("content"), str):
            raise BadCell(f"field {column!r}: message {position} is not a {{'role': system|user|assistant, "
                          f"'content': text}} pair (got {str(turn)[:60]})")
        turns.append({"role": turn["role"], "content": turn["content"]})
    if not any(turn["role"] == "user" and turn["content"].strip() for turn in turns):
        raise BadCell(f"field {column!r} holds no user message with text")
    if turns[-1]["role"] != "user":  # the model would be asked to go on after its own (or the system's) turn
        raise BadCell(f"field {column!r}: the prompt must end with a user turn (its last message is "
                      f"{turns[-1]['role']!r})")
    return tuple(turns)


def _typed(value: Any, what: str) -> Any:
    """`value` when it can be a reference (text, a number, or absent); a list, a mapping or a bool is named as the
    wrong type rather than reported as empty."""
    if value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool)):
        return value
    raise BadCell(f"{what} has the wrong type: {type(value).__name__} {str(value)[:40]!r} (expected text or a number)")


def _ground_truth(cell: Any) -> Any:
    if not isinstance(cell, dict):
        raise BadCell(f"field {REWARD_MODEL!r} is not a {{'style': 'rule', 'ground_truth': ...}} mapping "
                      f"(got {type(cell).__name__})")
    if "ground_truth" not in cell or cell["ground_truth"] is None:
        raise BadCell(f"field {REWARD_MODEL!r} has no 'ground_truth' (style {cell.get('style')!r}); only rule-style "
                      "rows carry a reference")
    return cell["ground_truth"]


def text(value: Any) -> str | None:
    """A cell as stripped text; numbers are accepted (JSON answers are often bare ints). One empty cell makes a CSV
    column of numbers floats: NaN there is missing, and 4.0 is written 4, as in the file."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, float):
        return None if not math.isfinite(value) else str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None
