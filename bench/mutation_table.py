"""The per-file table of one or more `bench/mutate_change.py --report` files, as markdown (docs/results.md).

    .venv/bin/python bench/mutation_table.py .mutants/systems-and-agents.json .mutants/final_fix.json

A file's rows come from the last report that has it: a later run over files changed since the first (with
`--resume`, so the unchanged ones keep their verdicts) replaces their rows. The rate is the tool's own:
(survived + no tests) / (killed + survived + no tests); equivalent mutants are not counted.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = ("killed", "SURVIVED", "TIMEOUT", "NO TESTS", "equivalent", "pending")


def rows_by_file(reports: list[Path]) -> dict[str, list[dict]]:
    """file -> its mutants, from the last report that lists the file."""
    by_file: dict[str, list[dict]] = {}
    for report in reports:
        mutants = json.loads(report.read_text())["mutants"]
        for path in {m["path"] for m in mutants}:
            by_file[path] = [m for m in mutants if m["path"] == path]
    return by_file


def table(by_file: dict[str, list[dict]]) -> str:
    lines = ["| file | mutants | killed | survived | timeout | no tests | equivalent | not run | survival |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    totals = dict.fromkeys(COLUMNS, 0)
    for path in sorted(by_file):
        counts = {c: sum(m["status"] == c for m in by_file[path]) for c in COLUMNS}
        for c in COLUMNS:
            totals[c] += counts[c]
        lines.append(_row(f"`{path}`", counts))
    lines.append(_row("**all**", totals))
    return "\n".join(lines)


def _row(name: str, counts: dict[str, int]) -> str:
    lost = counts["SURVIVED"] + counts["NO TESTS"]
    decided = lost + counts["killed"]
    rate = f"{100 * lost / decided:.1f} %" if decided else "-"
    return (f"| {name} | {sum(counts.values())} | {counts['killed']} | {counts['SURVIVED']} | {counts['TIMEOUT']} | "
            f"{counts['NO TESTS']} | {counts['equivalent']} | {counts['pending']} | {rate} |")


if __name__ == "__main__":
    print(table(rows_by_file([Path(p) for p in sys.argv[1:]])))
