"""Where a run's numbers go. metrics.jsonl and samples.jsonl are always written (JsonlSink);
TensorBoard (logging.tensorboard=true) and Weights & Biases (logging.wandb.project=NAME) are optional extras,
imported only when enabled. build_sinks checks their packages when the run starts, before any model loads; the
event files / the W&B run are only opened at the first record, so a run that fails during set-up leaves neither
a W&B run nor a file in its (then released) run directory.
"""
from __future__ import annotations

import html
import json
import math
import netrc
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

from rlvr.errors import UserFacingError

if TYPE_CHECKING:
    from rlvr.config.sections import LoggingConfig, WandbConfig

TABLE_COLUMNS = ("step", "prompt", "completion", "reward", "verdict")
WANDB_ID_FILE = "wandb-run-id"


def wandb_login_found(env: Mapping[str, str] = os.environ) -> bool:
    """An API key where wandb looks for one: WANDB_API_KEY, or the ~/.netrc entry `wandb login` writes."""
    if env.get("WANDB_API_KEY"):
        return True
    host = env.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0].split(":")[0]
    try:
        return netrc.netrc(env.get("NETRC")).authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


class SinkError(UserFacingError, RuntimeError):
    """An enabled sink whose package is missing, phrased for the user (the CLI prints it as one line)."""


class Sink(Protocol):
    name: str

    def scalars(self, step: int, record: Mapping[str, Any]) -> None:
        """One metrics row: a training step's record, or the held-out evaluation's."""

    def completions(self, step: int, rows: Sequence[Mapping[str, Any]]) -> None:
        """A step's sampled completions, as samples.jsonl rows (rlvr.grpo.step_log.sample_rows)."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class CompletionRow:
    """One row of the completions table the TensorBoard and W&B sinks show."""

    step: int
    prompt: str
    completion: str
    reward: float | None
    verdict: str  # "math=correct, format=wrong": each verifier's outcome

    @classmethod
    def from_sample(cls, step: int, row: Mapping[str, Any]) -> "CompletionRow":
        verdicts = row.get("verdicts") or {}
        verdict = ", ".join(f"{name}={v.get('outcome')}" for name, v in verdicts.items())
        return cls(int(row.get("step", step)), str(row.get("question", "")), str(row.get("completion", "")),
                   row.get("reward"), verdict)


def numeric(record: Mapping[str, Any]) -> dict[str, float]:
    """The plottable part of a record: finite numbers (bools as 0/1), the step itself left out."""
    return {key: float(value) for key, value in record.items()
            if key != "step" and isinstance(value, (int, float)) and math.isfinite(value)}


def markdown_table(rows: Sequence[CompletionRow]) -> str:
    """The rows as a markdown table (TensorBoard's text tab renders it). Completions are shown literally: HTML is
    escaped (a <think> tag would otherwise be stripped by TensorBoard's sanitizer), pipes and newlines kept."""
    def cell(value: Any) -> str:
        text = "" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
        return html.escape(text, quote=False).replace("|", "\\|").replace("\n", "<br>")
    lines = ["| " + " | ".join(TABLE_COLUMNS[1:]) + " |", "|" + "---|" * (len(TABLE_COLUMNS) - 1)]
    lines += ["| " + " | ".join(cell(v) for v in (r.prompt, r.completion, r.reward, r.verdict)) + " |" for r in rows]
    return "\n".join(lines)


def append_lines(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """JSON lines appended and the file closed per call, so a crash loses at most the row being written."""
    with path.open("a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


class JsonlSink:
    """metrics.jsonl (one object per row) and samples.jsonl, appended and closed per call so a crash loses at most
    the row being written."""

    name = "jsonl"

    def __init__(self, run_dir: Path):
        self.metrics_path = run_dir / "metrics.jsonl"
        self.samples_path = run_dir / "samples.jsonl"

    def scalars(self, step: int, record: Mapping[str, Any]) -> None:
        append_lines(self.metrics_path, [record])

    def completions(self, step: int, rows: Sequence[Mapping[str, Any]]) -> None:
        append_lines(self.samples_path, rows)

    def close(self) -> None:
        pass


class TensorBoardSink:
    """Event files in RUN/tensorboard: every number of a row as a scalar tagged with its key, the completions as
    a markdown table per step in the text tab (tag "completions")."""

    name = "tensorboard"

    def __init__(self, run_dir: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise SinkError("logging.tensorboard=true needs `pip install tensorboard` "
                            "(or `pip install rlvr[tensorboard]`)") from None
        self._writer_class = SummaryWriter
        self.log_dir = run_dir / "tensorboard"
        self._writer: Any = None

    def _writer_open(self, step: int) -> Any:
        if self._writer is None:
            # purge_step: a resumed run starts again after its checkpoint, whose later steps the earlier process
            # had logged too; TensorBoard drops those old events (as resume cuts metrics.jsonl back)
            self._writer = self._writer_class(log_dir=str(self.log_dir), purge_step=step)
        return self._writer

    def scalars(self, step: int, record: Mapping[str, Any]) -> None:
        writer = self._writer_open(step)
        for tag, value in numeric(record).items():
            writer.add_scalar(tag, value, step)
        writer.flush()  # a TensorBoard watching the run sees each step as it ends, not every 2 minutes

    def completions(self, step: int, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            writer = self._writer_open(step)
            writer.add_text("completions", markdown_table([CompletionRow.from_sample(step, r) for r in rows]), step)
            writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class WandbSink:
    """A W&B run (wandb.init at the first row, with the run config): the numbers of each row logged at its step,
    the completions as a wandb.Table (step, prompt, completion, reward, verdict) under "completions"."""

    name = "wandb"

    def __init__(self, settings: "WandbConfig", run_config: dict[str, Any], run_dir: Path):
        try:
            import wandb
        except ImportError:
            raise SinkError(f"logging.wandb.project={settings.project} needs `pip install wandb` "
                            "(or `pip install rlvr[wandb]`)") from None
        if settings.mode == "online" and not wandb_login_found():
            # checked now: wandb.init would otherwise ask for a key on a terminal after the models load (and
            # wait there), or fail at the first step
            raise SinkError(f"logging.wandb.project={settings.project} (mode online) needs a W&B login: run "
                            "`wandb login` or set WANDB_API_KEY, or use logging.wandb.mode=offline")
        self._wandb, self.settings, self.run_config, self.run_dir = wandb, settings, run_config, run_dir
        self._run: Any = None

    def _started(self) -> Any:
        if self._run is None:
            s = self.settings
            self._run = self._wandb.init(project=s.project, entity=s.entity, name=s.name, config=self.run_config,
                                         dir=str(self.run_dir), mode=s.mode, id=self._run_id(), resume="allow")
        return self._run

    def _run_id(self) -> str:
        """The run's W&B id, kept in RUN/: a resumed run logs into the same W&B run instead of a new one."""
        path = self.run_dir / WANDB_ID_FILE
        if not path.is_file():
            path.write_text(uuid.uuid4().hex[:12] + "\n")
        return path.read_text().strip()

    def scalars(self, step: int, record: Mapping[str, Any]) -> None:
        self._started().log(numeric(record), step=step)

    def completions(self, step: int, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        table = self._wandb.Table(columns=list(TABLE_COLUMNS), data=[
            [r.step, r.prompt, r.completion, r.reward, r.verdict]
            for r in (CompletionRow.from_sample(step, row) for row in rows)])
        self._started().log({"completions": table}, step=step)

    def close(self) -> None:
        if self._run is not None:
            self._run.finish()


def build_sinks(logging: LoggingConfig, recorded_config: Mapping[str, Any], run_dir: Path, writes: bool = True
                ) -> list[Sink]:
    """The optional sinks `logging` enables (JSONL is RunLogger's own). Call it early in set-up: a missing package
    is one SinkError before any model loads. recorded_config: the resolved run config as JSON, which W&B keeps with
    the run (the sinks take their section and this record, not the RunConfig). writes=False (torchrun
    ranks other than 0) checks the packages the same way but returns no sink: rank 0 alone logs."""
    sinks: list[Sink] = []
    if logging.tensorboard:
        sinks.append(TensorBoardSink(run_dir))
    if logging.wandb.project:
        sinks.append(WandbSink(logging.wandb, recorded_config, run_dir))
    return sinks if writes else []
