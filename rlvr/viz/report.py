"""`rlvr report RUN_DIR [RUN_DIR ...]`: one self-contained HTML file (data, script and style inlined)."""
from __future__ import annotations

import os
from pathlib import Path

from rlvr.viz.jsonl import RunDataError
from rlvr.viz.page import GENERATOR, data_json, page_title, payload, render_page
from rlvr.viz.rundata import RunData, load_run

REPORT_NAME = "report.html"


def report_path(run_dirs: list[Path], output: Path | None) -> Path:
    """--output, or RUN_DIR/report.html for one run; several runs need --output (no run owns the comparison)."""
    if output is not None:
        return output
    if len(run_dirs) > 1:
        raise RunDataError(f"{len(run_dirs)} runs overlaid in one report: choose where it goes with --output FILE")
    return run_dirs[0] / REPORT_NAME


def recipe_parts(path: Path) -> tuple[str, list[Path]] | None:
    """A recipe directory (`rlvr recipe`: manifest.json, stages/NN-name/): (its summary.md, the stage directories
    that hold a run's logs, in stage order); None for anything else (a plain run directory)."""
    if not (path / "manifest.json").is_file():
        return None
    summary = path / "summary.md"
    text = summary.read_text(encoding="utf-8", errors="replace") if summary.is_file() else "(no evaluation yet)"
    stages = sorted(d for d in (path / "stages").glob("*") if (d / "metrics.jsonl").is_file())
    if not stages:
        raise RunDataError(f"{path}: a recipe directory whose stages have not logged a step yet (no "
                           "stages/*/metrics.jsonl)")
    return text, stages


def explained_run(runs: list[RunData], recipes: list) -> RunData | None:
    """The run the explainer draws from: the first run's, but for a recipe its last stage that logged a group view
    (its RL stage: an SFT stage logs no groups), else its last stage."""
    if not runs or not recipes[0]:
        return None
    stages = runs[:len(recipes[0][1])]
    return next((run for run in reversed(stages) if run.groups), stages[-1])


def written_by_us(path: Path) -> bool:
    """A file `rlvr report` wrote (its generator tag near the top): safe to replace with a newer report."""
    try:
        with path.open("rb") as f:
            return GENERATOR.encode() in f.read(1024)
    except OSError:
        return False


def write_report(run_dirs: list[Path], output: Path | None = None, force: bool = False) -> Path:
    """Read the runs, then write the page atomically (a reader never sees half a file). Returns its path.

    An existing file is replaced only if an earlier `rlvr report` wrote it, or with force."""
    recipes = [recipe_parts(Path(path)) for path in run_dirs]
    stage_dirs = [stage for path, parts in zip(run_dirs, recipes) for stage in (parts[1] if parts else [path])]
    runs = [load_run(Path(path), groups="phases") for path in stage_dirs]  # a bad run is named first
    target = report_path(run_dirs, output)
    if target.is_dir():
        raise RunDataError(f"--output {target}: is a directory; give a file name such as {target / REPORT_NAME}")
    if not target.parent.is_dir():
        raise RunDataError(f"{target}: the directory {target.parent} does not exist")
    if target.exists() and not force and not written_by_us(target):
        raise RunDataError(f"{target} exists and is not a report written by rlvr; choose another --output or "
                           "pass --force to replace it")
    summaries = [(Path(path).resolve().name, parts[0]) for path, parts in zip(run_dirs, recipes) if parts]
    html = render_page(data_json(payload(runs, live=False, recipes=summaries, explained=explained_run(runs, recipes))),
                       page_title(runs))
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        partial.write_text(html, encoding="utf-8")
        os.replace(partial, target)
    except OSError as err:  # a read-only run directory, a full disk
        raise RunDataError(f"cannot write {target}: {err.strerror or err}; choose another --output") from None
    finally:
        partial.unlink(missing_ok=True)
    return target
