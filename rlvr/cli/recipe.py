"""`rlvr recipe r1 | r1-zero | distill | FILE.yaml [key=value ...]`: the R1 recipe as one resumable pipeline."""
from __future__ import annotations

import argparse
import os
from pathlib import Path


def cmd_recipe(args: argparse.Namespace) -> int:
    from rlvr.checkpoint.resume import hold_run_lock
    from rlvr.pipeline.runner import run_recipe
    from rlvr.pipeline.spec import load_recipe

    recipe = load_recipe(args.recipe, args.overrides)
    # A fixed default directory, so that re-running the very same command continues the run.
    run_dir = Path(args.output_dir) if args.output_dir else Path("runs") / f"recipe-{recipe.name}"
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = hold_run_lock(run_dir)
    try:
        manifest = run_recipe(recipe, run_dir, force=args.force)
    finally:
        os.close(lock)
    return 0 if manifest.finished else 3  # 3: stopped by a signal; the same command continues


def register(sub) -> None:
    recipe = sub.add_parser("recipe", help="run a multi-stage recipe (r1, r1-zero, distill or a YAML file); "
                                           "re-running the same command continues it")
    recipe.add_argument("recipe", help="r1 | r1-zero | distill | path/to/recipe.yaml")
    recipe.add_argument("overrides", nargs="*", help="key=value for every stage, stages.NAME.key=value for one, "
                                                     "evaluation.key=value for the evaluations")
    recipe.add_argument("--output-dir", default=None, help="run directory (default runs/recipe-NAME)")
    recipe.add_argument("--force", action="store_true", help="continue even if a started stage's config changed")
    recipe.set_defaults(func=cmd_recipe)
