"""Decode step and update phase against the bounds measured on this machine.

    .venv/bin/python bench/bounds.py [--rows 16] [--new 48] [--model embedded:SmolLM2-135M-Instruct]
                                     [--allocator tcmalloc|system]

Bounds, measured here with the model's own weight shapes (no estimate from a data sheet):
- weight traffic: one pass of a single row through every Linear (a matrix-vector product per weight reads the
  whole weight once and does almost no arithmetic): the time to stream the weights from memory;
- matmul: 2 x parameters x rows FLOPs at the large-GEMM peak (a 2048^3 fp32 product);
- decode bound = traffic + matmul for `rows` rows (a step must read every weight and do its products).
Measured: the engine's decode step (HFRolloutEngine, fused path where the model allows it) with stop tokens
disabled, so every row decodes every step, as the cost of one more token: (time of a `new`-token sampling call -
time of a SHORT-token call) / (new - SHORT), so that the prompt's prefill and the once-per-call weight prepacking,
which are no decode step, cancel out (both calls are printed); and one GRPO update on a sampled batch, whose
useful FLOPs count each token once (the prompt once per group, the completions' real tokens): 6 x parameters
per token (forward 2, backward 4).
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import time

import torch

SHORT = 8  # tokens of the shorter sampling call the decode step is measured against


def timed(fn, repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def linears(model) -> list[torch.Tensor]:
    return [m.weight.detach() for m in model.modules() if isinstance(m, torch.nn.Linear)]


def gemm_peak() -> float:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    return 2 * 2048 ** 3 / timed(lambda: a @ b, 5)  # FLOP/s


def decode_bound(weights: list[torch.Tensor], rows: int, peak: float) -> tuple[float, float]:
    """(weight-traffic seconds, matmul seconds at peak) for one decode step of `rows` rows."""
    one = {w.shape[1]: torch.randn(1, w.shape[1]) for w in weights}
    traffic = timed(lambda: [torch.nn.functional.linear(one[w.shape[1]], w) for w in weights], 5)
    flops = sum(2 * rows * w.numel() for w in weights)
    return traffic, flops / peak


def with_tcmalloc(allocator: str) -> None:
    """Measure rlvr as the `rlvr` command runs it: restart this script once with tcmalloc preloaded."""
    import os
    import sys

    from rlvr.cli.allocator import find_tcmalloc, preload_env

    env = preload_env(os.environ, find_tcmalloc()) if allocator == "tcmalloc" else None  # None: already, or none
    if env is not None:
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], env)
    print(f"allocator: {'tcmalloc' if 'tcmalloc' in os.environ.get('LD_PRELOAD', '') else 'glibc malloc'}")


def _sample_time(engine, ids, mask, new: int) -> float:
    """Seconds to sample 8 completions of `new` tokens per prompt (median of 3, same seed each time)."""
    from rlvr.rollout.base import SamplingParams  # here, as in main: --help stays torch-free

    return timed(lambda: engine.sample(ids, mask, 8, SamplingParams(1.0, 1.0, new, seed=1)), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--new", type=int, default=48)
    parser.add_argument("--model", default="embedded:SmolLM2-135M-Instruct")
    parser.add_argument("--allocator", choices=["tcmalloc", "system"], default="tcmalloc",
                        help="tcmalloc as the `rlvr` command preloads it (rlvr/cli/allocator.py), or glibc's malloc")
    args = parser.parse_args()
    with_tcmalloc(args.allocator)
    import tempfile
    from pathlib import Path

    from rlvr.config.run import load_config
    from rlvr.grpo import stages
    from rlvr.grpo.loop import _close
    from rlvr.grpo.setup import setup
    from rlvr.grpo.step import update
    from rlvr.rollout.base import SamplingParams

    config = load_config(None, [f"model.name_or_path={args.model}", "task.one_shot=false", "reward.workers=0",
                                f"rollout.prompts_per_step={args.rows // 8}", "rollout.group_size=8",
                                f"rollout.max_new_tokens={args.new}", f"optimizer.micro_batch_size={args.rows}",
                                "eval.at_end=false", "rollout.dynamic_sampling.enabled=false",
                                f"output_dir={tempfile.mkdtemp()}"])
    run = setup(config, Path(tempfile.mkdtemp()) / "run")
    try:
        models, optim = run.models, run.optim
        params = sum(p.numel() for p in models.policy.parameters())
        peak = gemm_peak()
        traffic, matmul = decode_bound(linears(models.policy), args.rows, peak)
        engine = run.feed.engine
        prompts = list(itertools.islice(run.feed.prompt_stream, args.rows // 8))
        ids, mask = engine.encode(prompts)
        stops, engine.stop_ids = engine.stop_ids, [10 ** 9]  # every row decodes every step
        short, full = _sample_time(engine, ids, mask, SHORT), _sample_time(engine, ids, mask, args.new)
        step = (full - short) / (args.new - SHORT)  # per extra token: prefill and weight prepacking cancel out
        engine.stop_ids = stops
        bound = traffic + matmul
        print(f"decode step ({args.rows} rows, tokens {SHORT + 1}-{args.new}): {step * 1e3:.0f} ms; bound "
              f"{bound * 1e3:.0f} ms (weight traffic {traffic * 1e3:.0f} + matmul {matmul * 1e3:.0f} at "
              f"{peak / 1e9:.0f} GFLOP/s); ratio {step / bound:.2f} (goal <= 1.5). Whole call of {args.new} "
              f"tokens {full:.2f} s, of which prefill, prepacking and the first {SHORT} tokens {short:.2f} s")
        draw = dataclasses.replace(run.plan.draw, sampling=SamplingParams(1.0, 1.0, args.new))
        drawn = stages.draw_batch(run.feed, run.service, draw, run.ranks)
        rollouts = drawn.rollouts
        old, ref = stages.scoring_logprobs(models, rollouts, run.plan.scoring)
        stages.finish_scoring(drawn, run.feed.curriculum)
        advantages = torch.randn(rollouts.size)  # the update's cost does not depend on the values
        batch = stages.make_train_batch(rollouts, advantages, old, ref, run.plan.mask_truncated, run.plan.kl)
        # the same batch is updated on 5 times (2 warm-up): no engine-agreement check between them
        optim.update_settings = dataclasses.replace(optim.update_settings, correction=None)
        # the first updates allocate AdamW's moments
        seconds = timed(lambda: update(models.trainer, optim, batch, run.plan.updates_per_batch, run.logger.message),
                        3, warmup=2)
        tokens = int(rollouts.prompt_mask.sum()) + int(rollouts.completion_mask.sum())
        rate = 6 * params * tokens / seconds
        print(f"update ({rollouts.size} completions, {tokens} useful tokens): {seconds:.2f} s = "
              f"{rate / 1e9:.0f} GFLOP/s useful, {rate / peak:.0%} of the matmul peak (goal >= 70%)")
    finally:
        _close(run)


if __name__ == "__main__":
    main()
