"""`rlvr train | eval | verify`. Each command turns every expected failure into one line on stderr, exit 2."""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from rlvr.config import ConfigError, RunConfig, load_config, validate_config


class UsageError(Exception):
    """A problem with the command line or its inputs, phrased for the user."""

    user_facing = True


# Modules with `register(subparsers)`; their commands raise exceptions with `user_facing = True` for input
# problems, which main() prints as one line (exit 2). Imports inside them stay lazy: `--help` loads no torch.
EXTRA_COMMANDS = ("rlvr.sft.command", "rlvr.sampling.command", "rlvr.inference.command", "rlvr.pipeline.command")


def cmd_train(args: argparse.Namespace) -> int:
    if args.resume:  # the run's own config, then the user's overrides (max_steps=80 to go on further)
        saved = Path(args.resume) / "config.yaml"
        if not saved.is_file():
            raise UsageError(f"--resume {args.resume!r}: not an rlvr run directory (no config.yaml)")
        extra = [a for a in (args.config, *args.overrides) if a]
        if any(not _is_override(a) for a in extra):
            raise UsageError("--resume takes the run's own config.yaml; give only dotted.key=value overrides")
        config = load_config(saved, [*extra, f"checkpoint.resume={args.resume}", f"output_dir={args.resume}"])
    else:
        config = _config_from_args(args.config, args.overrides)
    from rlvr.recipes.grpo import train

    train(config)
    return 0


def _config_from_args(first: str | None, overrides: list[str]) -> RunConfig:
    """`[CONFIG.yaml] [dotted.key=value ...]`, the same for every command that takes a config."""
    config_file = first if first and not _is_override(first) else None
    return load_config(config_file, ([first] if first and config_file is None else []) + overrides)


def _is_override(arg: str) -> bool:
    return "=" in arg and not Path(arg).is_file()


def _eval_target(target: str, task_name: str | None) -> tuple[str, RunConfig]:
    """A run directory (uses its config and final/ checkpoint) or a model (dir, hub id, 'embedded')."""
    path = Path(target)
    if (path / "config.yaml").is_file():
        config = load_config(path / "config.yaml")
        model = path / "final"
        if not (model / "config.json").is_file():
            raise UsageError(f"run {target!r} has no final checkpoint at {model} (did training finish?)")
        model_path = str(model)
    else:
        config, model_path = RunConfig(), target
    if task_name:
        config.task.name = task_name
    config.model.name_or_path = model_path
    return model_path, config


def cmd_eval(args: argparse.Namespace) -> int:
    model_path, config = _eval_target(args.model, args.task)
    overrides = {k: v for k, v in {"samples": args.n, "size": args.size, "temperature": args.temperature}.items()
                 if v is not None}
    config = validate_config({**config.model_dump(), "eval": {**config.eval.model_dump(), **overrides}})
    if not 1 <= args.k <= config.eval.samples:
        raise UsageError(f"--k {args.k}: pass@k needs 1 <= k <= n (--n {config.eval.samples})")
    output = Path(args.output) if args.output else (
        Path(args.model) / "eval.json" if (Path(args.model) / "config.yaml").is_file() else Path("eval.json"))
    if not output.parent.is_dir() or output.is_dir():
        raise UsageError(f"--output {str(output)!r}: not a writable file path (its folder must exist)")
    from rlvr.evaluate import evaluate
    from rlvr.models import load_model, load_tokenizer
    from rlvr.rewards import Rewarder
    from rlvr.rollout.hf import HFRolloutEngine
    from rlvr.tasks import build_task

    task, rewarder = build_task(config.task), Rewarder.from_task(config.task)
    model, tokenizer = load_model(config.model, trainable=False), load_tokenizer(config.model)
    prompts = task.eval_prompts(config.eval.size)
    ks = tuple(sorted({1, args.k}))
    result = evaluate(HFRolloutEngine(model, tokenizer), rewarder, prompts, config.eval,
                      config.rollout.max_new_tokens, ks=ks)
    data = {"model": model_path, "task": config.task.name, **result.as_json()}
    text = json.dumps(data, indent=2)
    print(text)
    output.write_text(text + "\n")
    print(f"wrote {output}", file=sys.stderr)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from rlvr.verify_file import verify_file

    # The same config and overrides as `rlvr train` (issue #8), so rewards are debugged exactly as training
    # computes them: `rlvr verify task.code_reward_mode=all task.code_time_limit_s=2 --verifier code ...`.
    extra = [f"task.answer_mode={args.answer_mode}"] if args.answer_mode else []
    config = _config_from_args(args.config, args.overrides + extra)
    return verify_file(args.verifier, Path(args.input), config.task, Path(args.output) if args.output else None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description="GRPO on verifiable rewards")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train with GRPO (no arguments: embedded model, default task, CPU)")
    train.add_argument("config", nargs="?", help="YAML config file (optional)")
    train.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. max_steps=10 rollout.group_size=4")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue RUN_DIR from its newest complete checkpoint")
    train.set_defaults(func=cmd_train)
    ev = sub.add_parser("eval", help="pass@1 (n samples, T 0.6) and greedy accuracy on a task's held-out split")
    ev.add_argument("model", help="run directory, model directory, hub id, or 'embedded'")
    ev.add_argument("--task", default=None, help="task name (default: the run's task, else arithmetic)")
    ev.add_argument("--n", type=int, default=None, help="samples per problem (default 4)")
    ev.add_argument("--k", type=int, default=1, help="also report unbiased pass@k (k <= n)")
    ev.add_argument("--size", type=int, default=None, help="held-out problems (default 200)")
    ev.add_argument("--temperature", type=float, default=None, help="sampling temperature (default 0.6)")
    ev.add_argument("--output", default=None, help="JSON output path (default RUN/eval.json or ./eval.json)")
    ev.set_defaults(func=cmd_eval)
    ve = sub.add_parser("verify", help="score a JSONL file of completions with one verifier")
    ve.add_argument("config", nargs="?", help="YAML config file (optional; its task section is used)")
    ve.add_argument("overrides", nargs="*", help="dotted.key=value overrides, as for train, e.g. "
                                                  "task.code_reward_mode=all task.code_time_limit_s=2")
    ve.add_argument("--verifier", required=True, help="verifier name, e.g. math, format, answer_format")
    ve.add_argument("--input", required=True, help="JSONL with 'completion' and 'reference' (or 'answer') fields")
    ve.add_argument("--answer-mode", default=None, help="shorthand for task.answer_mode=...")
    ve.add_argument("--output", default=None, help="write verdict lines here instead of stdout")
    ve.set_defaults(func=cmd_verify)
    for module in EXTRA_COMMANDS:  # each subsystem owns its command (issue #10): sft, sample, generate, recipe
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, UsageError) as err:
        print(f"rlvr: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:
        if getattr(err, "user_facing", False):
            print(f"rlvr: error: {err}", file=sys.stderr)
            return 2  # known user-facing errors from other modules
        from rlvr.verify_file import VerifyInputError  # torch-free; checked before rlvr.models imports torch

        if isinstance(err, VerifyInputError):
            print(f"rlvr: error: {err}", file=sys.stderr)
            return 2
        from rlvr.models import ModelError

        if isinstance(err, ModelError) or type(err).__name__ in {"DatasetError", "TrainingDiverged",
                                                                    "MicroBatchOutOfMemory", "CheckpointError"}:
            print(f"rlvr: error: {err}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
