"""Where a GRPO step's time and memory go on a GPU: each phase timed with the device synchronised at its
end (the step's own phase times are host clocks, and queued GPU work of one phase lands in the next one's), the peak
memory of each phase, and a profile of one step's kernels and host operations.

    python bench/profile_step.py [--arch qwen2.5-0.5b --model TOKENIZER_DIR] [--dtype bfloat16] [--steps 4]
                                 [--max-new 256] [--set KEY=VALUE ...] [--json F]

The work is bench/vs_trl.py's (8 prompts x G 8 on the GPU, its prompts and settings), rlvr's side alone.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rlvr.grpo.stages as stages  # noqa: E402
import rlvr.grpo.step as step_module  # noqa: E402
from vs_trl import Work, random_model_dir, rlvr_overrides, timed_rlvr_steps, write_prompts  # noqa: E402

PHASES = {"generate": (stages, "draw_batch"), "score": (stages, "scoring_logprobs"),
          "update": (step_module, "update"), "sync": (stages, "sync_engine")}


def timed_phases(device: str) -> dict[str, list[tuple[float, float]]]:
    """Wrap each phase's function: (seconds with the device synchronised after it, peak GB allocated during it)."""
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in PHASES}

    def wrap(name, inner):
        def timed(*args, **kwargs):
            synchronise(device)
            torch.cuda.reset_peak_memory_stats() if device.startswith("cuda") else None
            start = time.perf_counter()
            out = inner(*args, **kwargs)
            synchronise(device)
            peak = torch.cuda.max_memory_allocated() / 1e9 if device.startswith("cuda") else 0.0
            seen[name].append((time.perf_counter() - start, peak))
            return out
        return timed

    for name, (module, attribute) in PHASES.items():
        setattr(module, attribute, wrap(name, getattr(module, attribute)))
    return seen


def synchronise(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def profiled_step(run, step: int, device: str, rows: int = 25) -> dict:
    """One more step under torch.profiler: the costliest kernels and host operations, and the kernel count."""
    from torch.profiler import ProfilerActivity, profile

    from rlvr.grpo.step import grpo_step

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        grpo_step(run, step)
        synchronise(device)
    averages = prof.key_averages()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    by_device = sorted(averages, key=lambda e: -e.self_device_time_total)[:rows]
    by_host = sorted(averages, key=lambda e: -e.self_cpu_time_total)[:rows]
    return {"kernels": len(kernels), "kernel_ms": sum(e.device_time_total for e in kernels) / 1e3,
            "top_device_ms": [(e.key[:90], round(e.self_device_time_total / 1e3, 2), e.count) for e in by_device],
            "top_host_ms": [(e.key[:90], round(e.self_cpu_time_total / 1e3, 2), e.count) for e in by_host]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded:SmolLM2-135M-Instruct")
    parser.add_argument("--arch", help="random weights of this shape (model.architecture)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--steps", type=int, default=4, help="timed steps before the profiled one (the first warms up)")
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--max-new", type=int, default=256, help="64 keeps the profiled step's own cost in a minute")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an extra rlvr override")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from rlvr.config.run import load_config
    from rlvr.model.load import resolve_model_path

    model_dir = random_model_dir(args.arch, args.model, args.device) if args.arch else resolve_model_path(args.model)
    work = Work(args.prompts_per_step, args.max_new, args.device, args.dtype, tuple(args.set))
    out = Path(tempfile.mkdtemp(prefix="profile-step-"))
    write_prompts(out / "prompts.jsonl")
    config = load_config(None, rlvr_overrides(model_dir, out / "prompts.jsonl", args.steps, out / "run", work))
    seen = timed_phases(args.device)
    held = {}
    steps = timed_rlvr_steps(config, out / "run", lambda run: held.update(run=run), keep_open=True)
    result = {"steps_s": [round(s["s"], 3) for s in steps],
              "phases": {name: {"s": [round(s, 3) for s, _ in got], "peak_gb": [round(g, 2) for _, g in got],
                                "median_s": statistics.median(s for s, _ in got[1:] or got) if got else None}
                         for name, got in seen.items()}}
    # printed before the profiled step: at 256 new tokens on a 0.5B shape (H200, 2026-11-29) the profiler's own cost
    # ran past the 90 s a check had, and the timed phases went with it
    print(json.dumps(result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(result))
    try:
        result["profile"] = profiled_step(held["run"], args.steps + 1, args.device)
    finally:
        from rlvr.grpo.loop import _close

        _close(held["run"])
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
