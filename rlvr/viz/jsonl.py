"""Reading the JSON-lines logs of a run that may be writing them at this very moment.

A writer appends whole lines (`json.dumps(row) + "\\n"`), but a reader can catch one half written: a last line
without its newline that does not parse is the run still writing, and is skipped (it is read complete next time).
Any other line that does not parse is damage and stops with one message naming the file and the line.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rlvr.errors import UserFacingError

# rlvr's writers start every line with the step: `{"step": 12, ...` (json.dumps of a dict whose first key is step)
STEP_PREFIX = re.compile(rb'^\{"step": (-?\d+)[,}]')

TAIL_BLOCK = 1 << 16  # bytes read at a time from the end of a file by read_jsonl_tail


class RunDataError(UserFacingError):
    """A run directory or one of its files that cannot be shown, phrased for the user (the CLI prints one line)."""


@dataclass(frozen=True)
class JsonLine:
    where: str  # "line 12", for messages about this record
    record: dict[str, Any]


def read_jsonl(path: Path) -> list[JsonLine]:
    """Every object of a JSON-lines file, numbered from line 1."""
    data = path.read_bytes()
    return _parse(path, data.split(b"\n"), lambda i: f"line {i + 1}")


def read_jsonl_tail(path: Path, count: int) -> list[JsonLine]:
    """The last `count` objects of a JSON-lines file, reading only the end of it (a dashboard polls the groups
    log of a long run, whose lines hold every token of G completions)."""
    if count <= 0:
        return []
    with path.open("rb") as f:
        position = f.seek(0, 2)
        data = b""
        while position > 0 and data.count(b"\n") <= count + 1:
            size = min(TAIL_BLOCK, position)
            position -= size
            f.seek(position)
            data = f.read(size) + data
    lines = data.split(b"\n")
    if position > 0:  # the first piece starts inside a line
        lines = lines[1:]
    total = len(lines)
    parsed = _parse(path, lines, lambda i: f"line {total - i} from the end" if position > 0 else f"line {i + 1}")
    return parsed[-count:]


def read_jsonl_steps(path: Path, choose: Callable[[list[int]], list[int]]) -> list[JsonLine] | None:
    """Only the lines of the steps `choose` picks from all the file's steps (sorted; a repeated step counts its
    last line), found by each line's opening instead of parsing it: a report keeps 3 of a long run's groups.jsonl
    lines, each holding every token of G completions. None when a line does not open with its step (a file not
    written by rlvr): read it whole then. The last piece, without its newline yet, is a line being written."""
    complete = path.read_bytes().split(b"\n")[:-1]
    index: dict[int, int] = {}
    for i, raw in enumerate(complete):
        if raw.strip():
            match = STEP_PREFIX.match(raw)
            if match is None:
                return None
            index[int(match.group(1))] = i
    return [_parse_line(path, complete[index[step]], f"line {index[step] + 1}") for step in choose(sorted(index))]


def _parse(path: Path, lines: list[bytes], where) -> list[JsonLine]:
    out = []
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        if i == len(lines) - 1:  # no newline after it yet: maybe a line the run is still writing
            try:
                json.loads(raw)
            except ValueError:
                continue
        out.append(_parse_line(path, raw, where(i)))
    return out


def _parse_line(path: Path, raw: bytes, where: str) -> JsonLine:
    try:
        record = json.loads(raw)
    except ValueError as err:  # json.JSONDecodeError and UnicodeDecodeError both are ValueErrors
        raise RunDataError(f"{path}: {where} is not valid JSON ({_reason(err)}); fix or remove that line") from None
    if not isinstance(record, dict):
        raise RunDataError(f"{path}: {where} is not a JSON object")
    return JsonLine(where, record)


def _reason(err: ValueError) -> str:
    return err.msg if isinstance(err, json.JSONDecodeError) else str(err)
