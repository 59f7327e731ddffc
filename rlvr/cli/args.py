"""What the commands share about their command line: the one user-facing error of a bad one, and the config a
command reads from `[CONFIG.yaml] [dotted.key=value ...] [--resume RUN_DIR]`. Apart from main.py, which imports
every command module, so that a command imports this and not the module that imports it."""
from __future__ import annotations

import argparse
from pathlib import Path

from rlvr.config.run import RunConfig, load_config
from rlvr.errors import UserFacingError


class UsageError(UserFacingError):
    """A problem with the command line or its inputs, phrased for the user."""


def run_config(args: argparse.Namespace) -> RunConfig:
    """`[CONFIG.yaml] [overrides] [--resume RUN_DIR]` of a training command (train, sft)."""
    if args.resume:  # the run's own config, then the user's overrides (max_steps=80 to go on further)
        saved = Path(args.resume) / "config.yaml"
        if not saved.is_file():
            raise UsageError(f"--resume {args.resume!r}: not an rlvr run directory (no config.yaml)")
        extra = [a for a in (args.config, *args.overrides) if a]
        if any(not is_override(a) for a in extra):
            raise UsageError("--resume takes the run's own config.yaml; give only dotted.key=value overrides")
        return load_config(saved, [*extra, f"checkpoint.resume={args.resume}", f"output_dir={args.resume}"])
    return config_from_args(args.config, args.overrides)


def config_from_args(first: str | None, overrides: list[str]) -> RunConfig:
    """`[CONFIG.yaml] [dotted.key=value ...]`, the same for every command that takes a config."""
    config_file = first if first and not is_override(first) else None
    return load_config(config_file, ([first] if first and config_file is None else []) + overrides)


def is_override(arg: str) -> bool:
    return "=" in arg and not Path(arg).is_file()


def refuse_trainer_ranks(command: str, config: RunConfig) -> RunConfig:
    """ray.trainer_ranks=N starts N trainer ranks for `rlvr train` only; another command would ignore it silently."""
    if config.ray.trainer_ranks > 1:
        raise UsageError(f"ray.trainer_ranks={config.ray.trainer_ranks}: only `rlvr train` runs trainer ranks; "
                         f"`rlvr {command}` runs in one process (leave ray.trainer_ranks=1)")
    return config
