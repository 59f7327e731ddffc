"""`rlvr train [CONFIG.yaml] [dotted.key=value ...] [--resume RUN_DIR]`: GRPO (the loop: rlvr/grpo/loop.py).
Imports stay inside the command so that `rlvr --help` loads no torch."""
from __future__ import annotations

import argparse

from rlvr.cli.args import run_config


def cmd_train(args: argparse.Namespace) -> int:
    config = run_config(args)
    from rlvr.grpo.loop import train

    if config.ray.trainer_ranks > 1:  # this process drives N Ray trainer-rank actors, each of
        from rlvr.cluster.trainers import drive_trainer_ranks, drives_ranks  # which runs train(config)

        if drives_ranks(config.ray.trainer_ranks):
            return drive_trainer_ranks(config, train)
    train(config)
    return 0


def register(sub) -> None:
    train = sub.add_parser("train", help="train with GRPO (no arguments: embedded model, default task, CPU)")
    train.add_argument("config", nargs="?", help="YAML config file (optional)")
    train.add_argument("overrides", nargs="*",
                       help="dotted.key=value overrides, e.g. max_steps=10 rollout.group_size=4")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue RUN_DIR from its newest complete checkpoint")
    train.set_defaults(func=cmd_train)
