"""One decode step on a GPU, eager against replayed from a CUDA graph.

    .venv/bin/python bench/decode_step.py --device cuda [--dtype bfloat16] [--prompts 8 --group 8] [--json F]

The embedded model (SmolLM2-135M-Instruct) decodes 8 arithmetic prompts x G 8 = 64 rows, eagerly (fp32: the fused
step; bf16 mixed: the static step without graphs) and replayed from graphs. Two measurements per path, in one
process on the same card:
- ms per decode step at a fixed row count (the rows never finish: the same token fed every step), timed over
  100 steps after 8 warm-up steps, with torch.cuda.synchronize() around the timed loop only;
- a whole sampled generation (T 1.0, up to 128 new tokens, rows leave as they finish, the same seed for both
  paths): its wall time, and how many of the 64 rows came out token for token the same as the eager path's.
--compile adds a third path, graphs over the layer compiled by inductor (rollout.compile_decode), with the
seconds its first generation took (compiling every bucket it meets). --paths picks any of PATHS instead: the
*_matmul paths take the batched-product attention (graph_step.matmul_attention) instead of SDPA, *_tf32 lets fp32
matmuls use TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32) and graph_cudnn turns SDPA's cuDNN backend
on (model.cudnn_attention's default is off), each only while that path runs (read when a graph is recorded).
Goal: <= 2 ms a step at 64 rows (the eager step measured ~10 ms on an H100).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.config.run import load_config  # noqa: E402
from rlvr.model.load import load_model, load_tokenizer  # noqa: E402
from rlvr.model.precision import DTYPES  # noqa: E402
from rlvr.rollout.base import SamplingParams  # noqa: E402
from rlvr.rollout.hf import HFRolloutEngine  # noqa: E402
from rlvr.tasks import build_task  # noqa: E402

WARM, TIMED, MAX_NEW = 8, 100, 128


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@dataclass(frozen=True)
class DecodePath:
    graphs: bool
    compiled: bool = False
    attention: str | None = None  # graph_step.ATTENTION name; None = the engine's default (rollout.decode_attention)
    tf32: bool = False
    cudnn: bool | None = None  # SDPA's cuDNN backend on / off while the path runs; None = as load_model left it


# the SDPA paths name their attention, so that they stay what the 2026-11-27 figures measured (fp32's auto is matmul)
PATHS = {"eager": DecodePath(False), "graph": DecodePath(True, attention="sdpa"),
         "compiled": DecodePath(True, True, attention="sdpa"),
         "graph_matmul": DecodePath(True, attention="matmul"),
         "compiled_matmul": DecodePath(True, True, attention="matmul"),
         "compiled_tf32": DecodePath(True, True, attention="sdpa", tf32=True),
         "compiled_matmul_tf32": DecodePath(True, True, attention="matmul", tf32=True),
         "graph_cudnn": DecodePath(True, attention="sdpa", cudnn=True)}


@contextlib.contextmanager
def flags(path: DecodePath):
    """The path's process-wide backend flags while it records and runs, restored after. A compiled path fixes its
    SDPA backend when it compiles (inductor picks the op), so cuDNN variants are measured on graphs, not compiled."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.matmul.allow_tf32 = path.tf32
    if path.cudnn is not None:
        torch.backends.cuda.enable_cudnn_sdp(path.cudnn)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved[0]
        torch.backends.cuda.enable_cudnn_sdp(saved[1])


def engine_for(model, tokenizer, path: DecodePath) -> HFRolloutEngine:
    """graphs=False: the eager step of the same precision: the fused step in fp32, the static step run eagerly for a
    mixed-precision model (which always decodes through the static step, rollout/hf.py)."""
    engine = HFRolloutEngine(model, tokenizer, cuda_graphs=path.graphs, compile_decode=path.compiled)
    engine.static_decode = path.graphs
    engine.decode_attention = path.attention
    return engine


def ms_per_step(engine: HFRolloutEngine, ids: torch.Tensor, mask: torch.Tensor, group: int, device: str) -> float:
    stepper = engine._stepper(ids, mask, group, MAX_NEW)
    tokens = stepper.first_logits.argmax(dim=-1)
    with torch.no_grad():
        for _ in range(WARM):  # the graph path records its graph in the first step
            stepper.step(tokens)
        sync(device)
        start = time.perf_counter()
        for _ in range(TIMED):
            stepper.step(tokens)
        sync(device)
    return (time.perf_counter() - start) / TIMED * 1e3


def kernel_profile(engine: HFRolloutEngine, ids: torch.Tensor, mask: torch.Tensor, group: int, steps: int = 5) -> dict:
    """What the GPU itself does in a step (torch.profiler, CUPTI, which also sees the kernels inside a replayed
    graph): kernels a step, their summed time, and the five costliest. Summed kernel time near the step's wall
    time means the kernels are the cost; far below it, launches and gaps are."""
    from torch.profiler import ProfilerActivity, profile

    stepper = engine._stepper(ids, mask, group, MAX_NEW)
    tokens = stepper.first_logits.argmax(dim=-1)
    with torch.no_grad():
        for _ in range(WARM):
            stepper.step(tokens)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                stepper.step(tokens)
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA" and "Memcpy" not in e.name]
    by_name: dict[str, float] = {}
    for e in kernels:
        by_name[e.name] = by_name.get(e.name, 0.0) + e.device_time_total / steps
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:5]
    return {"kernels_per_step": len(kernels) / steps, "kernel_ms_per_step": sum(by_name.values()) / 1e3,
            "top_kernels_us": [(name[:80], round(us, 1)) for name, us in top]}


def sampled(engine: HFRolloutEngine, ids: torch.Tensor, mask: torch.Tensor, group: int, device: str):
    sync(device)
    start = time.perf_counter()
    out = engine.sample(ids, mask, group, SamplingParams(1.0, 1.0, MAX_NEW, seed=7))
    sync(device)
    return out, time.perf_counter() - start


def step_bytes(model, rows: int, context: int, itemsize: int) -> dict:
    """What one decode step must read at least: every weight once in the compute dtype (a tied embedding
    once: the step reads it as the LM head) and the K and V of every cached position of every row (`context`: the mean
    position over the timed steps)."""
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    weights = sum(p.numel() for p in model.parameters()) * itemsize
    kv = 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * itemsize * rows * context
    return {"weight_bytes": weights, "kv_bytes": kv, "context": context}


def chosen_paths(args) -> list[str]:
    """--paths (eager first: the others are compared with it), else eager, graph and with --compile compiled."""
    names = args.paths.split(",") if args.paths else ["eager", "graph"] + (["compiled"] if args.compile else [])
    unknown = sorted(set(names) - set(PATHS))
    if unknown:
        raise SystemExit(f"decode_step: unknown paths {unknown}; the paths are {list(PATHS)}")
    return ["eager"] + [n for n in names if n != "eager"]


def measure(args) -> dict:
    # compiled paths of several attentions share the one compiled layer (graph_step.compiled_layer_step): each
    # attention and bucket is a recompile of it, more in one process than a run makes (past the limit: eager)
    torch._dynamo.config.recompile_limit = 64
    shape = ["model.init=random", f"model.architecture={args.arch}"] if args.arch else []
    config = load_config(None, [f"model.name_or_path={args.model}", f"model.device={args.device}",
                                f"model.dtype={args.dtype}", "task.one_shot=false", *shape])
    model, tokenizer = load_model(config.model), load_tokenizer(config.model)  # the policy, as training holds it
    prompts = list(build_task(config.task).eval_prompts(args.prompts))
    engines = {name: engine_for(model, tokenizer, PATHS[name]) for name in chosen_paths(args)}
    ids, mask = engines["eager"].encode(prompts)
    rows = args.prompts * args.group
    result = {"device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
              "dtype": args.dtype, "rows": rows, "prompt_tokens": ids.shape[1], "paths": list(engines)}
    for name, engine in engines.items():  # a compiled path compiles its 64-row bucket in the warm-up steps
        start = time.perf_counter()
        with flags(PATHS[name]):
            result[f"{name}_ms_per_step"] = ms_per_step(engine, ids, mask, args.group, args.device)
        result[f"{name}_first_steps_s"] = time.perf_counter() - start
    (eager_ids, eager_lp), result["eager_sample_s"] = sampled(engines["eager"], ids, mask, args.group, args.device)
    for name in list(engines)[1:]:
        with flags(PATHS[name]):  # the first call records (and compiles) the smaller buckets' graphs
            result[f"{name}_first_sample_s"] = sampled(engines[name], ids, mask, args.group, args.device)[1]
            (got_ids, got_lp), result[f"{name}_sample_s"] = sampled(engines[name], ids, mask, args.group, args.device)
        width = min(eager_ids.shape[1], got_ids.shape[1])
        same = (eager_ids[:, :width] == got_ids[:, :width]).all(dim=1) & (eager_ids.shape[1] == got_ids.shape[1])
        result[f"{name}_rows_identical"] = f"{int(same.sum())}/{rows}"
        if bool(same.any()):
            result[f"{name}_logprob_max_diff"] = float((eager_lp[same, :width] - got_lp[same, :width]).abs().max())
    if "graph" in engines:
        result["speedup"] = result["eager_ms_per_step"] / result["graph_ms_per_step"]
    result.update(step_bytes(model, rows, ids.shape[1] + WARM + TIMED // 2, DTYPES[args.dtype].itemsize))
    if args.device.startswith("cuda"):  # the bound: those bytes at the bandwidth measured here, now
        from ceilings import copy_bandwidth

        result["bandwidth_tb_s"] = copy_bandwidth(args.device) / 1e12
        result["hbm_bound_ms"] = (result["weight_bytes"] + result["kv_bytes"]) / (result["bandwidth_tb_s"] * 1e9)
    if args.profile and args.device.startswith("cuda"):
        for name, engine in engines.items():
            try:
                with flags(PATHS[name]):
                    result[f"{name}_profile"] = kernel_profile(engine, ids, mask, args.group)
            except Exception as err:  # noqa: BLE001 - a diagnostic: its failure must not cost the measurements
                result[f"{name}_profile"] = f"failed: {err!r}"[:300]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded:SmolLM2-135M-Instruct",
                        help="the model, or with --arch the tokenizer's model")
    parser.add_argument("--arch", help="random weights of this shape (model.architecture)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--compile", action="store_true", help="also graphs over the inductor-compiled layer")
    parser.add_argument("--paths", help=f"comma-separated paths of {list(PATHS)} (default: eager,graph[,compiled])")
    parser.add_argument("--profile", action="store_true", help="kernels a step per path (torch.profiler, CUDA)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = measure(args)
    for key, value in result.items():
        print(f"{key:<34}{value:.3f}" if isinstance(value, float) else f"{key:<34}{value}")
    if args.json:
        args.json.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
