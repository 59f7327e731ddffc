"""`rlvr train | eval | verify`. Each command turns every expected failure into one line on stderr, exit 2."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from rlvr.config.run import RunConfig, load_config
from rlvr.distributed.exit import exit_rank, is_torchrun_rank
from rlvr.errors import UserFacingError


class UsageError(UserFacingError):
    """A problem with the command line or its inputs, phrased for the user."""


# Modules with `register(subparsers)`; their commands raise UserFacingError (rlvr/errors.py) for input
# problems, which main() prints as one line (exit 2). Imports inside them stay lazy: `--help` loads no torch.
EXTRA_COMMANDS = ("rlvr.cli.sft", "rlvr.cli.sample", "rlvr.cli.generate", "rlvr.cli.recipe",
                  "rlvr.cli.report", "rlvr.cli.control", "rlvr.cli.config")


def run_config(args: argparse.Namespace) -> RunConfig:
    """`[CONFIG.yaml] [overrides] [--resume RUN_DIR]` of a training command (train, sft)."""
    if args.resume:  # the run's own config, then the user's overrides (max_steps=80 to go on further)
        saved = Path(args.resume) / "config.yaml"
        if not saved.is_file():
            raise UsageError(f"--resume {args.resume!r}: not an rlvr run directory (no config.yaml)")
        extra = [a for a in (args.config, *args.overrides) if a]
        if any(not _is_override(a) for a in extra):
            raise UsageError("--resume takes the run's own config.yaml; give only dotted.key=value overrides")
        return load_config(saved, [*extra, f"checkpoint.resume={args.resume}", f"output_dir={args.resume}"])
    return _config_from_args(args.config, args.overrides)


def cmd_train(args: argparse.Namespace) -> int:
    config = run_config(args)
    from rlvr.grpo.loop import train

    if config.ray.trainer_ranks > 1:  # issue #11, item 5: this process drives N Ray trainer-rank actors, each of
        from rlvr.cluster.trainers import drive_trainer_ranks, drives_ranks  # which runs train(config)

        if drives_ranks(config.ray.trainer_ranks):
            return drive_trainer_ranks(config, train)
    train(config)
    return 0


def _config_from_args(first: str | None, overrides: list[str]) -> RunConfig:
    """`[CONFIG.yaml] [dotted.key=value ...]`, the same for every command that takes a config."""
    config_file = first if first and not _is_override(first) else None
    return load_config(config_file, ([first] if first and config_file is None else []) + overrides)


def _is_override(arg: str) -> bool:
    return "=" in arg and not Path(arg).is_file()


def cmd_verify(args: argparse.Namespace) -> int:
    from rlvr.cli.verify import verify_file

    # The same config and overrides as `rlvr train` (issue #8), so rewards are debugged exactly as training
    # computes them: `rlvr verify task.code_reward_mode=all task.code_time_limit_s=2 --verifier code ...`.
    extra = [f"task.answer_mode={args.answer_mode}"] if args.answer_mode else []
    config = _config_from_args(args.config, args.overrides + extra)
    return verify_file(args.verifier, Path(args.input), config.task, Path(args.output) if args.output else None,
                       config.episode)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description="GRPO on verifiable rewards")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train with GRPO (no arguments: embedded model, default task, CPU)")
    train.add_argument("config", nargs="?", help="YAML config file (optional)")
    train.add_argument("overrides", nargs="*",
                       help="dotted.key=value overrides, e.g. max_steps=10 rollout.group_size=4")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue RUN_DIR from its newest complete checkpoint")
    train.set_defaults(func=cmd_train)
    from rlvr.cli.eval import register_eval  # torch-free; `eval` lives with `generate` (issue #10)

    register_eval(sub)
    ve = sub.add_parser("verify", help="score a JSONL file of completions with one verifier")
    ve.add_argument("config", nargs="?", help="YAML config file (optional; its task section is used)")
    ve.add_argument("overrides", nargs="*", help="dotted.key=value overrides, as for train, e.g. "
                                                  "task.code_reward_mode=all task.code_time_limit_s=2")
    ve.add_argument("--verifier", required=True, help="verifier name, e.g. math, format, answer_format; "
                                                       "environment: a multi-turn run's recorded final states")
    ve.add_argument("--input", required=True, help="JSONL with 'completion' and 'reference' (or 'answer') fields, "
                                                    "e.g. a run's samples.jsonl (re-checked against its verdicts)")
    ve.add_argument("--answer-mode", default=None, help="shorthand for task.answer_mode=...")
    ve.add_argument("--output", default=None, help="write verdict lines here instead of stdout")
    ve.set_defaults(func=cmd_verify)
    for module in EXTRA_COMMANDS:  # each subsystem owns its command (issue #10): sft, sample, generate, recipe
        importlib.import_module(module).register(sub)
    from rlvr.cli.config import point_to_config  # after every command: their --help names `rlvr config`

    point_to_config(sub)
    return parser


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse a command line; key=value overrides may also follow the flags (`rlvr eval RUN --size 100 k=v`).

    argparse binds a positional list once, so overrides after a flag come back unrecognised (and
    parse_intermixed_args does not support sub-commands); they are appended to the command's overrides in order.
    """
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    stray = [a for a in extras if "=" in a and not a.startswith("-")]
    unknown = [a for a in extras if a not in stray] if hasattr(args, "overrides") else extras
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if stray:
        args.overrides = [*(args.overrides or []), *stray]
    return args


def refuse_extra_ranks(command: str, env=os.environ) -> None:
    """Only `train` knows torchrun's ranks (issue #11); any other command started on N ranks would run N copies
    racing on one output directory, so it stops at once instead. WORLD_SIZE is read here, not through
    rlvr.distributed.context.from_env, which imports torch (this module stays torch-free)."""
    world = env.get("WORLD_SIZE", "1")
    if command != "train" and world.strip() not in ("", "1"):
        raise UsageError(f"`rlvr {command}` runs in one process (WORLD_SIZE={world} here); start it without "
                         "torchrun — only `rlvr train` runs on several ranks")


def refuse_trainer_ranks(command: str, config: RunConfig) -> RunConfig:
    """ray.trainer_ranks=N starts N trainer ranks for `rlvr train` only; another command would ignore it silently."""
    if config.ray.trainer_ranks > 1:
        raise UsageError(f"ray.trainer_ranks={config.ray.trainer_ranks}: only `rlvr train` runs trainer ranks; "
                         f"`rlvr {command}` runs in one process (leave ray.trainer_ranks=1)")
    return config


def main(argv: list[str] | None = None) -> int:
    own_process = argv is None  # the `rlvr` command itself, not a call from Python
    if own_process:  # restart once with tcmalloc if found
        from rlvr.cli.allocator import restart_with_tcmalloc

        restart_with_tcmalloc(sys.argv[1:])
    args = parse(argv)
    try:
        refuse_extra_ranks(args.command)
        code = args.func(args)
    except UserFacingError as err:  # config, data, model, checkpoint, engine...: one line; anything else is a bug
        print(f"rlvr: error: {err}", file=sys.stderr)
        code = 2
    if own_process and is_torchrun_rank():  # no interpreter teardown: rlvr/distributed/exit.py says why
        exit_rank(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
