"""SFT step time by micro-batch layout (sft.batching), same rows, same model, one process, alternating layouts.

The rows are the r1 recipe's cold start: levels 1-3, symbols and stories, each prompt carrying the
system turn and the one-shot example. `padding_free` is the layout TRL's SFTTrainer offers as its fastest
(`padding_free=True`); `shared_prefix` runs the rows' common prompt opening once (rlvr/sft/batching.py). Prints
seconds per row for each layout, its ratio to length_grouped and to padding_free, and the loss of each layout's
first step (equal within float rounding: same rows, same weights).

    .venv/bin/python bench/sft_layouts.py [--rows 64] [--micro 16] [--rounds 3] [--threads 2]
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from rlvr.config.run import RunConfig
from rlvr.model.load import load_model, load_tokenizer
from rlvr.sft.step import StepSettings, sft_step
from rlvr.sft.trainer import load_examples

LAYOUTS = ("length_grouped", "padding_free", "shared_prefix")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=64, help="rows per timed step")
    parser.add_argument("--micro", type=int, default=16, help="rows per micro-batch")
    parser.add_argument("--rounds", type=int, default=3, help="timed steps per layout (after one warm-up each)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="comma list; length_grouped is always timed "
                        "(the ratios' base); padding_free's [T, T] mask outgrows memory at large --micro")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = RunConfig.model_validate({"task": {"name": "arithmetic", "level": 3, "train_levels": [1, 2, 3],
                                                "phrasing": "mixed"},
                                       "sft": {"data": "cold_start", "cold_start_size": args.rows}})
    tokenizer = load_tokenizer(config.model)
    examples = load_examples(config, tokenizer, 1024)
    model = load_model(config.model, trainable=True)
    # SGD at lr 0: every step does the whole forward, backward and update work on unchanged weights, so each
    # layout's loss can be compared on the same weights.
    policy = copy.deepcopy(model)
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)
    layouts = list(dict.fromkeys(["length_grouped", *args.layouts.split(",")]))
    times: dict[str, list[float]] = {name: [] for name in layouts}
    first: dict[str, float] = {}
    for round_ in range(args.rounds + 1):
        for name in layouts:  # alternating, so that a noisy minute on this shared machine hits every layout
            settings = StepSettings(args.micro, name, 1.0, tokenizer.pad_token_id)
            start = time.perf_counter()
            stats = sft_step(policy, examples, optimizer, None, settings)
            elapsed = time.perf_counter() - start
            if round_ == 0:
                first[name] = stats.loss
            else:
                times[name].append(elapsed)
    rows = len(examples)
    print(f"{rows} cold-start rows (levels 1-3, mixed phrasing), micro-batches of {args.micro}, "
          f"{args.threads} threads, median of {args.rounds} steps per layout after one warm-up")
    print("| layout | s/row | vs length_grouped | vs padding_free | first-step loss |")
    print("|---|---|---|---|---|")
    median = {name: statistics.median(t) / rows for name, t in times.items()}
    for name in layouts:
        versus_free = f"{median[name] / median['padding_free']:.2f}" if "padding_free" in median else "-"
        print(f"| {name} | {median[name]:.3f} | {median[name] / median['length_grouped']:.2f} | {versus_free} | "
              f"{first[name]:.5f} |")


if __name__ == "__main__":
    main()
