"""Chat rows for supervised fine-tuning: where they come from and which ones are usable.

`sft.data` is
  * a local .jsonl / .json / .parquet file, a directory written by `save_to_disk`, or a hub id, read through
    Hugging Face `datasets` (rlvr.tasks.qa.load_split, the loader the qa task uses);
  * `cold_start`: readable worked solutions generated offline for `task.name` (rlvr.tasks.cold_start).

A row is either a messages column (a list of {role, content}) or prompt/completion columns, where the prompt
is a text (one user turn) or a list of turns and the completion a text (one assistant turn) or a list of
turns. Turns after the last assistant turn teach nothing and are dropped. A row that cannot be trained on
(no assistant turn, an unknown or misplaced role, an empty turn, text that is not valid UTF-8, a bad JSON
line, and later: too long after tokenising) is skipped and counted by reason in one line at start, or with
sft.bad_rows=error stops the run naming the source and row.
"""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from rlvr.config.run import ConfigError, RunConfig, SFTConfig

COLD_START = "cold_start"
ROLES = ("system", "user", "assistant")
LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
SHOWN = 3  # bad rows named in the start-up line; the counts cover all


class SFTDataError(ConfigError):
    """SFT data that cannot be used as given; printed by the CLI as one line (exit 2)."""


@dataclass(frozen=True)
class Turn:
    role: str  # one of ROLES
    content: str

    def as_message(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class ChatRow:
    row_id: str  # "<source>/<index>" or the generator's id; names the row in messages
    index: int  # 0-based row (line) of its source
    turns: tuple[Turn, ...]  # ends with an assistant turn


class BadRow(Exception):
    """Raised while reading one row; `reason` is the short category counted in the summary."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason} ({detail})" if detail else reason)
        self.reason = reason


@dataclass
class RowScreen:
    """The bad rows of one source, counted by reason; `reject` records one or raises (sft.bad_rows=error)."""

    source: str
    mode: str  # "skip" | "error"
    reasons: Counter = field(default_factory=Counter)
    named: list[str] = field(default_factory=list)

    def reject(self, index: int, why: str, reason: str | None = None) -> None:
        if self.mode == "error":
            raise SFTDataError(f"{self.source} row {index}: {why} (sft.bad_rows=skip skips such rows instead)")
        # Lines rejected by rlvr.tasks.screening.scan_jsonl come without a category: use their first words.
        self.reasons[reason or why.split(" (")[0]] += 1
        if len(self.named) < SHOWN:
            self.named.append(f"row {index}: {why}")

    @property
    def skipped(self) -> int:
        return sum(self.reasons.values())

    def summary(self, kept: int) -> str:
        counts = ", ".join(f"{n} {reason}" for reason, n in self.reasons.most_common())
        return (f"{self.source}: skipped {self.skipped} of {kept + self.skipped} rows ({counts}; "
                f"{'; '.join(self.named)}{' ...' if self.skipped > SHOWN else ''}); "
                "sft.bad_rows=error stops on them instead")

    def report(self, kept: int) -> None:
        """One line at start when rows were skipped; no usable row at all is an error."""
        if kept == 0:
            detail = f" ({self.summary(0)})" if self.skipped else ""
            raise SFTDataError(f"{self.source}: no usable row for SFT{detail}")
        if self.skipped:
            print(f"rlvr: {self.summary(kept)}", file=sys.stderr, flush=True)


def data_source(config: RunConfig) -> str:
    """sft.data, checked: unset or a missing local file is one error naming the key."""
    data = config.sft.data
    if not data:
        raise SFTDataError("sft.data is required: a .jsonl/.json/.parquet file, a saved dataset directory, "
                           f"a hub dataset id, or '{COLD_START}' (worked solutions for task.name)")
    if data != COLD_START and missing_local(data):
        raise SFTDataError(f"sft.data: {data!r} does not exist")
    return data


def missing_local(data: str) -> bool:
    """`data` names a local file or directory (a path, or a known data suffix) that is not there; a hub id never is."""
    local = Path(data).expanduser()
    looks_local = data.startswith(("/", ".", "~")) or local.suffix.lower() in LOCAL_SUFFIXES
    return looks_local and not local.exists()


def check_mix(config: RunConfig, files: bool = True) -> None:
    """sft.mix_ratio and sft.mix_data come together (either alone would be ignored without a word), and the ratio
    mixes at least one row; with `files`, a missing local mix file is one error naming the key."""
    s = config.sft
    if s.mix_ratio > 0 and not s.mix_data:
        raise SFTDataError(f"sft.mix_ratio={s.mix_ratio} needs sft.mix_data (chat rows to mix into sft.data)")
    if s.mix_data and s.mix_ratio == 0:
        raise SFTDataError(f"sft.mix_data={s.mix_data!r} is set but sft.mix_ratio is 0: set the share of training "
                           "rows to draw from it (e.g. sft.mix_ratio=0.25), or unset sft.mix_data")
    if files and s.mix_data and s.mix_data != COLD_START and missing_local(s.mix_data):
        raise SFTDataError(f"sft.mix_data: {s.mix_data!r} does not exist")


def load_chat_rows(config: RunConfig, screen: RowScreen) -> list[ChatRow]:
    """Every usable row of the configured source, in source order; bad ones go to `screen`."""
    source = data_source(config)
    s = config.sft
    records = _cold_start_records(config) if source == COLD_START else _dataset_records(source, s, screen)
    rows = []
    for index, row_id, record in records:
        try:
            turns = row_turns(record, s)
        except BadRow as bad:
            screen.reject(index, str(bad), bad.reason)
            continue
        rows.append(ChatRow(row_id, index, turns))
    return rows


def source_name(config: RunConfig) -> str:
    """How messages name the source: the file, `hub-id [split]`, or `cold_start (task)`."""
    data = config.sft.data or ""
    if data == COLD_START:
        return f"{COLD_START} ({config.task.name})"
    return data if Path(data).expanduser().is_file() else f"{data} [{config.sft.split}]"


def _cold_start_records(config: RunConfig) -> Iterator[tuple[int, str, dict[str, Any]]]:
    from rlvr.tasks.cold_start import cold_start_rows  # lazy: only this source needs the generators

    for index, record in enumerate(cold_start_rows(config.task, config.sft.cold_start_size, config.seed)):
        yield index, str(record.get("id", f"{COLD_START}/{index}")), record


def _dataset_records(source: str, s: SFTConfig, screen: RowScreen) -> Iterator[tuple[int, str, dict[str, Any]]]:
    from rlvr.tasks.qa import load_split
    from rlvr.tasks.screening import scan_jsonl

    local = Path(source).expanduser()
    # A JSONL line that is not UTF-8 or not JSON would make `datasets` refuse the whole file: read such files
    # line by line instead (the qa task does the same), counting the bad lines as bad rows.
    lines = scan_jsonl(local, screen) if local.is_file() and local.suffix.lower() == ".jsonl" else None
    dataset = lines if lines is not None else load_split(source, s.split, s.subset)
    columns = list(dataset.column_names)
    if s.messages_field not in columns and not {s.prompt_field, s.completion_field} <= set(columns):
        raise SFTDataError(f"{screen.source}: no column {s.messages_field!r} (sft.messages_field) and not both "
                           f"{s.prompt_field!r} and {s.completion_field!r} (sft.prompt_field, sft.completion_field);"
                           f" columns: {', '.join(columns)}")
    origin = str(source) if local.is_file() else f"{source}/{s.split}"
    for index, record in (lines.indexed() if lines is not None else enumerate(dataset)):
        yield index, f"{origin}/{index}", record


def row_turns(record: dict[str, Any], s: SFTConfig) -> tuple[Turn, ...]:
    """The row's turns, checked and cut after the last assistant turn; raises BadRow."""
    if s.messages_field in record and record[s.messages_field] is not None:
        turns = _turn_list(record[s.messages_field], s.messages_field)
    else:
        turns = (_side(record.get(s.prompt_field), "user", s.prompt_field)
                 + _side(record.get(s.completion_field), "assistant", s.completion_field))
    return check_turns(turns)


def _side(value: Any, role: str, column: str) -> list[Turn]:
    """A prompt or completion cell: a text is one turn of `role`, a list holds turns."""
    if isinstance(value, str):
        return [Turn(role, _text(value, column))]
    if value is None:
        raise BadRow("missing prompt or completion", f"column {column!r} is empty in this row")
    return _turn_list(value, column)


def _turn_list(value: Any, column: str) -> list[Turn]:
    if not isinstance(value, (list, tuple)):
        raise BadRow("bad turns", f"column {column!r} holds a {type(value).__name__}, not a list of turns")
    turns = []
    for position, turn in enumerate(value):
        if not isinstance(turn, dict):
            raise BadRow("bad turns", f"{column}[{position}] is a {type(turn).__name__}, not {{role, content}}")
        role = turn.get("role")
        if role not in ROLES:
            raise BadRow("bad role", f"{column}[{position}] has role {role!r}; allowed: {', '.join(ROLES)}")
        turns.append(Turn(role, _text(turn.get("content"), f"{column}[{position}]")))
    return turns


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadRow("empty content", f"{where} has no text")
    try:
        value.encode("utf-8")  # a lone surrogate (JSON "\ud800") cannot be tokenised
    except UnicodeEncodeError as err:
        raise BadRow("not valid UTF-8", f"{where}: {err.reason} at character {err.start}") from None
    return value


def check_turns(turns: list[Turn]) -> tuple[Turn, ...]:
    """System only first; the conversation must have a prompt before its first assistant turn and at least
    one assistant turn; what follows the last assistant turn is dropped (nothing there is trained on)."""
    for position, turn in enumerate(turns):
        if turn.role == "system" and position > 0:
            raise BadRow("bad role", f"system turn at position {position}; only the first turn may be system")
    assistant = [i for i, t in enumerate(turns) if t.role == "assistant"]
    if not assistant:
        raise BadRow("no assistant turn")
    if not any(t.role == "user" for t in turns[:assistant[0]]):
        raise BadRow("bad role", "the first assistant turn has no user turn before it")
    return tuple(turns[:assistant[-1] + 1])
