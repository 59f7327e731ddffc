"""The table printed at the end of a recipe: pass@1, maj@k and mean length of the base and after every stage."""
from __future__ import annotations

from typing import Any

from rlvr.pipeline.manifest import Manifest


def _largest_maj(evals: list[dict[str, Any]]) -> str | None:
    ks = [int(key.split("@")[1]) for e in evals for key in e if key.startswith("maj@")]
    return f"maj@{max(ks)}" if ks else None


def summary_table(manifest: Manifest) -> str:
    evaluated = [("base", "model", manifest.base_eval, 0.0)] + [
        (s.name, s.kind, s.eval, s.seconds) for s in manifest.stages if s.eval is not None]
    maj = _largest_maj([e for _, _, e, _ in evaluated if e])
    header = ["stage", "kind", "pass@1", *([maj] if maj else []), "mean length", "seconds"]
    rows = []
    for name, kind, result, seconds in evaluated:
        result = result or {}
        cells = [name, kind, _num(result.get("pass@1"))]
        if maj:
            cells.append(_num(result.get(maj)))
        cells += [_num(result.get("mean_length"), ".1f"), f"{seconds:.0f}" if seconds else ""]
        rows.append(cells)
    for s in manifest.stages:
        if s.kind == "sample" and s.result:
            kept, prompts = s.result.get("rows_kept"), s.result.get("prompts_done")
            rows.append([s.name, "sample", f"kept {kept} rows from {prompts} prompts", *([""] if maj else []), "",
                         f"{s.seconds:.0f}"])
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([f"recipe {manifest.recipe}: held-out evaluation after each stage", line(header),
                      "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def _num(value: Any, spec: str = ".3f") -> str:
    return "" if value is None else format(value, spec)
