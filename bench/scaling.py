"""How rlvr's step time grows with the work: s/step and its phases as G, the completion length
and the prompts per step go 1x, 2x, 4x from the vs_trl.py work (2 prompts x G 8, 48 new tokens, one micro-batch),
each configuration in a fresh child process, in one invocation on one machine.

    .venv/bin/python bench/scaling.py [--steps 3] [--plot bench/scaling.png]

Completions are held at exactly max_new_tokens (the rollout engine is given no stop token), so "2x length" is
twice the tokens, not whatever the model chose to write; rewards are computed as usual and do not matter here.
The first step of each child is warm-up and is left out. The plot needs matplotlib (`pip install -e '.[bench]'`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_trl import G, Work, child_env, rlvr_overrides, timed_rlvr_steps, write_prompts  # noqa: E402

FACTORS = (1, 2, 4)
AXES = {"G": "rollout.group_size", "length": "rollout.max_new_tokens", "prompts": "rollout.prompts_per_step"}
BASE = {"G": G, "length": Work.max_new, "prompts": Work.prompts_per_step}


def configurations() -> list[tuple[str, int, dict[str, int]]]:
    """(axis, factor, work) with the 1x work once."""
    out = [("all", 1, dict(BASE))]
    for axis in AXES:
        out += [(axis, f, {**BASE, axis: BASE[axis] * f}) for f in FACTORS if f > 1]
    return out


def child(model_dir: str, prompts: Path, steps: int, work: dict[str, int]) -> dict:
    from rlvr.config.run import load_config

    def no_stop_token(run) -> None:
        run.feed.engine.stop_ids = [-1]  # no token id is -1: every completion runs to max_new_tokens

    out = Path(tempfile.mkdtemp(prefix="rlvr-scaling-")) / "run"
    rows = work["prompts"] * work["G"]
    overrides = rlvr_overrides(model_dir, prompts, steps, out) + [
        f"{AXES[k]}={v}" for k, v in work.items()] + [f"optimizer.micro_batch_size={rows}"]
    measured = timed_rlvr_steps(load_config(None, overrides), out, prepare=no_stop_token)
    keep = measured[1:] or measured
    return {k: statistics.median(m[k] for m in keep) for k in ("s", "generate", "score", "update", "length")} | {
        "tokens": rows * work["length"]}


def run_child(model_dir: str, prompts: Path, steps: int, work: dict[str, int]) -> dict:
    command = [sys.executable, __file__, "--child", json.dumps(work), "--model-dir", model_dir,
               "--prompts", str(prompts), "--steps", str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, env=child_env("tcmalloc"))
    if done.returncode != 0:
        raise SystemExit(f"child {work} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_table(results: list[tuple[str, int, dict]]) -> None:
    base = results[0][2]
    print("| grown | factor | tokens/step | s/step | x 1x | generate | score | update | update per 1k tokens |")
    print("|---|---|---|---|---|---|---|---|---|")
    for axis, factor, r in results:
        print(f"| {axis} | {factor}x | {r['tokens']} | {r['s']:.2f} | {r['s'] / base['s']:.2f} | "
              f"{r['generate']:.2f} | {r['score']:.2f} | {r['update']:.2f} | {1000 * r['update'] / r['tokens']:.2f} |")


def plot(results: list[tuple[str, int, dict]], path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        print("no plot: matplotlib is not installed (pip install -e '.[bench]')", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = results[0][2]["s"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for axis in AXES:
        points = [(1, 1.0)] + [(f, r["s"] / base) for a, f, r in results if a == axis]
        ax.plot(*zip(*points), marker="o", label=f"{axis} x factor")
    ax.plot(FACTORS, FACTORS, linestyle=":", color="grey", label="proportional")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(FACTORS, labels=[f"{f}x" for f in FACTORS])
    ax.set_yticks(FACTORS, labels=[f"{f}x" for f in FACTORS])
    ax.set_xlabel("work factor")
    ax.set_ylabel("s/step relative to 1x")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--model", default="embedded:SmolLM2-135M-Instruct")
    parser.add_argument("--plot", type=Path, default=Path(__file__).resolve().parent / "scaling.png")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--prompts", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.model_dir, args.prompts, args.steps, json.loads(args.child))))
        return
    from rlvr.model.load import resolve_model_path

    model_dir = resolve_model_path(args.model)
    prompts = Path(tempfile.mkdtemp(prefix="rlvr-scaling-")) / "prompts.jsonl"
    write_prompts(prompts)
    results = []
    for axis, factor, work in configurations():
        results.append((axis, factor, run_child(model_dir, prompts, args.steps, work)))
        print(f"{axis} {factor}x done: {results[-1][2]['s']:.2f} s/step", file=sys.stderr, flush=True)
    print_table(results)
    plot(results, args.plot)


if __name__ == "__main__":
    main()
