"""Question/answer datasets (GSM8K, MATH, your own JSONL) loaded through Hugging Face `datasets`.

`task.path` may be
  * a local file: .jsonl / .json (records), .parquet or .csv;
  * a local directory written by `save_to_disk` (a Dataset or a DatasetDict), or any directory that
    `load_dataset(dir)` understands;
  * a hub id such as "openai/gsm8k" (`load_dataset(path, split=task.split)`).

Its layout (plain question/answer columns, TRL's prompt-only or verl's parquet) is told from the columns
(rlvr.tasks.layouts; docs/data.md). The reference is taken from the answer: GSM8K's "... #### 72" gives "72", a
MATH solution gives the content of its last \\boxed{...}, anything else is the whole answer, stripped. Every row
is checked when the task is built (before any model loads): a bad row (missing or unreadable answer, invalid UTF-8
or JSON line, a repeated question) is skipped and counted, naming its line as an editor counts it (or its row,
from 1: rlvr.tasks.positions) and why, or with task.bad_rows=error stops the run with that message
(tasks/screening.py). Start-up lines say how many rows were read, skipped, trained on and held out.

Held-out split: `task.eval_split` when given (a split name, or for a single-file source a second file);
otherwise the rows whose question hashes (sha256) into the lowest 10% of the hash space. Hashing the
question rather than the row position keeps a question on the same side when the file is reordered or
grows, and duplicated questions can never straddle the split.
"""
from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from rlvr.config.run import ConfigError, TaskConfig
from rlvr.paths import local_or_hub
from rlvr.tasks.base import first, sample_forever
from rlvr.tasks.chat import build_messages
from rlvr.tasks.layouts import BadCell, DatasetError, Layout, choose_layout, read_cells
from rlvr.tasks.positions import labels, scanned_line
from rlvr.tasks.screening import Screening, scan_jsonl
from rlvr.types import Prompt
from rlvr.verifiers.math.verifier import last_boxed

HELD_OUT_FRACTION = 0.1
FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
_PLAIN_NUMBER = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?")  # "1,234.5": commas are thousands separators
__all__ = ["DatasetError", "QATask", "extract_reference", "load_split"]  # DatasetError lives in layouts.py


@dataclass(frozen=True)
class Row:
    origin: str  # where the row lives: "data.jsonl" or "openai/gsm8k/train"; Prompt.id = origin/index
    index: int  # 0-based row in that source
    question: str  # the question; a conversation's canonical JSON (the key of duplicates and of the split)
    reference: str
    columns: dict[str, Any]  # every column but the prompt: Prompt.columns, the reward functions' keyword arguments
    where: str = ""  # how messages name it: "line 11", "row 5" (rlvr.tasks.positions)
    messages: tuple[dict[str, str], ...] | None = None  # a conversational prompt (TRL, verl), used as written


@dataclass
class Source:
    """One loaded source's rows and what start-up says of it."""

    name: str  # how messages name it
    layout: Layout
    rows: list[Row] = field(default_factory=list)
    skipped: int = 0

    def line(self) -> str:
        talks = sum(row.messages is not None for row in self.rows)
        chats = (f"; {talks} prompts are chat messages, used as written (task.instruction and the one-shot example "
                 "are not added)") if talks else ""
        return (f"rlvr: data {self.name}: {self.layout.describe()}: {len(self.rows) + self.skipped} rows, "
                f"{self.skipped} skipped as bad{chats}")


def extract_reference(answer: str) -> str:
    """GSM8K "#### 72" -> "72"; MATH "... \\boxed{\\frac{1}{2}}" -> "\\frac{1}{2}"; else the stripped answer.

    Raises ValueError for a \\boxed whose braces never close (the reference would be a guess).
    """
    if "####" in answer:
        reference = answer.rsplit("####", 1)[1].strip()
        # GSM8K writes a few finals as "1,000"; dropping separators keeps the number a number.
        return reference.replace(",", "") if _PLAIN_NUMBER.fullmatch(reference) else reference
    boxed = last_boxed(answer)  # the verifier's extractor: the reference is read as completions are
    if boxed is None and ("\\boxed" in answer or "\\fbox" in answer):
        raise ValueError("has a \\boxed{ whose braces never close")
    return answer.strip() if boxed is None else boxed.strip()


def _hash_fraction(question: str) -> float:
    return int(hashlib.sha256(question.encode()).hexdigest()[:16], 16) / 16**16


def load_split(path: str, split: str, subset: str | None = None) -> Any:
    """One split as a `datasets.Dataset`; every failure becomes a DatasetError naming the source."""
    import datasets  # imported here: it is slow to import and only the qa task needs it

    local = Path(path).expanduser()
    if local.is_file():
        builder = FILE_BUILDERS.get(local.suffix.lower())
        if builder is None:
            raise DatasetError(f"{path}: unsupported file type {local.suffix!r}; "
                               f"use one of {', '.join(FILE_BUILDERS)}, a directory or a hub id")
        try:  # a single file holds a single split, which `datasets` calls "train"
            return datasets.load_dataset(builder, data_files=str(local), split="train")
        except Exception as err:  # malformed JSON/parquet: say which file, keep the cause
            if _holds_no_rows(local):  # `datasets` says "corresponds to no data" or nothing useful
                raise DatasetError(f"{path}: the file holds no rows") from err
            raise DatasetError(f"{path}: could not read as {builder}: {_innermost(err)}") from err
    if local.is_dir():
        return _load_directory(local, path, split)
    local_or_hub(path, "dataset", DatasetError, "dataset file")  # missing, or no hub: one line, not a minute of retries
    try:
        return datasets.load_dataset(path, subset, split=split)  # subset: e.g. "main" for openai/gsm8k
    except Exception as err:  # offline, unknown id, missing config name, unknown split ...
        raise DatasetError(f"could not load {path!r} split {split!r} from the Hugging Face hub: {err}") from err


def _holds_no_rows(file: Path) -> bool:
    """Empty, blank, or a CSV's header alone (read only when loading failed, and only for a small file)."""
    if file.stat().st_size > 1 << 20:
        return False
    lines = [line for line in file.read_bytes().splitlines() if line.strip()]
    return len(lines) <= (1 if file.suffix.lower() == ".csv" else 0)


def _innermost(err: BaseException) -> str:
    """The first cause of a `datasets` error ("An error occurred while generating the dataset" wraps the reason)."""
    while (err.__cause__ or err.__context__) is not None:
        err = err.__cause__ or err.__context__
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def _load_directory(local: Path, path: str, split: str) -> Any:
    import datasets

    saved = (local / "dataset_dict.json").is_file() or (local / "state.json").is_file()
    try:
        loaded = datasets.load_from_disk(str(local)) if saved else datasets.load_dataset(str(local), split=split)
    except Exception as err:
        raise DatasetError(f"{path}: could not load split {split!r}: {err}") from err
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DatasetError(f"{path}: no split {split!r}; splits: {', '.join(loaded)}")
        return loaded[split]
    return loaded


def _read(path: str, split: str, config: TaskConfig) -> Source:
    """Load one source and check every row; bad rows are skipped and reported, or raise (task.bad_rows)."""
    local = Path(path).expanduser()
    single_file = local.is_file()
    name = path if single_file else f"{path} [{split}]"  # how messages name it
    origin = path if single_file else f"{path}/{split}"
    screening = Screening(name, config.bad_rows, DatasetError, label=scanned_line)
    lines = scan_jsonl(local, screening) if single_file and local.suffix.lower() == ".jsonl" else None
    dataset = lines if lines is not None else load_split(path, split, config.subset)
    if lines is None:  # `datasets` read it whole, skipping blank lines: positions are not lines
        screening.label = labels(local if single_file else None)
    source = Source(name, choose_layout(list(dataset.column_names), config, name))
    seen: dict[str, str] = {}
    for index, record in (lines.indexed() if lines is not None else enumerate(dataset)):
        row = _row(record, index, origin, source.layout, seen, screening)
        if row is not None:
            seen[row.question] = row.where
            source.rows.append(row)
    screening.report(len(source.rows))
    source.skipped = len(screening.bad)
    print(source.line(), file=sys.stderr, flush=True)
    return source


def _row(record: dict[str, Any], index: int, origin: str, layout: Layout, seen: dict[str, str],
         screening: Screening) -> Row | None:
    try:
        cells = read_cells(record, layout)
        if cells.question in seen:  # a repeated question would be drawn twice as often
            raise BadCell(f"the same question as {seen[cells.question]}")
        reference = _reference(cells.answer, layout)
    except BadCell as err:
        return screening.reject(index, str(err))
    # Every column but the prompt travels along: TRL-style reward functions take them as kwargs.
    columns = {k: v for k, v in record.items() if k != layout.prompt}
    return Row(origin, index, cells.question, reference, columns, screening.label(index), cells.messages)


def _reference(answer: str, layout: Layout) -> str:
    column = layout.answer or "reward_model.ground_truth"
    try:
        reference = extract_reference(answer)
    except ValueError as err:
        raise BadCell(f"field {column!r} {err}") from None
    if not reference:
        raise BadCell(f"field {column!r} gives an empty reference (answer {answer[-80:]!r})")
    return reference


def _split_line(path: str, train: int, held: int, how: str) -> str:
    return f"rlvr: data {path}: {train} rows for training, {held} held out for evaluation ({how})"


class QATask:
    """Prompts from a question/answer dataset; see the module docstring for sources and the split."""

    def __init__(self, config: TaskConfig) -> None:
        if not config.path:
            raise ConfigError("task.path is required when task.name=qa (a .jsonl/.parquet file or a hub id)")
        self.config = config
        self.name = f"qa:{config.path}"
        self.how = ""  # how the held-out rows were chosen, for the start-up lines
        self.train, self.held_out = self._split(config)

    def _split(self, config: TaskConfig) -> tuple[list[Row], list[Row]]:
        path = config.path
        assert path is not None
        rows = _read(path, config.split, config).rows
        if config.eval_split is None:
            held = [r for r in rows if _hash_fraction(r.question) < HELD_OUT_FRACTION]
            train = [r for r in rows if _hash_fraction(r.question) >= HELD_OUT_FRACTION]
            self.how = (f"about {HELD_OUT_FRACTION:.0%} of the questions, picked by hash; task.eval_split names a "
                        "held-out set of your own")
            print(_split_line(path, len(train), len(held), self.how), file=sys.stderr, flush=True)
            return train, held
        if not Path(path).expanduser().is_file():
            held_source = _read(path, config.eval_split, config)
        elif Path(config.eval_split).expanduser().is_file():
            held_source = _read(config.eval_split, "train", config)  # a single file's only split is "train"
        elif Path(config.eval_split).suffix or "/" in config.eval_split:  # a file's name: one that is not there
            raise DatasetError(f"task.eval_split: no such file or directory: {config.eval_split!r}")
        else:
            raise DatasetError(f"task.eval_split={config.eval_split!r}: {path} is a single file, so the held-out "
                               f"split must be another file, or unset for a hashed 10% hold-out")
        # Drop training rows that repeat a held-out question, so evaluation never tests memorised items.
        held_questions = {r.question for r in held_source.rows}
        train = [r for r in rows if r.question not in held_questions]
        dropped = len(rows) - len(train)
        self.how = f"from {held_source.name}" + (f"; {dropped} training rows dropped as they repeat a held-out "
                                                 "question" if dropped else "")
        print(_split_line(path, len(train), len(held_source.rows), self.how), file=sys.stderr, flush=True)
        return train, held_source.rows

    def screen_prompts(self, problem: Callable[[Prompt], str | None]) -> None:
        """Drop rows whose prompt `problem` rejects (too long for the model's context), as bad rows are."""
        path, trained = str(self.config.path), len(self.train)
        everything = self.train + self.held_out
        screening = Screening(path, self.config.bad_rows, DatasetError, label=lambda i: _where(everything[i], path))
        rejected = {i for i, row in enumerate(everything) if self._rejected(i, row, problem, screening)}
        self.train[:] = [row for i, row in enumerate(everything[:trained]) if i not in rejected]
        self.held_out[:] = [row for i, row in enumerate(everything) if i >= trained and i not in rejected]
        screening.report(len(self.train) + len(self.held_out))
        if rejected:
            print(_split_line(path, len(self.train), len(self.held_out), f"after dropping {len(rejected)} prompts "
                              f"too long for the model's context; {self.how}"), file=sys.stderr, flush=True)

    def _rejected(self, i: int, row: Row, problem: Callable[[Prompt], str | None], screening: Screening) -> bool:
        why = problem(self.prompt(row))
        if why is not None:
            screening.reject(i, why)
        return why is not None

    def prompt(self, row: Row) -> Prompt:
        if row.messages is None:
            messages = build_messages(row.question, self.config)
        else:  # used as written; a configured system prompt opens a conversation that has none
            system = self.config.system_prompt
            has_system = any(m["role"] == "system" for m in row.messages)
            messages = row.messages if system is None or has_system else ({"role": "system", "content": system},
                                                                          *row.messages)
        return Prompt(id=f"{row.origin}/{row.index}", messages=tuple(messages), reference=row.reference,
                      columns=dict(row.columns))

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        if not self.train:
            raise DatasetError(f"{self.config.path}: no training rows are left after the held-out split")
        return (self.prompt(row) for row in sample_forever(self.train, seed))

    def eval_prompts(self, size: int) -> list[Prompt]:
        if not self.held_out:
            raise DatasetError(f"{self.config.path}: the held-out split is empty (the hashed 10% picked none of "
                               f"{len(self.train)} rows); set task.eval_split or add rows (or eval.at_end=false and "
                               "eval.every=0 to train without evaluating)")
        return [self.prompt(row) for row in first(self.held_out, size)]


def _where(row: Row, path: str) -> str:
    """A row's name in messages about the whole task: its file too when it is not task.path (a held-out file)."""
    return row.where if row.origin == path else f"{row.where} of {row.origin}"
