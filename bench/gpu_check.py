"""The GPU check: one prepared run that fits one device call of <= 8 minutes and prints one table.

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
docs/gpu.md ("Measured") has the figures of a run.
Nothing here is a unit test: CI has no GPU. The numbers go to docs/gpu.md ("Measured") with the card's name.
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


def shape_checks(work: Path, steps: int, tokenizer: str) -> dict[str, tuple[list[str], int]]:
    """The shapes users train (random weights, rlvr/model/architectures.py) in bf16 mixed precision,
    8 prompts x G 8, <= 256 new tokens; the ceilings first, so that each figure has its bound from the same card."""
    trl = [sys.executable, str(ROOT / "bench/vs_trl.py"), "--device", "cuda", "--prompts-per-step", "8",
           "--max-new", "256", "--steps", str(steps), "--rounds", "1", "--allocator", "system", "--model", tokenizer]
    decode = [sys.executable, str(ROOT / "bench/decode_step.py"), "--device", "cuda", "--paths", "graph",
              "--model", tokenizer]
    made = {"ceilings": ([sys.executable, str(ROOT / "bench/ceilings.py"), "--json", str(work / "ceilings.json")], 40)}
    # limits: 2026-11-29 on an H200 these took 4, 102, 16, 109, 21 and 44 s; together under one call's 600 s
    for size, limit, decode_limit in (("0.5b", 140, 60), ("1.5b", 180, 70)):
        arch = ["--arch", f"qwen2.5-{size}"]
        made[f"vs_trl_{size}"] = (trl + arch + ["--dtype", "bfloat16", "--json", str(work / f"vs_trl_{size}.json")],
                                  limit)
        made[f"decode_{size}"] = (decode + arch + ["--dtype", "bfloat16", "--json", str(work / f"decode_{size}.json")],
                                  decode_limit)
    # fp32 at 0.5B, rlvr's side alone: does bf16 win at this size (item 3)?
    made["vs_trl_0.5b_fp32"] = (trl + ["--arch", "qwen2.5-0.5b", "--only", "rlvr", "--json",
                                       str(work / "vs_trl_0.5b_fp32.json")], 100)
    # the next GPU run's first look (group "next"): where the 0.5B step's time and memory go, and rlvr at its own
    # default micro-batch of 16 rows (vs_trl's work trains all 64 rows in one, as TRL's batch does)
    mb16 = ["--rlvr-set", "optimizer.micro_batch_size=16"]
    # 64 new tokens: at 256 both profiles ran past their limits in the profiler's own work (H200, 2026-11-29); at 64
    # the call took 56 s (bench/data/profile_0.5b_h200_2026-11-29.json)
    profile = [sys.executable, str(ROOT / "bench/profile_step.py"), "--arch", "qwen2.5-0.5b", "--model", tokenizer,
               "--max-new", "64"]
    made["profile_0.5b"] = (profile + ["--json", str(work / "profile_0.5b.json")], 100)
    made["vs_trl_0.5b_mb16"] = (trl + ["--arch", "qwen2.5-0.5b", "--dtype", "bfloat16", *mb16, "--json",
                                       str(work / "vs_trl_0.5b_mb16.json")], 150)
    made["profile_0.5b_mb16"] = (profile + ["--set", "optimizer.micro_batch_size=16", "--json",
                                            str(work / "profile_0.5b_mb16.json")], 90)
    return made


def checks(work: Path, steps: int, tokenizer: str = "embedded:SmolLM2-135M-Instruct"
           ) -> dict[str, tuple[list[str], int]]:
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
        # the sampler-trainer mismatch (correction/mismatch_kl) of the bf16 check, with an fp32 head
        "bf16_head32": (RLVR + ["train", CUDA, "model.dtype=bfloat16", "model.lm_head_fp32=true", "max_steps=10",
                                "eval.at_end=false", f"output_dir={work / 'bf16_head32'}"], 60),
        **shape_checks(work, steps, tokenizer),
    }


EXTRAS = ("compiled", "compiled_bf16", "bf16_cudnn", "vs_trl_fp32_sdpa", "bf16_head32", "ceilings", "vs_trl_0.5b",
          "decode_0.5b", "vs_trl_1.5b", "decode_1.5b", "vs_trl_0.5b_fp32", "profile_0.5b", "vs_trl_0.5b_mb16",
          "profile_0.5b_mb16")
# --only may name a group: its checks, in the order they run (the most wanted first: a cut call keeps them)
GROUPS = {"shapes": ("ceilings", "vs_trl_0.5b", "decode_0.5b", "vs_trl_1.5b", "decode_1.5b", "vs_trl_0.5b_fp32"),
          "embedded": ("default", "bf16", "bf16_head32"),
          "next": ("profile_0.5b", "vs_trl_0.5b_mb16", "profile_0.5b_mb16")}


def select(every: dict, only: str | None) -> dict:
    """The checks --only names, in the order named (a device call cut short keeps the first ones; an unknown name
    stops here), else every check but the extras."""
    if not only:
        return {k: v for k, v in every.items() if k not in EXTRAS}
    names = [name for given in only.split(",") for name in GROUPS.get(given, (given,))]
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


def profile_line(d: dict) -> str:
    """bench/profile_step.py's JSON -> each phase's median seconds (GPU synchronised) and peak GB, and the kernels."""
    phases = ", ".join(f"{name} {p['median_s']:.2f} s ({max(p['peak_gb']):.1f} GB)"
                       for name, p in d["phases"].items() if p["median_s"] is not None)
    profile = d.get("profile") or {}
    kernels = f"{profile.get('kernels', '?')} kernels, {profile.get('kernel_ms', 0):.0f} ms of them"
    return f"{phases}; profiled step: {kernels}"


def mismatch_kl(run_dir: Path) -> float | None:
    """The median over a run's steps of correction/mismatch_kl (the engine agreement check)."""
    path = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    values = [r["correction/mismatch_kl"] for r in rows if "correction/mismatch_kl" in r]
    return statistics.median(values) if values else None


def decode_line(d: dict) -> str:
    """bench/decode_step.py's JSON -> one line: ms a step and seconds a generation of each path, and how many rows
    each path sampled token for token as the eager path did."""
    paths = d.get("paths") or [p for p in ("eager", "graph", "compiled") if f"{p}_ms_per_step" in d]
    joint = " -> " if len(paths) <= 3 else ", "  # a chain reads well for three paths, a list for more
    steps = joint.join(f"{d[f'{p}_ms_per_step']:.2f} {p}" for p in paths)
    samples = joint.join(f"{d[f'{p}_sample_s']:.2f}" for p in paths)
    same = ", ".join(f"{p} {d[f'{p}_rows_identical']}" for p in paths[1:])
    first = f"; compiled's first generation {d['compiled_first_sample_s']:.1f} s" if "compiled" in paths else ""
    bound = ""
    if "hbm_bound_ms" in d:  # the fastest path against weights + KV bytes at the measured bandwidth
        fastest = min(paths, key=lambda p: d[f"{p}_ms_per_step"])
        bound = (f"; HBM bound {d['hbm_bound_ms']:.2f} ms ({d['weight_bytes'] / 1e9:.2f} GB weights + "
                 f"{d['kv_bytes'] / 1e9:.2f} GB KV at {d['bandwidth_tb_s']:.2f} TB/s): {fastest} "
                 f"{d[f'{fastest}_ms_per_step'] / d['hbm_bound_ms']:.2f}x the bound")
    return (f"{d['dtype']}: ms a step at {d['rows']} rows {steps}; sampling 128 tokens {samples} s; rows "
            f"identical to eager: {same}{first}{bound}")


def update_rate(data: dict, ceilings: dict | None, dtype: str = "bf16") -> str:
    """rlvr's update FLOP/s (bench/vs_trl.py's update_flops) against the matrix rate of its dtype (bf16 / fp32)
    measured on the card."""
    from vs_trl import update_flops

    rates = [f for f in map(update_flops, data.get("rlvr", [])) if f is not None]
    if not rates:
        return ""
    rate = statistics.median(rates) / 1e12
    peak = ceilings[f"{dtype}_tflops"] if ceilings else None
    share = f" = {rate / peak:.0%} of the {peak:.0f} measured in {dtype}" if peak else ""
    return f"; update {rate:.1f} TFLOP/s{share}"


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
    return (f"{line} vs TRL {theirs:.2f} ({theirs_tps:.0f} tok/s, {theirs_gb:.2f} GB): ratio {mine / theirs:.2f}, "
            f"memory {mine_gb / theirs_gb:.2f}")


def summarize(name: str, work: Path) -> str:
    """One line of what a finished check measured."""
    ceilings = json.loads((work / "ceilings.json").read_text()) if (work / "ceilings.json").exists() else None
    if name == "ceilings":
        return (f"{ceilings['device']}: copy {ceilings['bandwidth_tb_s']:.2f} TB/s, matmul bf16 "
                f"{ceilings['bf16_tflops']:.0f} / fp32 {ceilings['fp32_tflops']:.1f} TFLOP/s")
    if name.startswith("decode"):
        return decode_line(json.loads((work / f"{name}.json").read_text()))
    if name.startswith("profile"):
        return profile_line(json.loads((work / f"{name}.json").read_text()))
    if name.startswith("vs_trl"):
        data = json.loads((work / f"{name}.json").read_text())
        return comparison_line(data) + update_rate(data, ceilings, "fp32" if "fp32" in name else "bf16")
    found = step_seconds(work / name)
    text = f"{found[0]:.2f} s/step over {found[1]} steps" if found else "no metrics"
    mismatch = mismatch_kl(work / name)
    if mismatch is not None:
        text += f"; sampler-trainer mismatch KL median {mismatch:.2e}"
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
    parser.add_argument("--tokenizer", default="embedded:SmolLM2-135M-Instruct",
                        help="the model whose tokenizer the shape checks use (a directory where the hub is absent)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-work-"))
    chosen = select(checks(work, args.steps, args.tokenizer), args.only)
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
