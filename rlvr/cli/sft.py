"""`rlvr sft [CONFIG.yaml] [dotted.key=value ...] [--resume RUN_DIR]`.

Imports stay inside the command function so that `rlvr --help` loads no torch.
"""
from __future__ import annotations

import argparse

from rlvr.cli.args import refuse_trainer_ranks, run_config


def cmd_sft(args: argparse.Namespace) -> int:
    config = refuse_trainer_ranks("sft", run_config(args))  # the same config and --resume rules as `rlvr train`
    from rlvr.sft.trainer import sft

    sft(config)
    return 0


def register(sub) -> None:
    p = sub.add_parser("sft", help="supervised fine-tuning on chat data (loss on assistant tokens only)",
                       description="Supervised fine-tuning: sft.data is a .jsonl/.json/.parquet file, a saved "
                                   "dataset directory, a hub id, or 'cold_start' (worked solutions for task.name). "
                                   "Rows hold a messages column or prompt/completion columns.")
    p.add_argument("config", nargs="?", help="YAML config file (optional)")
    p.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. sft.data=chats.jsonl sft.epochs=1")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue RUN_DIR from its newest complete checkpoint")
    p.set_defaults(func=cmd_sft)
