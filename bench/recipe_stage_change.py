"""A recipe stage's change in pass@1 and greedy accuracy over a chosen group of evaluation sets, paired over problems
("each RL stage's change over the sets it trains on"). The recipe's summary gives the change over all sets
and per set; this pools the sets a stage trains on, from the per-problem results RUN/manifest.json keeps.

    python bench/recipe_stage_change.py RUN BEFORE_STAGE AFTER_STAGE [--skip words_new]

The change is the mean of the per-problem differences (after - before), +- 2 standard errors of that mean.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def paired_change(after: list[float], before: list[float]) -> tuple[float, float]:
    """(mean difference, 2 SE) of paired per-problem scores."""
    diffs = [a - b for a, b in zip(after, before, strict=True)]
    mean = sum(diffs) / len(diffs)
    spread = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else 0.0
    return mean, 2 * spread / math.sqrt(len(diffs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("before", help="stage name, or 'base'")
    parser.add_argument("after", help="stage name")
    parser.add_argument("--skip", action="append", default=[], help="leave out sets whose label holds this text")
    args = parser.parse_args()
    manifest = json.loads((args.run / "manifest.json").read_text())
    evals = {s["name"]: s["eval"] for s in manifest["stages"] if s.get("eval")} | {"base": manifest["base_eval"]}
    before, after = (evals[name]["breakdown"]["set"] for name in (args.before, args.after))
    sets = [label for label in after if not any(text in label for text in args.skip)]
    for measure in ("pass@1", "greedy"):
        key = f"per_problem_{measure}"
        mean, band = paired_change([x for s in sets for x in after[s][key]], [x for s in sets for x in before[s][key]])
        print(f"{args.after} - {args.before}, {measure}, {sum(len(after[s][key]) for s in sets)} problems: "
              f"{mean:+.3f} +- {band:.3f}")
    print("sets: " + "; ".join(sets))


if __name__ == "__main__":
    main()
