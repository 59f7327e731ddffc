"""The `rlvr` command: one of COMMANDS, each of which turns every expected failure into one line on stderr, exit 2."""
from __future__ import annotations

import argparse
import os
import sys

from rlvr.cli import config as config_command
from rlvr.cli import control, generate, recipe, report, sample, sft, train, verify
from rlvr.cli import eval as eval_command
from rlvr.cli.args import UsageError
from rlvr.distributed.exit import exit_rank, is_torchrun_rank
from rlvr.errors import UserFacingError

# Each command's module, with `register(subparsers)`: a new command is a module here (imported
# statically, so the import contracts and the cycle test see it). Their commands raise UserFacingError
# (rlvr/errors.py) for input problems, which main() prints as one line (exit 2). Imports inside them stay lazy:
# `--help` loads no torch. What several commands share (the config from the command line) is in args.py.
COMMANDS = (train, eval_command, verify, sft, sample, generate, recipe, report, control, config_command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description="GRPO on verifiable rewards")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:  # each subsystem owns its command, in the order --help lists them
        command.register(sub)
    config_command.point_to_config(sub)  # after every command: their --help names `rlvr config`
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
    """Only `train` knows torchrun's ranks; any other command started on N ranks would run N copies
    racing on one output directory, so it stops at once instead. WORLD_SIZE is read here, not through
    rlvr.distributed.context.from_env, which imports torch (this module stays torch-free)."""
    world = env.get("WORLD_SIZE", "1")
    if command != "train" and world.strip() not in ("", "1"):
        raise UsageError(f"`rlvr {command}` runs in one process (WORLD_SIZE={world} here); start it without "
                         "torchrun — only `rlvr train` runs on several ranks")


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
    except BrokenPipeError:  # `rlvr config | head`: the reader has what it wanted; no traceback at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    if own_process and is_torchrun_rank():  # no interpreter teardown: rlvr/distributed/exit.py says why
        exit_rank(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
