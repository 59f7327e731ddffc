"""Exact resume on the embedded model: per config, one uninterrupted run, and one stopped by SIGTERM
mid-run and resumed; prints whether the final weights are bit-identical (torch.equal on every tensor), the metrics
the same (all but wall clock, memory and the reward service's per-process counters) and the prompts, completions and
group view the same, plus the checkpoint's size and the wall time.

Two configs (the small one said bit-identical while the default run did not):
  small    2 prompts x G 4, micro-batch 8, threads=2 (the figure docs/runs.md quotes)
  default  the default config as `rlvr train` runs it (4 x G 8, 2 micro-batches of 16, 2 reward workers, dynamic
           sampling, group view, all cores), seed 3 as in the issue, stopped after step 2 of 3

    .venv/bin/python bench/resume_exact.py [--configs small default] [--out /tmp/rlvr-resume-bench]
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file


@dataclass(frozen=True)
class Variant:
    overrides: tuple[str, ...]  # on top of output_dir, max_steps and eval.at_end=false
    steps: int
    stop_after: int  # SIGTERM once this many steps are logged, then --resume


VARIANTS = {
    "small": Variant(("rollout.prompts_per_step=2", "rollout.group_size=4", "rollout.max_new_tokens=32",
                      "optimizer.micro_batch_size=8", "samples_per_step=8", "threads=2"), steps=4, stop_after=1),
    # the command, nothing else changed; a SIGTERM while step 2 runs: step 2 is finished and saved
    "default": Variant(("seed=3",), steps=3, stop_after=1),
}
# Metrics that measure the machine or one process rather than the run: the wall clock, memory, and the reward
# service's counters, which a resumed process starts again from 0.
MEASURED = ("elapsed_s", "tokens_per_s", "peak_memory_gb")
PER_PROCESS = ("time/", "reward_service/")


def command(out: Path, variant: Variant) -> list[str]:
    return [sys.executable, "-m", "rlvr.cli.main", "train", f"output_dir={out}", f"max_steps={variant.steps}",
            "eval.at_end=false", *variant.overrides]


def run(args: list[str], stop_after: int | None = None, metrics: Path | None = None) -> float:
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if stop_after is not None:
        while proc.poll() is None and not (metrics.is_file() and len(metrics.read_text().splitlines()) >= stop_after):
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(args)}\n{out[-2000:]}")
    return time.monotonic() - start


def rows(run_dir: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (run_dir / name).read_text().splitlines()]


def trace(run_dir: Path) -> list[tuple]:
    return [(r["step"], r["prompt_id"], r["completion"]) for r in rows(run_dir, "samples.jsonl")]


def run_metrics(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in MEASURED and not k.startswith(PER_PROCESS)}
            for row in rows(run_dir, "metrics.jsonl")]


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def compare(name: str, variant: Variant, root: Path) -> bool:
    """Runs one variant uninterrupted and stopped + resumed; prints the comparison; True when all is identical."""
    straight, stopped = root / name / "straight", root / name / "stopped"
    t_straight = run(command(straight, variant))
    t_first = run(command(stopped, variant), variant.stop_after, stopped / "metrics.jsonl")
    t_resume = run([sys.executable, "-m", "rlvr.cli.main", "train", "--resume", str(stopped)])
    a, b = load_file(straight / "final/model.safetensors"), load_file(stopped / "final/model.safetensors")
    identical = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    same_metrics = run_metrics(straight) == run_metrics(stopped)
    same_trace = trace(straight) == trace(stopped) and rows(straight, "groups.jsonl") == rows(stopped, "groups.jsonl")
    checkpoint = sorted((stopped / "checkpoints").glob("step-*"))[0]  # the stop's: older than the final one
    size = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
    resumed = int(checkpoint.name.removeprefix("step-")) < variant.steps  # a stop in the last step just finishes
    print(f"[{name}] embedded model, {variant.steps} steps, SIGTERM once {variant.stop_after} step(s) logged, "
          f"stopped at {checkpoint.name}, then --resume; overrides: {' '.join(variant.overrides)}")
    if not resumed:
        print(f"[{name}] the SIGTERM came during the last step: nothing was resumed")
    difference = "" if identical or a.keys() != b.keys() else f" (largest difference {largest_difference(a, b):.3g})"
    print(f"[{name}] final weights bit-identical: {identical} ({len(a)} tensors){difference}")
    print(f"[{name}] metrics identical (wall clock, memory, per-process counters left out): {same_metrics}")
    print(f"[{name}] prompts, completions and group view identical: {same_trace}")
    print(f"[{name}] wall: uninterrupted {t_straight:.0f} s; stopped run {t_first:.0f} s + resumed {t_resume:.0f} s")
    print(f"[{name}] checkpoint {checkpoint.name}: {size / 2**30:.2f} GiB (weights, AdamW moments, RNG, cursor)")
    return resumed and identical and same_metrics and same_trace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", nargs="+", default=list(VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    parser.add_argument("--out", default="/tmp/rlvr-resume-bench")
    args = parser.parse_args()
    unknown = [c for c in args.configs if c not in VARIANTS]
    if unknown:
        parser.error(f"unknown config(s) {unknown}; choose from {list(VARIANTS)}")
    root = Path(args.out)
    shutil.rmtree(root, ignore_errors=True)
    results = {name: compare(name, VARIANTS[name], root) for name in args.configs}
    print("all identical" if all(results.values()) else f"NOT identical: {[n for n, ok in results.items() if not ok]}")
    sys.exit(0 if all(results.values()) else 1)


if __name__ == "__main__":
    main()
