"""Exact resume on the embedded model (issue #9): one uninterrupted run, and one stopped by SIGTERM mid-run and
resumed; prints whether the final weights are bit-identical (torch.equal on every tensor) and the prompts and
completions the same, plus the checkpoint's size and save time.

    .venv/bin/python bench/resume_exact.py [--steps 4] [--stop-after 1] [--out /tmp/resume-bench]
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file


def command(out: Path, steps: int) -> list[str]:
    return [sys.executable, "-m", "rlvr.cli", "train", f"output_dir={out}", f"max_steps={steps}",
            "rollout.prompts_per_step=2", "rollout.group_size=4", "rollout.max_new_tokens=32",
            "optimizer.micro_batch_size=8", "eval.at_end=false", "samples_per_step=8", "threads=2"]


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


def trace(run_dir: Path) -> list[tuple]:
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return [(r["step"], r["prompt_id"], r["completion"]) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--stop-after", type=int, default=1, help="SIGTERM once this many steps are logged")
    parser.add_argument("--out", default="/tmp/rlvr-resume-bench")
    args = parser.parse_args()
    root = Path(args.out)
    shutil.rmtree(root, ignore_errors=True)
    straight, stopped = root / "straight", root / "stopped"
    t_straight = run(command(straight, args.steps))
    t_first = run(command(stopped, args.steps), args.stop_after, stopped / "metrics.jsonl")
    t_resume = run([sys.executable, "-m", "rlvr.cli", "train", "--resume", str(stopped)])
    a, b = load_file(straight / "final/model.safetensors"), load_file(stopped / "final/model.safetensors")
    identical = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    checkpoint = sorted((stopped / "checkpoints").glob("step-*"))[0]
    size = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
    print(f"embedded model, {args.steps} steps, SIGTERM after step {args.stop_after} then --resume")
    print(f"final weights bit-identical: {identical} ({len(a)} tensors)")
    print(f"prompts and completions identical: {trace(straight) == trace(stopped)}")
    print(f"wall: uninterrupted {t_straight:.0f} s; stopped run {t_first:.0f} s + resumed run {t_resume:.0f} s")
    print(f"checkpoint {checkpoint.name}: {size / 2**30:.2f} GiB (weights, AdamW moments, RNG, cursor)")


if __name__ == "__main__":
    main()
