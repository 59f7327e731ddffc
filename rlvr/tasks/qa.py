"""Question/answer datasets (GSM8K, MATH, your own JSONL) loaded through Hugging Face `datasets`.

`task.path` may be
  * a local file: .jsonl / .json (records), .parquet or .csv;
  * a local directory written by `save_to_disk` (a Dataset or a DatasetDict), or any directory that
    `load_dataset(dir)` understands;
  * a hub id such as "openai/gsm8k" (`load_dataset(path, split=task.split)`).

The reference is taken from the answer column: GSM8K's "... #### 72" gives "72", a MATH solution gives
the content of its last \\boxed{...}, anything else is the whole answer, stripped. Every row is checked
when the task is built (before any model loads): a bad row (missing or unreadable answer, invalid UTF-8 or
JSON line, a repeated question) is skipped and counted, naming the row (0-based) and why, or with
task.bad_rows=error stops the run with that message (tasks/screening.py).

Held-out split: `task.eval_split` when given (a split name, or for a single-file source a second file);
otherwise the rows whose question hashes (sha256) into the lowest 10% of the hash space. Hashing the
question rather than the row position keeps a question on the same side when the file is reordered or
grows, and duplicated questions can never straddle the split.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from rlvr.config.run import ConfigError, TaskConfig
from rlvr.tasks.base import first, sample_forever
from rlvr.tasks.chat import build_messages
from rlvr.tasks.screening import Screening, scan_jsonl
from rlvr.types import Prompt
from rlvr.verifiers.math.verifier import last_boxed

HELD_OUT_FRACTION = 0.1
FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
_PLAIN_NUMBER = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?")  # "1,234.5": commas are thousands separators


class DatasetError(ConfigError):
    """A dataset that cannot be used as given; a ConfigError so the CLI reports it without a traceback."""


@dataclass(frozen=True)
class Row:
    origin: str  # where the row lives: "data.jsonl" or "openai/gsm8k/train"; Prompt.id = origin/index
    index: int  # 0-based row in that source
    question: str
    reference: str
    columns: dict[str, Any]


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


def _text(value: Any) -> str | None:
    """A cell as stripped text; numbers are accepted (JSON answers are often bare ints)."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _hash_fraction(question: str) -> float:
    return int(hashlib.sha256(question.encode()).hexdigest()[:16], 16) / 16**16


def _looks_local(path: str) -> bool:
    return path.startswith(("/", ".", "~")) or Path(path).suffix.lower() in FILE_BUILDERS


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
            raise DatasetError(f"{path}: could not read as {builder}: {err}") from err
    if local.is_dir():
        return _load_directory(local, path, split)
    if _looks_local(path):
        raise DatasetError(f"dataset file {path!r} does not exist (task.path)")
    try:
        return datasets.load_dataset(path, subset, split=split)  # subset: e.g. "main" for openai/gsm8k
    except Exception as err:  # offline, unknown id, missing config name, unknown split ...
        raise DatasetError(f"could not load {path!r} split {split!r} from the Hugging Face hub: {err}") from err


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


def _rows(path: str, split: str, config: TaskConfig) -> list[Row]:
    """Load one source and check every row; bad rows are skipped and reported, or raise (task.bad_rows)."""
    single_file = Path(path).expanduser().is_file()
    source = path if single_file else f"{path} [{split}]"  # how messages name it
    origin = path if single_file else f"{path}/{split}"
    screening = Screening(source, config.bad_rows, DatasetError)
    local = Path(path).expanduser()
    lines = scan_jsonl(local, screening) if single_file and local.suffix.lower() == ".jsonl" else None
    dataset = lines if lines is not None else load_split(path, split, config.subset)
    columns = list(dataset.column_names)
    for field in (config.question_field, config.answer_field):
        if field not in columns:
            kind = "question" if field == config.question_field else "answer"
            raise DatasetError(f"{source}: no column {field!r} (task.{kind}_field); "
                               f"columns: {', '.join(columns)}")
    rows, seen = [], {}
    for index, record in (lines.indexed() if lines is not None else enumerate(dataset)):
        row = _row(record, index, origin, config, seen, screening)
        if row is not None:
            seen[row.question] = index
            rows.append(row)
    screening.report(len(rows))
    return rows


def _row(record: dict[str, Any], index: int, origin: str, config: TaskConfig, seen: dict[str, int],
         screening: Screening) -> Row | None:
    question, answer = _text(record.get(config.question_field)), _text(record.get(config.answer_field))
    for field, value in ((config.question_field, question), (config.answer_field, answer)):
        if value is None:
            return screening.reject(index, f"field {field!r} is missing or empty")
    assert question is not None and answer is not None
    if question in seen:  # a repeated question would be drawn twice as often
        return screening.reject(index, f"the same question as row {seen[question]}")
    try:
        reference = extract_reference(answer)
    except ValueError as err:
        return screening.reject(index, f"field {config.answer_field!r} {err}")
    if not reference:
        return screening.reject(index, f"field {config.answer_field!r} gives an empty reference "
                                       f"(answer {answer[-80:]!r})")
    # Every column but the question travels along: TRL-style reward functions take them as kwargs.
    extra = {k: v for k, v in record.items() if k != config.question_field}
    return Row(origin, index, question, reference, extra)


class QATask:
    """Prompts from a question/answer dataset; see the module docstring for sources and the split."""

    def __init__(self, config: TaskConfig) -> None:
        if not config.path:
            raise ConfigError("task.path is required when task.name=qa (a .jsonl/.parquet file or a hub id)")
        self.config = config
        self.name = f"qa:{config.path}"
        self.train, self.held_out = self._split(config)

    def _split(self, config: TaskConfig) -> tuple[list[Row], list[Row]]:
        path = config.path
        assert path is not None
        rows = _rows(path, config.split, config)
        if config.eval_split is None:
            held = [r for r in rows if _hash_fraction(r.question) < HELD_OUT_FRACTION]
            train = [r for r in rows if _hash_fraction(r.question) >= HELD_OUT_FRACTION]
            return train, held
        if not Path(path).expanduser().is_file():
            held = _rows(path, config.eval_split, config)
        elif Path(config.eval_split).expanduser().is_file():
            held = _rows(config.eval_split, "train", config)  # a single file's only split is "train"
        else:
            raise DatasetError(f"task.eval_split={config.eval_split!r}: {path} is a single file, so the held-out "
                               f"split must be another file, or unset for a hashed 10% hold-out")
        # Drop training rows that repeat a held-out question, so evaluation never tests memorised items.
        held_questions = {r.question for r in held}
        return [r for r in rows if r.question not in held_questions], held

    def screen_prompts(self, problem: Callable[[Prompt], str | None]) -> None:
        """Drop rows whose prompt `problem` rejects (too long for the model's context), as bad rows are."""
        screening = Screening(str(self.config.path), self.config.bad_rows, DatasetError)
        for rows in (self.train, self.held_out):
            kept = [row for row in rows if not self._rejected(row, problem, screening)]
            rows[:] = kept
        screening.report(len(self.train) + len(self.held_out))

    def _rejected(self, row: Row, problem: Callable[[Prompt], str | None], screening: Screening) -> bool:
        why = problem(self.prompt(row))
        if why is not None:
            screening.reject(row.index, why)
        return why is not None

    def prompt(self, row: Row) -> Prompt:
        return Prompt(
            id=f"{row.origin}/{row.index}",
            messages=build_messages(row.question, self.config),
            reference=row.reference,
            columns=dict(row.columns),
        )

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        if not self.train:
            raise DatasetError(f"{self.config.path}: no training rows are left after the held-out split")
        return (self.prompt(row) for row in sample_forever(self.train, seed))

    def eval_prompts(self, size: int) -> list[Prompt]:
        if not self.held_out:
            raise DatasetError(f"{self.config.path}: the held-out split is empty (the hashed 10% picked none of "
                               f"{len(self.train)} rows); set task.eval_split or add rows")
        return [self.prompt(row) for row in first(self.held_out, size)]
