"""Bad dataset rows: each row that cannot be used is skipped and counted at start, with its row
number and why, or stops the run when `task.bad_rows=error`; a dataset with no usable row fails before any
model loads (screen_prompt_lengths: the rows whose prompt leaves too little of the model's context, at set-up of
`rlvr train` and `rlvr sample`). Local JSONL files are read line by line when a line is not valid UTF-8 or not a
JSON object, which would otherwise make the whole file unreadable."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from rlvr.config.run import RunConfig
from rlvr.tasks.base import Task
from rlvr.tasks.positions import Label, row_label

SHOWN = 5  # rows named in the start-up summary; the count covers all
# a line's JSON value named as JSON names it, not as Python does ("a JSON null", not "a JSON NoneType")
_JSON_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


@dataclass(frozen=True)
class BadRow:
    index: int  # 0-based position in the source as read (a line for a JSONL file read line by line)
    where: str  # how messages name it: "line 11" of a file, "row 5" of a table (rlvr.tasks.positions)
    why: str


@dataclass
class Screening:
    """The bad rows of one source; `check` either records one or raises, as task.bad_rows says."""

    source: str
    mode: str  # "skip" | "error"
    error: type[Exception]
    bad: list[BadRow] = field(default_factory=list)
    label: Label = row_label  # a 0-based index as the source's user counts it (set once the source is read)

    def reject(self, index: int, why: str) -> None:
        where = self.label(index)
        if self.mode == "error":
            raise self.error(f"{self.source} {where}: {why} (task.bad_rows=skip skips such rows instead)")
        self.bad.append(BadRow(index, where, why))

    def summary(self, kept: int) -> str:
        first = sorted(self.bad, key=lambda b: b.index)[:SHOWN]  # unreadable lines are found before the rest
        shown = "; ".join(f"{b.where}: {b.why}" for b in first)
        more = f"; and {len(self.bad) - SHOWN} more" if len(self.bad) > SHOWN else ""
        return (f"{self.source}: skipped {len(self.bad)} of {kept + len(self.bad)} rows ({shown}{more}); "
                "task.bad_rows=error stops on them instead")

    def report(self, kept: int) -> None:
        if self.bad:
            print(f"rlvr: {self.summary(kept)}", file=sys.stderr, flush=True)
        if kept == 0:
            raise self.error(f"{self.source}: no usable row" + (f" ({self.summary(0)})" if self.bad else ""))


class JsonlRecords:
    """The JSON-object lines of a file, for when `datasets` cannot read it whole; enumerates as (line, record)."""

    def __init__(self, records: list[tuple[int, dict[str, Any]]]):
        self.records = records
        self.column_names = list(dict.fromkeys(k for _, r in records for k in r))

    def indexed(self) -> Iterator[tuple[int, dict[str, Any]]]:
        return iter(self.records)


def scan_jsonl(path: Path, screening: Screening) -> JsonlRecords | None:
    """None when every non-blank line is a JSON object (let `datasets` read the file); else the good lines,
    with each bad one passed to `screening`."""
    good, bad_seen = [], False
    with path.open("rb") as f:
        for index, raw in enumerate(f):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8-sig" if index == 0 else "utf-8"))  # a BOM some editors write
            except UnicodeDecodeError as err:
                bad_seen = True
                screening.reject(index, f"not valid UTF-8 ({err.reason} at byte {err.start})")
                continue
            except json.JSONDecodeError as err:
                bad_seen = True
                screening.reject(index, f"not valid JSON ({err.msg})")
                continue
            if not isinstance(record, dict):
                bad_seen = True
                screening.reject(index, f"a JSON {_JSON_NAMES.get(type(record), type(record).__name__)}, not an object")
                continue
            good.append((index, record))
    return JsonlRecords(good) if bad_seen else None


def prompt_fits(tokenizer: Any, budget: int) -> Callable[[Any], str | None]:
    """A check for one Prompt: why it cannot be trained on (its chat-formatted tokens leave fewer than
    rollout.max_new_tokens of the model's context), or None."""
    from rlvr.rollout.hf import render_prompts  # the text the rollout engine encodes, encoded the same way

    def check(prompt: Any) -> str | None:
        tokens = len(tokenizer(render_prompts(tokenizer, [prompt])[0], add_special_tokens=False)["input_ids"])
        return None if tokens <= budget else f"prompt of {tokens} tokens; the context leaves {budget} for it"
    return check


def screen_prompt_lengths(task: Task, tokenizer: Any, config: RunConfig) -> None:
    """Rows whose prompt leaves less than max_new_tokens of the context are bad rows, found before
    any weights load. Tasks with generated prompts (arithmetic) have no such rows and no `screen_prompts`."""
    from rlvr.model.load import context_length  # torch: only when a run is set up, never for reading a dataset

    screen = getattr(task, "screen_prompts", None)
    limit = context_length(config.model) if screen is not None else None
    if screen is not None and limit is not None:
        screen(prompt_fits(tokenizer, limit - config.rollout.max_new_tokens))
