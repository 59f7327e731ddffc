"""RUN/manifest.json: every stage's status, resolved config, outputs and evaluation.

It is the pipeline's only state: a re-run reads it to skip finished stages and continue the current one.
Written atomically (temporary file, fsync, rename) after every change, so an interruption at any instant
leaves either the previous or the next version, never a torn file.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
PENDING, RUNNING, INTERRUPTED, DONE = "pending", "running", "interrupted", "done"


@dataclass
class StageRecord:
    name: str
    kind: str
    directory: str  # RUN/stages/NN-name
    config: dict[str, Any]  # the resolved RunConfig the stage runs with (model path and data filled in)
    status: str = PENDING
    model: str | None = None  # sft/grpo: RUN/stages/NN-name/final when done
    data: str | None = None  # sample: the SFT dataset written
    result: dict[str, Any] = field(default_factory=dict)  # the stage's own report (sample statistics)
    eval: dict[str, Any] | None = None  # evaluation of the stage's model (model stages)
    seconds: float = 0.0  # wall time spent in the stage, summed over interrupted attempts
    eval_seconds: float = 0.0  # wall time of its evaluation
    attempts: int = 0
    # set label -> {"first": {measure: change}, "before": ..., "after": ...}: falls re-checked (pipeline/recheck.py)
    recheck: dict[str, Any] = field(default_factory=dict)
    recheck_seconds: float = 0.0  # wall time of the rechecks (counted with the evaluations)


@dataclass
class Manifest:
    recipe: str
    base_model: str
    stages: list[StageRecord]
    base_eval: dict[str, Any] | None = None
    base_eval_seconds: float = 0.0
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S"))
    finished: str | None = None

    def stage(self, name: str) -> StageRecord:
        return next(s for s in self.stages if s.name == name)

    def save(self, run_dir: Path) -> None:
        path = run_dir / MANIFEST
        staging = path.with_name(f".{MANIFEST}.{os.getpid()}")
        with staging.open("w", encoding="utf-8") as f:
            json.dump(asdict(self), f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(staging, path)


def load_manifest(run_dir: Path) -> Manifest | None:
    path = run_dir / MANIFEST
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    data["stages"] = [StageRecord(**s) for s in data["stages"]]
    return Manifest(**data)
