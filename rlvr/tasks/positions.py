"""How messages name a dataset row, so a user finds it: a text file's line as an editor counts it (the
first line is line 1, blank lines count, a CSV's header is line 1), a JSON array's record, or a table's row
counted from 1. Prompt ids (samples.jsonl's prompt_id) keep the 0-based position they always had."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Callable

BOM = b"\xef\xbb\xbf"  # UTF-8 byte order mark, which some editors put first; `datasets` reads past it
Label = Callable[[int], str]  # a record's 0-based position in the loaded dataset -> "line 11", "row 5"


def scanned_line(index: int) -> str:
    """A JSONL file read line by line (tasks/screening.py scan_jsonl): `index` is the 0-based line."""
    return f"line {index + 1}"


def row_label(index: int) -> str:
    return f"row {index + 1}"


def labels(path: Path | None) -> Label:
    """The label of each record `datasets` loaded from `path` (None: a hub or saved dataset: rows counted from 1).
    `datasets` skips blank lines of JSON lines and CSV files, so a record's position is not its line."""
    if path is None:
        return row_label
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        if suffix == ".json" and _is_array(path):
            return lambda index: f"record {index + 1}"
        return _from_list(_nonblank_lines(path))
    if suffix == ".csv":
        return _from_list(_csv_record_lines(path))
    return row_label


def _from_list(lines: list[int]) -> Label:
    return lambda index: f"line {lines[index]}" if index < len(lines) else row_label(index)


def _is_array(path: Path) -> bool:
    """Whether the .json file is one array (records) rather than one object per line: its first byte past
    whitespace, however much of it there is."""
    with path.open("rb") as f:
        head = f.read(4096)
        while head and not head.removeprefix(BOM).lstrip():
            head = f.read(4096)
        return head.removeprefix(BOM).lstrip().startswith(b"[")


def _nonblank_lines(path: Path) -> list[int]:
    with path.open("rb") as f:
        return [number for number, raw in enumerate(f, 1) if raw.strip()]


def _csv_record_lines(path: Path) -> list[int]:
    """The line each data record starts on: after the header, blank lines skipped, a quoted field may span lines.
    A line of spaces is one empty field to csv.reader but blank to pandas (which `datasets` reads CSV with)."""
    starts, previous, header = [], 0, False
    with path.open(newline="", encoding="utf-8-sig") as f:  # datasets has already refused a file that is not UTF-8
        reader = csv.reader(f)
        for record in reader:
            data = bool(record) and not (len(record) == 1 and not record[0].strip())
            if data and header:
                starts.append(previous + 1)
            header, previous = header or data, reader.line_num
    return starts
