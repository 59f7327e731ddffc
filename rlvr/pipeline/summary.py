"""The table printed at the end of a recipe: pass@1, maj@k, mean length and the share of completions that end their
turn of the base and after every stage."""
from __future__ import annotations

from typing import Any

from rlvr.pipeline.manifest import Manifest
from rlvr.pipeline.recheck import recheck_table
from rlvr.pipeline.set_tables import ended_share, paired_change, set_tables
from rlvr.pipeline.set_tables import format_number as _num


def _largest_maj(evals: list[dict[str, Any]]) -> str | None:
    ks = [int(key.split("@")[1]) for e in evals for key in e if key.startswith("maj@")]
    return f"maj@{max(ks)}" if ks else None


def summary_table(manifest: Manifest) -> str:
    """One row for the base model and one per stage, in stage order; a sample stage shows what it kept."""
    evals = [manifest.base_eval or {}] + [s.eval for s in manifest.stages if s.eval]
    maj = _largest_maj(evals)
    # ended: the share of completions that end their turn within the token budget (set_tables.ended_share)
    header = ["stage", "kind", "pass@1", "change (± 2 SE)", *([maj] if maj else []), "mean length", "ended",
              "seconds"]
    previous = manifest.base_eval or {}
    rows = [_row("base", "model", previous, "", maj, "")]
    for s in manifest.stages:
        seconds = f"{s.seconds:.0f}" if s.seconds else ""
        if s.kind == "sample":
            kept = f"kept {s.result.get('rows_kept', '?')} rows of {s.result.get('prompts_done', '?')} prompts"
            rows.append([s.name, s.kind, kept, "", *([""] if maj else []), "", "", seconds])
        else:
            rows.append(_row(s.name, s.kind, s.eval or {}, paired_change(s.eval or {}, previous), maj, seconds))
            previous = s.eval or {}
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    stages = sum(s.seconds for s in manifest.stages)
    rechecks = sum(s.recheck_seconds for s in manifest.stages)
    evaluations = manifest.base_eval_seconds + sum(s.eval_seconds for s in manifest.stages) + rechecks
    of_which = f" (re-checks of falls {rechecks / 60:.1f})" if rechecks else ""
    return "\n\n".join(["\n".join([
        f"recipe {manifest.recipe}: held-out evaluation after each stage (change: pass@1 against the model before, "
        f"paired over problems)", line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
        *map(line, rows), f"time: stages {stages / 60:.1f} min + evaluations {evaluations / 60:.1f} min{of_which} "
        f"= {(stages + evaluations) / 60:.1f} min"]), *set_tables(manifest), *recheck_table(manifest.stages)])


def _row(name: str, kind: str, result: dict[str, Any], change: str, maj: str | None, seconds: str) -> list[str]:
    return [name, kind, _num(result.get("pass@1")), change, *([_num(result.get(maj))] if maj else []),
            _num(result.get("mean_length"), ".1f"), _num(ended_share(result)), seconds]
