"""General chat data mixed into the rejection-sampled set (R1 paper sec. 2.3.3: ~600k reasoning samples plus
~200k non-reasoning ones, so the second SFT does not narrow the model to the RL task).

With `kept` verified rows and a share `ratio` of general rows wanted in the output, g/(kept+g) = ratio gives
g = kept * ratio / (1 - ratio), rounded. The file is read and every row checked before any model loads.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.sampling import SampleError

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class MixPlan:
    """The general rows chosen for the output."""

    rows: tuple[dict[str, Any], ...]  # dataset rows tagged "source": "general"
    available: int  # valid rows in the file
    with_replacement: bool  # True when more rows were wanted than the file holds


def row_problem(row: Any) -> str | None:
    """Why `row` is not a chat row {"messages": [{"role", "content"}, ...]} with an assistant turn; None if it is."""
    if not isinstance(row, dict):
        return f"a row must be a JSON object, got {type(row).__name__}"
    messages = row.get("messages")
    if not isinstance(messages, list) or not messages:
        return "no 'messages' list of chat turns"
    for i, turn in enumerate(messages):
        if not isinstance(turn, dict) or not isinstance(turn.get("content"), str):
            return f"messages[{i}] is not an object with a string 'content'"
        if turn.get("role") not in ROLES:
            return f"messages[{i}] has role {turn.get('role')!r}; expected one of {', '.join(ROLES)}"
    if not any(turn["role"] == "assistant" for turn in messages):
        return "no assistant turn (nothing to train on)"
    return None


def read_general_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a JSONL chat file; the first bad line stops with one error naming it."""
    path = Path(path)
    if not path.is_file():
        raise SampleError(f"sample.mix_path {str(path)!r} does not exist (expected a JSONL file of chat rows)")
    rows = []
    with path.open(encoding="utf-8", errors="strict") as f:
        try:
            lines = list(f)
        except UnicodeDecodeError as err:
            raise SampleError(f"sample.mix_path {str(path)!r} is not UTF-8 text: {err.reason}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise SampleError(f"sample.mix_path {str(path)!r} line {number}: not JSON ({err.msg})") from None
        problem = row_problem(row)
        if problem:
            raise SampleError(f"sample.mix_path {str(path)!r} line {number}: {problem}")
        rows.append(row)
    if not rows:
        raise SampleError(f"sample.mix_path {str(path)!r} holds no rows")
    return rows


def general_count(kept: int, ratio: float) -> int:
    """round(kept * ratio / (1 - ratio)): general rows making up `ratio` of the output."""
    if not 0 <= ratio < 1:
        raise ValueError(f"mix ratio must be in [0, 1), got {ratio}")
    return round(kept * ratio / (1 - ratio))


def plan_mix(general: list[dict[str, Any]], kept: int, ratio: float, seed: int) -> MixPlan:
    """Choose the general rows (seeded; with replacement only when the file has too few)."""
    wanted = general_count(kept, ratio)
    rng = random.Random(f"mix:{seed}")
    with_replacement = wanted > len(general)
    indices = range(len(general))
    chosen = rng.choices(indices, k=wanted) if with_replacement else rng.sample(indices, wanted)
    rows = tuple({"id": str(general[i].get("id", f"general/{i}")), "messages": general[i]["messages"],
                  "source": "general"} for i in chosen)
    return MixPlan(rows=rows, available=len(general), with_replacement=with_replacement)


def shuffled(rows: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The output order: a seeded shuffle, so reasoning and general rows interleave the same way every run."""
    out = list(rows)
    random.Random(f"shuffle:{seed}").shuffle(out)
    return out
