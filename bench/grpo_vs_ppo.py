"""GRPO against PPO with a learned critic (the comparison DeepSeekMath makes in sec. 4.1: GRPO drops the value
model): peak memory and step time on the same model, task and batch (32 completions a step: GRPO 4 prompts x
G 8, PPO 32 prompts x 1; configs/grpo.yaml and configs/ppo.yaml, both with mu = 1). Each algorithm runs in a
fresh child process, one after the other, so each peak RSS is its own; the parent prints both and the ratios.

    .venv/bin/python bench/grpo_vs_ppo.py [--steps 6] [--model embedded:SmolLM2-135M-Instruct]

Reported per algorithm: peak resident memory of the process (ru_maxrss), the bytes held in model state
(weights, gradients and AdamW moments of every model, counted from the tensors), and the median step time
after the first step.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def state_bytes(models, optimizer) -> int:
    """Weights + gradients + optimizer moments of the policy, the reference and the critic (if any)."""
    import torch

    def tensors(module):
        return [p for p in module.parameters()] + [p.grad for p in module.parameters() if p.grad is not None]

    held = tensors(models.policy) + (tensors(models.reference) if models.reference is not None else [])
    optimizers = [optimizer]
    if models.critic is not None:
        held += tensors(models.critic.model)
        optimizers.append(models.critic.optimizer)
    for optimizer in optimizers:
        held += [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)]
    unique = {t.data_ptr(): t.numel() * t.element_size() for t in held}  # tied weights counted once
    return sum(unique.values())


def child(algorithm: str, steps: int, model: str) -> None:
    from rlvr.config.run import load_config
    from rlvr.grpo.setup import setup
    from rlvr.grpo.step import grpo_step

    out = Path(tempfile.mkdtemp(prefix=f"rlvr-{algorithm}-"))
    # mu = 1 for both: the same number of policy updates per batch, so the step times compare like for like
    # (configs/ppo.yaml takes 2 passes; a second pass adds time, not peak memory).
    config = load_config(CONFIGS / f"{algorithm}.yaml", [f"model.name_or_path={model}", f"output_dir={out}",
                                                         "algorithm.updates_per_batch=1"])
    run = setup(config, out)
    times, tokens = [], []
    try:
        for step in range(1, steps + 1):
            start = time.perf_counter()
            record, *_ = grpo_step(run, step)
            times.append(time.perf_counter() - start)
            tokens.append(record["completion_length"])
        held = state_bytes(run.models, run.optim.optimizer)
    finally:
        run.service.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"algorithm": algorithm, "peak_rss": peak, "state_bytes": held,
                      "step_s": statistics.median(times[1:] or times), "completion_length": statistics.mean(tokens),
                      "batch": config.batch_size}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--model", default="embedded:SmolLM2-135M-Instruct")
    parser.add_argument("--child", choices=["grpo", "ppo"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.steps, args.model)
    results = {}
    for algorithm in ("grpo", "ppo"):
        done = subprocess.run([sys.executable, __file__, "--child", algorithm, "--steps", str(args.steps),
                               "--model", args.model], check=True, capture_output=True, text=True)
        results[algorithm] = json.loads(done.stdout.strip().splitlines()[-1])
    g, p = results["grpo"], results["ppo"]
    gib = 2 ** 30
    print(f"{'':<10}{'peak RSS GiB':>14}{'model state GiB':>17}{'step s':>9}{'mean len':>10}")
    for name, r in (("GRPO", g), ("PPO", p)):
        print(f"{name:<10}{r['peak_rss'] / gib:>14.2f}{r['state_bytes'] / gib:>17.2f}{r['step_s']:>9.2f}"
              f"{r['completion_length']:>10.1f}")
    print(f"GRPO / PPO: peak RSS {g['peak_rss'] / p['peak_rss']:.2f}x ({1 - g['peak_rss'] / p['peak_rss']:.0%} less), "
          f"model state {g['state_bytes'] / p['state_bytes']:.2f}x, step time {g['step_s'] / p['step_s']:.2f}x")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
