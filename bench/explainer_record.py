"""Record the explainer's example data on the embedded model: rlvr/viz/example/explainer.json.

`rlvr report` and `rlvr dashboard` draw the explainer from the run they are opened on; where a run lacks what a view
needs (a temperature sweep, runs at other betas, a PPO critic, an agent's turn rewards), this file fills in, and the
page says so. Everything in it is measured here, on SmolLM2-135M-Instruct (the embedded default), on a CPU:

  example      the default run (`rlvr train`, its first EXAMPLE_STEPS steps): curves and its group view
  temperature  sampling only, at T in TEMPERATURES: distinct answers per group, tied groups, mean |A|, pass rates
  grid         short real runs over clip epsilon x beta x G (mu = 2, so that epsilon binds): their curves
  ppo          PPO with a learned critic and GAE (configs/ppo.yaml at G = 8): one group's per-token advantages
  agent        the calculator agent with process credit (configs/agents/calculator.yaml): one group's episodes
  hacks        completions that game a weak check, with the naive check's and rlvr's verdicts

    python bench/explainer_record.py                 # everything (33 minutes on a 2-core CPU, the grid 17 of them)
    python bench/explainer_record.py --only grid     # one part; the others already in the file are kept

Each part records its wall time; the grid's is printed against its 30-minute budget.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import explainer_hacks  # noqa: E402  (bench/ is no package)

OUT = ROOT / "rlvr" / "viz" / "example" / "explainer.json"
EXAMPLE_STEPS = 8
TEMPERATURES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2)
SWEEP_PROMPTS, SWEEP_G = 16, 8
GRID = {"clip_epsilon": (0.1, 0.2, 0.3), "beta": (0.0, 0.04, 0.2), "group_size": (4, 8)}
GRID_STEPS, GRID_MU, GRID_PROMPTS = 6, 2, 2  # 2 prompts a step (not 4): 18 runs within the budget
GRID_BUDGET_S = 30 * 60
# beta = 0 loads no reference model, so such a run logs no KL: its cells run at this beta instead, which loads the
# reference and measures the KL while the penalty stays nil (1e-9 x a KL of order 1 is nothing next to the loss)
MEASURE_ONLY_BETA = 1e-9
CURVE_KEYS = ("reward_mean", "kl", "clip_fraction", "zero_std_fraction", "completion_length", "entropy")
# Every run: no evaluation and no saved weights (only the logs are read); dynamic sampling off so that each step
# costs the same prompts (the grid compares like with like).
QUIET = ("eval.at_end=false", "checkpoint.save_final=none", "logging.progress=off")


def train(run_dir: Path, *args: str) -> float:
    """One `rlvr train` in its own process; its wall time in seconds. A run directory that --work already holds
    finished (with its wall time) is read again, not trained again: a part can be recorded anew from its runs."""
    wall = run_dir / "wall_s.txt"
    if (run_dir / "FINISHED").is_file() and wall.is_file():
        return float(wall.read_text())
    start = time.monotonic()
    cmd = [sys.executable, "-m", "rlvr", "train", *args, *QUIET, f"output_dir={run_dir}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    seconds = round(time.monotonic() - start, 1)
    wall.write_text(str(seconds))
    return seconds


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def curves(run_dir: Path) -> dict:
    rows = [r for r in lines(run_dir / "metrics.jsonl") if "reward_mean" in r]
    return {"steps": [r["step"] for r in rows], **{k: [r.get(k) for r in rows] for k in CURVE_KEYS}}


def record_example(work: Path) -> dict:
    run = work / "example"
    seconds = train(run, f"max_steps={EXAMPLE_STEPS}")
    groups = lines(run / "groups.jsonl")
    config = "".join(line for line in (run / "config.yaml").read_text(encoding="utf-8").splitlines(keepends=True)
                     if not line.startswith("output_dir:"))  # where this machine kept it is no part of the example
    return {"command": f"rlvr train max_steps={EXAMPLE_STEPS}", "seconds": seconds, "config": config,
            "curves": curves(run), "groups": groups}


def record_grid(work: Path) -> dict:
    cells = []
    for eps in GRID["clip_epsilon"]:
        for beta in GRID["beta"]:
            for g in GRID["group_size"]:
                paid = beta or MEASURE_ONLY_BETA
                run = work / f"grid-e{eps}-b{paid}-g{g}"
                seconds = train(run, f"max_steps={GRID_STEPS}", f"algorithm.updates_per_batch={GRID_MU}",
                                f"rollout.prompts_per_step={GRID_PROMPTS}",
                                f"algorithm.clip_epsilon={eps}", f"algorithm.beta={paid}", f"rollout.group_size={g}",
                                "rollout.dynamic_sampling.enabled=false")
                cells.append({"clip_epsilon": eps, "beta": beta, "group_size": g, "seconds": seconds,
                              "curves": curves(run)})
                print(f"grid eps {eps} beta {beta} G {g}: {seconds:.0f} s", flush=True)
    total = round(sum(c["seconds"] for c in cells), 1)  # each run's own wall time (a rerun reads runs already made)
    print(f"grid: {len(cells)} runs in {total / 60:.1f} min (budget {GRID_BUDGET_S / 60:.0f} min)", flush=True)
    return {"steps": GRID_STEPS, "updates_per_batch": GRID_MU, "prompts_per_step": GRID_PROMPTS,
            "axes": {k: list(v) for k, v in GRID.items()},
            "command": f"rlvr train max_steps={GRID_STEPS} algorithm.updates_per_batch={GRID_MU} "
                       f"rollout.prompts_per_step={GRID_PROMPTS} algorithm.clip_epsilon=EPS algorithm.beta=BETA "
                       "rollout.group_size=G rollout.dynamic_sampling.enabled=false",
            "measure_only_beta": MEASURE_ONLY_BETA,
            "seconds": total, "cells": cells}


def record_temperature() -> dict:
    """G samples of SWEEP_PROMPTS training prompts at each temperature, scored by the default task's verifier."""
    import torch

    from rlvr.algorithms.advantages import grpo_advantages, tied_groups
    from rlvr.config.run import RunConfig
    from rlvr.evaluation.generate import generate
    from rlvr.model.load import load_model, load_tokenizer
    from rlvr.rewards.rewarder import build_rewarder
    from rlvr.rollout.base import SamplingParams
    from rlvr.tasks import build_task

    config, start = RunConfig(), time.monotonic()
    torch.manual_seed(0)
    model, tokenizer = load_model(config.model, trainable=False), load_tokenizer(config.model)
    train_prompts = build_task(config.task).train_prompts(config.seed)
    prompts = [next(train_prompts) for _ in range(SWEEP_PROMPTS)]
    rewarder, rows = build_rewarder(config), []
    for temperature in TEMPERATURES:
        sampling = SamplingParams(temperature, 1.0, config.rollout.max_new_tokens)
        made = generate(model, tokenizer, prompts, SWEEP_G, scorer=rewarder, sampling=sampling)
        rewards = torch.tensor([s.score for g in made for s in g.samples], dtype=torch.float32)
        scorable = torch.ones_like(rewards, dtype=torch.bool)
        advantages = grpo_advantages(rewards, SWEEP_G, config.algorithm.std_epsilon, scorable)
        distinct = [len({s.answer for s in g.samples}) for g in made]
        rows.append({"temperature": temperature, "distinct_answers": sum(distinct) / len(distinct),
                     "tied_share": float(tied_groups(rewards, SWEEP_G, scorable).float().mean()),
                     "mean_abs_advantage": float(advantages.abs().mean()), "reward_mean": float(rewards.mean()),
                     "pass_rates": [float(rewards[i * SWEEP_G:(i + 1) * SWEEP_G].mean()) for i in range(len(made))]})
        print(f"temperature {temperature}: {rows[-1]['reward_mean']:.3f} reward", flush=True)
    return {"command": "python bench/explainer_record.py --only temperature",
            "prompts": SWEEP_PROMPTS, "group_size": SWEEP_G, "max_new_tokens": config.rollout.max_new_tokens,
            "seconds": round(time.monotonic() - start, 1), "rows": rows}


def one_group(run_dir: Path, pick) -> dict:
    """The logged group `pick` scores highest (the latest of equals: the critic has trained longest by then)."""
    return max(lines(run_dir / "groups.jsonl"), key=lambda row: (pick(row), row["step"]))


def record_ppo(work: Path) -> dict:
    run = work / "ppo"
    seconds = train(run, str(ROOT / "configs" / "ppo.yaml"), "max_steps=3", "rollout.group_size=8",
                    "rollout.prompts_per_step=4")
    # a group whose rewards differ, and whose tokens' advantages vary most (the critic's per-token values at work)
    spread = lambda row: (len({c["reward"] for c in row["completions"]}),  # noqa: E731
                          sum(len(set(c["token_advantages"])) for c in row["completions"]))
    return {"command": "rlvr train configs/ppo.yaml max_steps=3 rollout.group_size=8 rollout.prompts_per_step=4",
            "seconds": seconds, "group": one_group(run, spread), "std_epsilon": 1e-4}


def record_agent(work: Path) -> dict:
    run = work / "agent"
    seconds = train(run, str(ROOT / "configs" / "agents" / "calculator.yaml"), "max_steps=3", "max_minutes=null")
    turns = lambda row: sum(len((c.get("episode") or {}).get("turn_rewards") or []) for c in row["completions"])  # noqa: E731
    return {"command": "rlvr train configs/agents/calculator.yaml max_steps=3", "seconds": seconds,
            "group": one_group(run, turns), "std_epsilon": 1e-4}


def main() -> None:
    parts = {"example": lambda w: record_example(w), "temperature": lambda w: record_temperature(),
             "grid": record_grid, "ppo": record_ppo, "agent": record_agent,
             "hacks": lambda w: explainer_hacks.record(w, train)}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(parts), action="append", help="record only these parts")
    parser.add_argument("--work", type=Path, help="where the runs go (default: a temporary directory)")
    args = parser.parse_args()
    data = json.loads(OUT.read_text(encoding="utf-8")) if OUT.is_file() else {}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        for name in args.only or list(parts):
            data[name] = {**parts[name](work), "date": time.strftime("%Y-%m-%d"),
                          "commit": commit.stdout.strip() or "unknown"}
            OUT.parent.mkdir(parents=True, exist_ok=True)
            OUT.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")  # after each part
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
