"""The GPU check (issue #23, item 5): one prepared run that fits one device call of <= 8 minutes and prints one table.

    python bench/gpu_check.py [--out DIR] [--only decode_fp32,default,...] [--steps 3]

Each check is a child process with its own time limit (a hang or crash costs that check, not the rest), its
output kept in DIR/<check>.log. The checks, on the first CUDA device:
- decode: bench/decode_step.py, ms per decode step at 64 rows eager vs CUDA graphs vs graphs over the
  inductor-compiled layer (rollout.compile_decode), fp32 and bf16 (mixed), and variants of the static step (its
  attention as batched products; fp32 matmuls on TF32; bf16 with cuDNN's attention);
- default: `rlvr train model.device=cuda`, the default config with its final evaluation (30 steps);
- bf16: the default config in bf16 mixed precision, 10 steps, no evaluation;
- lora / sft: a LoRA run (3 steps) and an SFT run (one epoch of 32 rows);
- vs_trl_fp32 / vs_trl_bf16: bench/vs_trl.py at 8 prompts x G 8, <= 128 new tokens, both orders (rounds 2).
Extras (--only): compiled / compiled_bf16, the default config for 10 steps with rollout.compile_decode=true in fp32 /
bf16; bf16_cudnn, the bf16 check with model.cudnn_attention=true (cuDNN's attention, off by default since the
2026-11-27 runs); vs_trl_fp32_sdpa, rlvr's side of vs_trl_fp32 with rollout.decode_attention=sdpa.
README's "On a GPU" has the figures of a run.
Nothing here is a unit test: CI has no GPU. The numbers go to README's "On a GPU" section with the card's name.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RLVR = [sys.executable, "-m", "rlvr"]
CUDA = "model.device=cuda"


def sft_data(work: Path) -> Path:
    path = work / "sft.jsonl"
    rows = [{"prompt": f"What is {a} times {b}? End with 'Answer: <number>'.",
             "completion": f"{a} times {b} is {a * b}.\nAnswer: {a * b}"} for a in range(2, 10) for b in range(2, 6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def checks(work: Path, steps: int) -> dict[str, tuple[list[str], int]]:
    """name -> (command, seconds allowed)."""
    trl = [sys.executable, str(ROOT / "bench/vs_trl.py"), "--device", "cuda", "--prompts-per-step", "8",
           "--max-new", "128", "--steps", str(steps), "--rounds", "2", "--allocator", "system"]
    decode = [sys.executable, str(ROOT / "bench/decode_step.py"), "--device", "cuda", "--profile", "--paths"]
    # in the order of what is least known (a device call cut short keeps the lines printed so far)
    return {
        # fp32: what would take the step under 2 ms (the attention over the capacity, the matmuls without TF32)
        "decode_fp32": (decode + ["graph,compiled,graph_matmul,compiled_matmul,compiled_tf32,compiled_matmul_tf32",
                                  "--json", str(work / "decode_fp32.json")], 200),
        "decode_bf16": (decode + ["graph,graph_cudnn,graph_matmul,compiled,compiled_matmul", "--dtype", "bfloat16",
                                  "--json", str(work / "decode_bf16.json")], 150),
        "default": (RLVR + ["train", CUDA, f"output_dir={work / 'default'}"], 150),
        "bf16": (RLVR + ["train", CUDA, "model.dtype=bfloat16", "max_steps=10", "eval.at_end=false",
                         f"output_dir={work / 'bf16'}"], 60),
        # 4 steps x 2 rounds took 144 s in fp32 on an H100 and bf16 ran past 150 s: 3 steps, a little more room
        "vs_trl_bf16": (trl + ["--dtype", "bfloat16", "--json", str(work / "vs_trl_bf16.json")], 170),
        "lora": (RLVR + ["train", CUDA, "model.lora.enabled=true", "max_steps=3", "eval.at_end=false",
                         f"output_dir={work / 'lora'}"], 60),
        "sft": (RLVR + ["sft", CUDA, f"sft.data={sft_data(work)}", "sft.epochs=1", "sft.batch_size=8",
                        f"output_dir={work / 'sft'}"], 60),
        "vs_trl_fp32": (trl + ["--json", str(work / "vs_trl_fp32.json")], 170),
        # extras, run by --only (the list above took 519 s with "compiled" in it, 2026-11-27: over 8 minutes)
        "compiled": (RLVR + ["train", CUDA, "rollout.compile_decode=true", "max_steps=10", "eval.at_end=false",
                             f"output_dir={work / 'compiled'}"], 90),
        "compiled_bf16": (RLVR + ["train", CUDA, "model.dtype=bfloat16", "rollout.compile_decode=true", "max_steps=10",
                                  "eval.at_end=false", f"output_dir={work / 'compiled_bf16'}"], 90),
        "bf16_cudnn": (RLVR + ["train", CUDA, "model.dtype=bfloat16", "model.cudnn_attention=true", "max_steps=10",
                               "eval.at_end=false", f"output_dir={work / 'bf16_cudnn'}"], 60),
        # rlvr's side of vs_trl_fp32 with SDPA in the decode step (fp32's auto is matmul; compare with vs_trl_fp32)
        "vs_trl_fp32_sdpa": (trl + ["--only", "rlvr", "--rlvr-set", "rollout.decode_attention=sdpa", "--json",
                                    str(work / "vs_trl_fp32_sdpa.json")], 90),
    }


EXTRAS = ("compiled", "compiled_bf16", "bf16_cudnn", "vs_trl_fp32_sdpa")


def select(every: dict, only: str | None) -> dict:
    """The checks --only names, in the order named (a device call cut short keeps the first ones; an unknown name
    stops here), else every check but the extras."""
    if not only:
        return {k: v for k, v in every.items() if k not in EXTRAS}
    names = only.split(",")
    unknown = sorted(set(names) - set(every))
    if unknown:
        raise SystemExit(f"gpu_check: --only names no check {unknown}; the checks are {list(every)}")
    return {k: every[k] for k in dict.fromkeys(names)}


def run_one(name: str, command: list[str], limit: int, out: Path, work: Path) -> dict:
    """Run one check; print its line at once (a device call cut short still shows the checks that finished)."""
    start = time.perf_counter()
    log = out / f"{name}.log"
    with log.open("w") as sink:
        try:
            code = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, timeout=limit, cwd=ROOT).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    took = time.perf_counter() - start
    if (work / name / "metrics.jsonl").exists():  # every phase's seconds come back with the logs
        (out / f"{name}.metrics.jsonl").write_bytes((work / name / "metrics.jsonl").read_bytes())
    if (work / f"{name}.json").exists():  # the bench's raw figures (vs_trl's per step, decode's profiles)
        (out / f"{name}.json").write_bytes((work / f"{name}.json").read_bytes())
    if code == 0:
        try:
            measured = summarize(name, work)
        except (OSError, KeyError, ValueError, TypeError, StopIteration) as err:
            measured = f"(unreadable: {err!r})"
    else:
        measured = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
    print(f"[{name}] exit {code} in {took:.0f} s: {measured}", flush=True)
    return {"name": name, "exit": code, "seconds": round(took, 1), "measured": measured}


def step_seconds(run_dir: Path) -> tuple[float, int] | None:
    """Median seconds a step (the sum of its phases) after the first, and the step count, from metrics.jsonl."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    times = [sum(v for k, v in r.items() if k.startswith("time/")) for r in rows]
    times = [t for t in times if t > 0]  # evaluation rows carry no phase times
    return (statistics.median(times[1:] or times), len(times)) if times else None


def decode_line(d: dict) -> str:
    """bench/decode_step.py's JSON -> one line: ms a step and seconds a generation of each path, and how many rows
    each path sampled token for token as the eager path did."""
    paths = d.get("paths") or [p for p in ("eager", "graph", "compiled") if f"{p}_ms_per_step" in d]
    joint = " -> " if len(paths) <= 3 else ", "  # a chain reads well for three paths, a list for more
    steps = joint.join(f"{d[f'{p}_ms_per_step']:.2f} {p}" for p in paths)
    samples = joint.join(f"{d[f'{p}_sample_s']:.2f}" for p in paths)
    same = ", ".join(f"{p} {d[f'{p}_rows_identical']}" for p in paths[1:])
    first = f"; compiled's first generation {d['compiled_first_sample_s']:.1f} s" if "compiled" in paths else ""
    return (f"{d['dtype']}: ms a step at {d['rows']} rows {steps}; sampling 128 tokens {samples} s; rows "
            f"identical to eager: {same}{first}")


def comparison_line(data: dict) -> str:
    """bench/vs_trl.py's JSON (both sides, or rlvr's alone) -> s/step after each run's warm-up step, tokens/s,
    peak GPU memory, and the ratio when both sides ran."""
    sides = {}
    for side, runs in data.items():
        steps = [s for r in runs for s in r["steps"][1:]]
        sides[side] = (statistics.median(s["s"] for s in steps), statistics.median(s["tokens"] / s["s"] for s in steps),
                       max(r["peak_rss"] for r in runs) / 1e9)
    mine, mine_tps, mine_gb = sides["rlvr"]
    line = f"rlvr {mine:.2f} s/step ({mine_tps:.0f} tok/s, {mine_gb:.2f} GB)"
    if "trl" not in sides:
        return line
    theirs, theirs_tps, theirs_gb = sides["trl"]
    return f"{line} vs TRL {theirs:.2f} ({theirs_tps:.0f} tok/s, {theirs_gb:.2f} GB): ratio {mine / theirs:.2f}"


def summarize(name: str, work: Path) -> str:
    """One line of what a finished check measured."""
    if name.startswith("decode"):
        return decode_line(json.loads((work / f"{name}.json").read_text()))
    if name.startswith("vs_trl"):
        return comparison_line(json.loads((work / f"{name}.json").read_text()))
    found = step_seconds(work / name)
    text = f"{found[0]:.2f} s/step over {found[1]} steps" if found else "no metrics"
    evals = work / name / "eval.jsonl"
    if evals.exists():
        last = json.loads(evals.read_text().splitlines()[-1])
        text += f"; held-out pass@1 {last['pass@1']:.3f}, greedy {last.get('greedy', float('nan')):.3f}"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", tempfile.mkdtemp(prefix="gpu-check-"))))
    parser.add_argument("--only", help="comma-separated check names (the extras run only when named)")
    parser.add_argument("--steps", type=int, default=3, help="vs_trl steps per side and round (the first is warm-up)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-work-"))
    chosen = select(checks(work, args.steps), args.only)
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: torch sees no CUDA device here")
    print(f"gpu_check on {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    results = []
    for name, (command, limit) in chosen.items():
        results.append(run_one(name, command, limit, args.out, work))
        (args.out / "gpu_check.json").write_text(json.dumps(results, indent=1))  # kept if the call is cut short
    print(f"\n{'check':<13}{'exit':>8}{'s':>6}  measured")
    for r in results:
        print(f"{r['name']:<13}{str(r['exit']):>8}{r['seconds']:>6.0f}  {r['measured']}")


if __name__ == "__main__":
    main()
