"""`rlvr control [CONFIG.yaml] [dotted.key=value ...]`: the run with its real reward and its two
control runs, reward.control=random and =format_only (rlvr/rewards/control.py), from the same base model with the
same seed, each in its own directory under one parent; then the base model and the three final models evaluated on
the same held-out problems, and one table of held-out pass@1 with each run's paired difference from the base.

A gain that the random or the format-only reward also buys is not the answer signal's doing (Shao et al. 2025,
"Spurious Rewards: Rethinking Training Signals in RLVR"). The three runs are a recipe of three GRPO stages that
all start from the base model (rlvr/pipeline/runner.py): re-running the same command continues an interrupted one,
and the evaluations are the recipe's (one evaluation config for every model).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rlvr.config.run import ConfigError, RunConfig, validate_config

RUNS = (("real", "none"), ("random", "random"), ("format_only", "format_only"))  # stage name, reward.control
PER_PROBLEM = "per_problem_pass@1"  # = rlvr.pipeline.set_tables.PER_PROBLEM (the evaluation's per-problem rates)


def with_control(config: RunConfig, control: str) -> RunConfig:
    data = config.model_dump(mode="json")
    data["reward"]["control"] = control
    return validate_config(data)


def control_recipe(config: RunConfig):
    """The three runs as a recipe: GRPO stages from the base model, evaluated with the run's own config."""
    from rlvr.pipeline.spec import Recipe, StageSpec

    if config.reward.control != "none":
        raise ConfigError(f"rlvr control runs the real reward and both controls itself; leave reward.control unset "
                          f"(got {config.reward.control!r})")
    stages = [StageSpec(name, "grpo", "base", None, with_control(config, control)) for name, control in RUNS]
    return Recipe("control", "the real reward and its random and format-only controls", config.model.name_or_path,
                  config, stages)


def control_table(manifest) -> str:
    """Held-out pass@1 of the base and the three runs, each run's difference from the base paired over problems
    with its standard error (rlvr.evaluation.voting.paired_difference, as the recipe summaries), and the real run's
    difference from each control."""
    from rlvr.evaluation.voting import paired_difference
    from rlvr.pipeline.set_tables import format_number, markdown

    base = manifest.base_eval or {}
    evals = {s.name: s.eval or {} for s in manifest.stages}

    def paired(after: dict[str, Any], before: dict[str, Any]) -> tuple[str, str]:
        a, b = after.get(PER_PROBLEM), before.get(PER_PROBLEM)
        if not a or not b or len(a) != len(b) or len(a) < 2:
            return "", ""
        mean, standard_error = paired_difference(a, b)
        return f"{mean:+.3f}", f"{standard_error:.3f}"

    rows = [["base", format_number(base.get("pass@1")), "", ""]]
    rows += [[name, format_number(evals[name].get("pass@1")), *paired(evals[name], base)] for name, _ in RUNS]
    problems, samples = base.get("problems", "?"), base.get("samples_per_problem", "?")
    title = (f"control runs: held-out pass@1 ({problems} problems, {samples} samples each); vs base = the mean "
             "difference from the base model paired over problems, with its standard error")
    lines = [markdown(title, ["model", "pass@1", "vs base", "paired SE"], rows)]
    for control in ("random", "format_only"):
        mean, standard_error = paired(evals["real"], evals[control])
        if mean:
            lines.append(f"real vs {control}: {mean} (paired SE {standard_error})")
    return "\n".join(lines)


def cmd_control(args: argparse.Namespace) -> int:
    from rlvr.checkpoint.resume import hold_run_lock
    from rlvr.cli.args import config_from_args, refuse_trainer_ranks
    from rlvr.pipeline import checks
    from rlvr.pipeline.runner import plan, run_recipe

    config = refuse_trainer_ranks("control", config_from_args(args.config, args.overrides))
    recipe = control_recipe(config)
    stem = Path(args.config).stem if args.config and Path(args.config).is_file() else "default"
    # A fixed default directory, as `rlvr recipe`'s: re-running the very same command continues the runs
    run_dir = Path(args.output_dir or config.output_dir or Path("runs") / f"control-{stem}")
    # run_recipe checks again; here first, so that a refused config leaves no directory (and lock file) behind
    checks.before_any_stage(recipe, plan(recipe, run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = hold_run_lock(run_dir)
    try:
        manifest = run_recipe(recipe, run_dir, force=args.force, say=lambda text: _say(text, run_dir))
    finally:
        os.close(lock)
    if not manifest.finished:
        return 3  # stopped by a signal; the same command continues
    table = control_table(manifest)
    (run_dir / "summary.md").write_text(table + "\n", encoding="utf-8")  # replaces the recipe's stage-by-stage table
    print(table, flush=True)
    return 0


def _say(text: str, run_dir: Path) -> None:
    """The recipe's progress lines; not its closing table, which compares each run with the one before (the
    control table below compares each with the base)."""
    summary = run_dir / "summary.md"
    if summary.is_file() and text.strip() == summary.read_text(encoding="utf-8").strip():
        return
    print(text, flush=True)


def register(sub) -> None:
    p = sub.add_parser("control", help="the real run and its random and format-only reward controls, then one table "
                                       "of held-out pass@1 against the base model")
    p.add_argument("config", nargs="?", help="YAML config file (optional), as for train")
    p.add_argument("overrides", nargs="*", help="dotted.key=value overrides for all three runs and the evaluations")
    p.add_argument("--output-dir", default=None, help="parent directory of the runs (default output_dir, else "
                                                      "runs/control-CONFIG)")
    p.add_argument("--force", action="store_true", help="continue even if a started run's config changed")
    p.set_defaults(func=cmd_control)
