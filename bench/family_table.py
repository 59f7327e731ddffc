"""Every preset of the GRPO family on the embedded SmolLM2-135M and the default task (arithmetic level 1):
N steps each (default 10), in one process, one after another. Prints a table: reward at the first step, mean
reward over the last three steps, any non-finite loss, seconds per step, extra prompts drawn (DAPO).

    .venv/bin/python bench/family_table.py [--steps 10] [--presets grpo dapo ...] [--out runs/family]
    .venv/bin/python bench/family_table.py --out runs/family --summarise   # the table of finished runs

Rewards on a 10-step run are noisy (32 completions a step); the table shows that every variant trains without
NaN and moves the reward, not which variant is best.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
from pathlib import Path

from rlvr.config.run import load_config
from rlvr.grpo.loop import train

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def run_preset(preset: str, steps: int, out: Path, summarise_only: bool) -> dict:
    if not summarise_only:
        config = load_config(CONFIGS / f"{preset}.yaml", [f"max_steps={steps}", "eval.at_end=false",
                                                          f"output_dir={out / preset}", "samples_per_step=0"])
        train(config)
        shutil.rmtree(out / preset / "final", ignore_errors=True)  # 0.5 GB each; the metrics are what we keep
    records = [json.loads(line) for line in (out / preset / "metrics.jsonl").read_text().splitlines()]
    times = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(records, records[1:])]
    return {"preset": preset, "reward_first": records[0]["reward_mean"],
            "reward_last3": statistics.mean(r["reward_mean"] for r in records[-3:]),
            "finite": all(math.isfinite(r["loss"]) for r in records),
            "s_per_step": statistics.median(times) if times else float("nan"),
            "extra_prompts": sum(r.get("dynamic_sampling/extra_prompts", 0) for r in records),
            # G = 1 (PPO) logs no zero_std_fraction: there are no groups
            "zero_std_last3": statistics.mean(r.get("zero_std_fraction", float("nan")) for r in records[-3:])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--presets", nargs="*", default=sorted(p.stem for p in CONFIGS.glob("*.yaml")))
    parser.add_argument("--out", type=Path, default=None, help="run directories (default: a temporary one)")
    parser.add_argument("--summarise", action="store_true", help="only print the table of the runs in --out")
    args = parser.parse_args()
    if args.summarise and args.out is None:
        parser.error("--summarise reads the runs of --out DIR")
    out = args.out or Path(tempfile.mkdtemp(prefix="rlvr-family-"))
    rows = [run_preset(p, args.steps, out, args.summarise) for p in args.presets]
    print(f"\n{args.steps} steps each, embedded SmolLM2-135M, arithmetic level 1, run dirs in {out}")
    print(f"{'preset':<14}{'reward@1':>10}{'reward last3':>14}{'no NaN':>8}{'s/step':>8}{'extra prompts':>15}"
          f"{'tied last3':>12}")
    for r in rows:
        print(f"{r['preset']:<14}{r['reward_first']:>10.3f}{r['reward_last3']:>14.3f}{str(r['finite']):>8}"
              f"{r['s_per_step']:>8.1f}{r['extra_prompts']:>15d}{r['zero_std_last3']:>12.2f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
