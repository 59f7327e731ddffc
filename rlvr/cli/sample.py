"""`rlvr sample [CONFIG.yaml] [dotted.key=value ...]`: rejection sampling, or distillation with sample.student.
Imports stay inside the command so `rlvr --help` loads no torch."""
from __future__ import annotations

import argparse

from rlvr.cli.args import config_from_args, refuse_trainer_ranks


def cmd_sample(args: argparse.Namespace) -> int:
    from rlvr.sampling.run import rejection_sample

    result = rejection_sample(refuse_trainer_ranks("sample", config_from_args(args.config, args.overrides)))
    print(f"rlvr sample: {result.line()}", flush=True)
    return 0


def register(sub) -> None:
    parser = sub.add_parser(
        "sample", help="rejection sampling: N samples per train prompt, keep the best k verified ones as an SFT "
                       "dataset (with sample.student=PATH: distillation from model.name_or_path)")
    parser.add_argument("config", nargs="?", help="YAML config file (optional)")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. sample.samples=8 "
                                                     "sample.keep=1 sample.select=shortest sample.prompts=256")
    parser.set_defaults(func=cmd_sample)
