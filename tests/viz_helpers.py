"""Synthetic run directories for the `rlvr report` / `rlvr dashboard` tests: the files a GRPO run writes, with
the keys it writes, made up deterministically (no model, no training)."""
from __future__ import annotations

import json
import math
from pathlib import Path

CONFIG = "max_steps: 100\nrollout:\n  group_size: 8\nalgorithm:\n  beta: 0.04\n  clip_epsilon: 0.2\n"


def metrics_row(step: int) -> dict:
    """One training row. grad_norm is null (non-finite) at step 7; reflection_rate starts at step 3 (a key that
    appears mid-run); every 25th step also holds eval/* keys (a periodic evaluation)."""
    row = {"step": step, "elapsed_s": round(2.5 * step, 3),
           "reward_mean": round(0.2 + 0.5 * (1 - math.exp(-step / 30)), 6),
           "reward_std": 0.3, "loss": round(0.01 * math.sin(step), 6), "policy_loss": round(0.009 * math.sin(step), 6),
           "kl": round(0.0005 * step, 6), "clip_fraction": round(0.01 + 0.001 * (step % 5), 6),
           "clip_fraction_low": round(0.004 + 0.0005 * (step % 3), 6), "clip_fraction_high": 0.006,
           "entropy": round(1.5 - 0.005 * step, 6), "grad_norm": None if step == 7 else round(1 + 0.1 * (step % 4), 6),
           "lr": 1e-6, "completion_length": 80.0 + step, "completion_length_max": 200.0,
           "truncated_fraction": 0.05, "zero_std_fraction": round(0.5 - 0.002 * step, 6), "tokens_per_s": 900.0 + step,
           "peak_memory_gb": 3.8, "reward/math": round(0.3 + 0.002 * step, 6), "outcomes/math/correct": step % 9,
           "outcomes/math/wrong": 8 - step % 9, "time/rollout_s": 1.2, "time/logprobs_s": 0.3,
           "time/verify_wait_s": 0.01, "time/advantages_s": 0.001, "time/train_s": 0.9, "time/sync_s": 0.0,
           "skipped": False, "note": "text values are not plotted"}
    if step >= 3:
        row["reflection_rate"] = round(0.01 * (step % 7), 6)
    if step % 25 == 0:
        row.update({"eval/pass@1": round(0.2 + step / 500, 6), "eval/pass@4": round(0.4 + step / 400, 6),
                    "eval/greedy": round(0.25 + step / 450, 6)})
    return row


def grpo(rewards: list[float], eps: float = 1e-4) -> list[float]:
    """Reference advantages for the synthetic groups (Bessel std, as rlvr.algorithms.advantages.grpo_advantages)."""
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
    return [0.0 if std == 0 else (r - mean) / (std + eps) for r in rewards]


def group_row(step: int, size: int, tokens: int, ratios: bool) -> dict:
    """Half the group right (reward 1), half wrong; token ratios past both clip bounds on a few tokens."""
    rewards = [1.0 if j % 2 == 0 else 0.0 for j in range(size)]
    completions = []
    for j, (reward, advantage) in enumerate(zip(rewards, grpo(rewards))):
        words = [f"w{(j * 7 + k) % 50} " for k in range(tokens - 1)] + ["Answer: 42" if reward else "Answer: 7"]
        token_ratios = [1.5 if k % 17 == 0 else 0.6 if k % 19 == 0 else round(1 + 0.01 * (k % 5), 4)
                        for k in range(tokens)]
        verdict = {"outcome": "correct" if reward else "wrong", "score": reward, "detail": "compared as numbers"}
        completions.append({"text": "".join(words), "reward": reward, "advantage": advantage, "truncated": j == 1,
                            "verdicts": {"math": verdict}, "tokens": words, "token_advantages": [advantage] * tokens,
                            "token_ratios": token_ratios if ratios else None})
    return {"step": step, "prompt_id": f"arith/train/{step}", "question": f"What is 6 * 7? (step {step})",
            "reference": "42", "clip_low": 0.2, "clip_high": 0.28, "completions": completions}


def sample_rows(step: int, count: int) -> list[dict]:
    rows = []
    for k in range(count):
        reward = 1.0 if k % 3 == 0 else 0.0
        rows.append({"step": step, "prompt_id": f"arith/train/{step}-{k}", "question": f"What is {k} + {step}?",
                     "reference": str(k + step), "completion": f"I add them. Answer: {k + step if reward else -1}",
                     "reward": reward, "verdicts": {"math": {"outcome": "correct" if reward else "wrong",
                                                             "score": reward, "detail": f"sample {k}"}}})
    return rows


def write_lines(path: Path, rows: list[dict]) -> None:
    with path.open("a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def make_run(path: Path, steps: int = 100, samples: int = 8, group_size: int = 8, tokens: int = 200,
             groups: bool = True, final_eval: bool = True) -> Path:
    """A run directory as `rlvr train` leaves it after `steps` steps (and its final evaluation row)."""
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(CONFIG)
    write_lines(path / "metrics.jsonl", [metrics_row(s) for s in range(1, steps + 1)])
    if final_eval:  # the end-of-run evaluation: only step, elapsed_s and eval/* keys, the last step's number
        write_lines(path / "metrics.jsonl", [{"step": steps, "elapsed_s": 2.5 * steps + 9, "eval/pass@1": 0.45,
                                              "eval/pass@4": 0.7, "eval/greedy": 0.5}])
        write_lines(path / "eval.jsonl", [{"step": steps, "pass@1": 0.45, "pass@4": 0.7, "greedy": 0.5,
                                           "outcomes": {"math/correct": 9}, "per_problem_pass@1": [0.5, 0.4]}])
    write_lines(path / "samples.jsonl", [row for s in range(1, steps + 1) for row in sample_rows(s, samples)])
    if groups:
        write_lines(path / "groups.jsonl",
                    [group_row(s, group_size, tokens, ratios=s > 1) for s in range(1, steps + 1)])
    return path


def expected_points(run: Path, key: str) -> list[tuple[int, float]]:
    """(step, value) of every finite number under `key` in metrics.jsonl: what a chart must draw."""
    out = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out.append((row["step"], float(value)))
    return out
