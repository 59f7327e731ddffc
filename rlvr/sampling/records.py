"""The sampling run's records: which prompts, the per-prompt progress file, the dataset rows.

RUN/progress.jsonl holds one line per finished prompt with all N scored samples (not only the kept ones), so
a resumed run skips finished prompts, and the selection (keep, select, mixing) is applied at the end from
the file: changing those settings on a resume needs no re-sampling.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from rlvr.sampling.select import Candidate, Selection
from rlvr.types import Outcome, Prompt

PROGRESS = "progress.jsonl"
PATIENCE = 20  # draws without a new prompt, per distinct prompt seen, before the split counts as exhausted


@dataclass(frozen=True)
class Drawn:
    """The distinct prompts to sample, in the order the seeded stream first gave them."""

    prompts: tuple[Prompt, ...]
    draws: int  # stream items read
    exhausted: bool  # True when the stream stopped giving new prompts before `wanted`


@dataclass(frozen=True)
class PromptRecord:
    """One finished prompt: its N scored samples."""

    prompt_id: str
    batch: int
    candidates: tuple[Candidate, ...]


def draw_distinct(stream: Iterator[Prompt], wanted: int, patience: int = PATIENCE) -> Drawn:
    """The first `wanted` distinct prompts (by id) of a with-replacement stream. When patience x (distinct so
    far) draws in a row bring nothing new, the split is taken to be smaller: if it held one more prompt, the
    chance of missing it that long is about exp(-patience), i.e. 2e-9 for 20 (coupon collector)."""
    seen: dict[str, Prompt] = {}
    draws = since_new = 0
    while len(seen) < wanted:
        prompt = next(stream)
        draws += 1
        if prompt.id in seen:
            since_new += 1
            if since_new >= patience * len(seen):
                return Drawn(tuple(seen.values()), draws, exhausted=True)
            continue
        seen[prompt.id], since_new = prompt, 0
    return Drawn(tuple(seen.values()), draws, exhausted=False)


def batch_seed(seed: int, batch: int) -> int:
    """The torch seed of generation batch `batch`: a resumed run samples batch b exactly as an uninterrupted
    one, whatever ran before it in this process."""
    digest = hashlib.sha256(f"rlvr-sample:{seed}:{batch}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # torch.manual_seed takes a non-negative int64


def candidate_json(candidate: Candidate) -> dict[str, Any]:
    return {"text": candidate.text, "length": candidate.length, "reward": round(candidate.reward, 6),
            "scorable": candidate.scorable, "ended": candidate.ended,
            "verdicts": {k: v.value for k, v in candidate.verdicts.items()}}


def candidate_from_json(index: int, data: dict[str, Any]) -> Candidate:
    return Candidate(index=index, text=data["text"], length=int(data["length"]), reward=float(data["reward"]),
                     verdicts={k: Outcome(v) for k, v in data["verdicts"].items()}, scorable=bool(data["scorable"]),
                     ended=bool(data.get("ended", True)))  # older progress files have no key


def append_progress(run_dir: Path, records: Iterable[PromptRecord]) -> None:
    """One line per prompt, flushed and fsynced together once the batch is finished."""
    lines = "".join(json.dumps({"id": r.prompt_id, "batch": r.batch,
                                "candidates": [candidate_json(c) for c in r.candidates]}) + "\n" for r in records)
    with (run_dir / PROGRESS).open("a", encoding="utf-8") as f:
        f.write(lines)
        f.flush()
        os.fsync(f.fileno())


def load_progress(run_dir: Path) -> dict[str, PromptRecord]:
    """Finished prompts by id. A line torn by a kill mid-write is dropped and the file rewritten without it
    (atomically), so the next append starts on a clean line; its batch is sampled again, identically."""
    path = run_dir / PROGRESS
    if not path.is_file():
        return {}
    done: dict[str, PromptRecord] = {}
    good: list[str] = []
    raw = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    for line in raw:
        try:
            data = json.loads(line)
            record = PromptRecord(data["id"], int(data["batch"]), tuple(
                candidate_from_json(i, c) for i, c in enumerate(data["candidates"])))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        done[record.prompt_id] = record
        good.append(line if line.endswith("\n") else line + "\n")
    if good != raw:
        staging = path.with_name(f".{PROGRESS}.{os.getpid()}")
        staging.write_text("".join(good), encoding="utf-8")
        os.replace(staging, path)
    return done


def dataset_rows(prompt: Prompt, record: PromptRecord, selection: Selection, model: str,
                 step: int | None) -> list[dict[str, Any]]:
    """The SFT rows of one prompt: its chat turns plus the kept completion, with where it came from."""
    return [{"id": f"{prompt.id}#{c.index}",
             "messages": [*map(dict, prompt.messages), {"role": "assistant", "content": c.text}],
             "source": "rejection_sampling",
             "provenance": {"model": model, "step": step, "sampled": len(record.candidates),
                            "correct": selection.correct, "reward": round(c.reward, 6), "length": c.length,
                            "verdicts": {k: v.value for k, v in c.verdicts.items()}}}
            for c in selection.kept]


def model_step(name_or_path: str) -> int | None:
    """The training step of a model directory written by an rlvr run: a checkpoint's model/ (its manifest)
    or a run's final/ (the last step in the run's metrics.jsonl); None for anything else."""
    path = Path(name_or_path)
    manifest = path.parent / "manifest.json"
    if path.name == "model" and manifest.is_file():
        try:
            return int(json.loads(manifest.read_text(encoding="utf-8"))["step"])
        except (ValueError, KeyError, TypeError):
            return None
    metrics = path.parent / "metrics.jsonl"
    if path.name != "final" or not metrics.is_file():
        return None
    steps = []
    for line in metrics.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            steps.append(int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):
            continue
    return max(steps, default=None)


def write_atomic(path: Path, text: str) -> None:
    """Write a file whole or not at all (temp file in the same folder, then os.replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with staging.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(staging, path)
