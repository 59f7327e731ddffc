"""`rlvr eval --scaling`: accuracy against the number of samples N and the thinking budget B.

Against N, every point comes from ONE set of max(N) samples per held-out problem, through the exact estimators
of evaluation/voting.py: pass@N (any of N correct: the ceiling), maj@N (majority vote of N) and best-of-N (highest total
training reward of N). So the curves differ only by how an answer is chosen, never by sampling noise between
points. Against B, each budget draws eval.samples samples per problem with the think section capped at B
(rlvr.evaluation.budget) and reports pass@1; the uncapped point comes from the N samples.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rlvr.config.run import EvalConfig
from rlvr.evaluation.budget import BudgetedEngine
from rlvr.evaluation.evaluate import ProblemSamples, collect, gated_names, problem_samples, summarize
from rlvr.rewards.rewarder import Rewarder
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.types import Prompt


@dataclass(frozen=True)
class NPoint:
    n: int
    pass_at: float  # pass@N
    majority: float  # maj@N
    best_of: float  # best-of-N


@dataclass(frozen=True)
class BudgetPoint:
    budget: int | None  # B in tokens; None = no cap
    pass_at_1: float
    mean_length: float  # completion tokens, forced delimiter included
    forced: float  # share of samples whose </think> the budget wrote


@dataclass(frozen=True)
class ScalingResult:
    problems: int
    samples: int  # samples per problem behind the N curve (max N)
    budget_samples: int  # samples per problem and budget behind the B curve
    by_n: tuple[NPoint, ...]
    by_budget: tuple[BudgetPoint, ...]

    def as_json(self) -> dict[str, Any]:
        return {"problems": self.problems, "samples": self.samples, "budget_samples": self.budget_samples,
                "by_n": [{"n": p.n, "pass@n": p.pass_at, "maj@n": p.majority, "best_of_n": p.best_of}
                         for p in self.by_n],
                "by_budget": [{"budget": p.budget, "pass@1": p.pass_at_1, "mean_length": p.mean_length,
                               "forced": p.forced} for p in self.by_budget]}


def n_curve(samples: Sequence[ProblemSamples], n_list: Sequence[int]) -> tuple[NPoint, ...]:
    """maj@N, best-of-N and pass@N for each N, all from the same samples (each problem needs >= max(N))."""
    summary = summarize(samples, n_list)
    return tuple(NPoint(n, summary.pass_at[n], summary.maj_at[n], summary.best_of[n]) for n in sorted(set(n_list)))


def budget_point(budget: int | None, samples: Sequence[ProblemSamples], forced: float) -> BudgetPoint:
    summary = summarize(samples, [1], vote=False)
    return BudgetPoint(budget, summary.pass_at[1], summary.mean_length, forced)


def run_scaling(engine: HFRolloutEngine, rewarder: Rewarder, prompts: list[Prompt], config: EvalConfig,
                max_new_tokens: int, n_list: Sequence[int], budgets: Sequence[int], answer_mode: str,
                say=lambda text: None) -> ScalingResult:
    """Sample max(n_list) per prompt once for the N curve; then config.samples per prompt for each budget."""
    if not prompts:
        raise ValueError("scaling needs at least one held-out problem")
    sampling = SamplingParams(config.temperature, config.top_p, max_new_tokens)
    most = max(n_list)
    say(f"sampling {most} completions for each of {len(prompts)} problems")
    samples = collect(engine, rewarder, prompts, most, sampling, config.batch_size, answer_mode)
    points = [budget_point(None, samples, 0.0)]
    for budget in sorted(set(budgets)):
        say(f"thinking budget {budget}: {config.samples} samples per problem")
        capped = BudgetedEngine(engine, budget, config.answer_budget)
        forced: list[bool] = []
        found = []
        for start in range(0, len(prompts), config.batch_size):  # one chunk at a time, to count forced rows
            batch = capped.generate(prompts[start:start + config.batch_size], config.samples, sampling)
            forced += getattr(batch, "forced").tolist()
            found += problem_samples(batch, rewarder.score_rollout(batch), gated_names(rewarder), answer_mode)
        points.append(budget_point(budget, found, sum(forced) / len(forced)))
    return ScalingResult(len(prompts), most, config.samples, n_curve(samples, n_list), tuple(points))


def table(result: ScalingResult) -> str:
    """Two small text tables: accuracy against N, and against the thinking budget."""
    lines = [f"accuracy against N ({result.problems} problems, {result.samples} samples each, exact estimators)",
             f"{'N':>5} | {'maj@N':>6} | {'best-of-N':>9} | {'pass@N':>6}"]
    lines += [f"{p.n:>5} | {p.majority:>6.3f} | {p.best_of:>9.3f} | {p.pass_at:>6.3f}" for p in result.by_n]
    lines += ["", f"accuracy against the thinking budget ({result.budget_samples} samples per problem; "
                  "none = the N samples, uncapped)",
              f"{'B':>5} | {'pass@1':>6} | {'length':>6} | {'forced':>6}"]
    lines += [f"{'none' if p.budget is None else p.budget:>5} | {p.pass_at_1:>6.3f} | {p.mean_length:>6.1f} | "
              f"{p.forced:>6.2f}" for p in result.by_budget]
    return "\n".join(lines)


def write_csv(result: ScalingResult, path: Path) -> Path:
    """Long format, one row per point and metric: curve (n|budget), x, metric, value."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["curve", "x", "metric", "value"])
        for p in result.by_n:
            out.writerows([["n", p.n, "maj@n", p.majority], ["n", p.n, "best_of_n", p.best_of],
                           ["n", p.n, "pass@n", p.pass_at]])
        for b in result.by_budget:
            out.writerow(["budget", "none" if b.budget is None else b.budget, "pass@1", b.pass_at_1])
    return path


def write_plot(result: ScalingResult, stem: Path) -> tuple[Path, str | None]:
    """stem.png via matplotlib when it is installed, else stem.csv; returns (path, note for the user)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        path = write_csv(result, stem.with_suffix(".csv"))
        return path, "matplotlib is not installed (pip install matplotlib for a PNG); wrote the points as CSV"
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    ns = [p.n for p in result.by_n]
    for label, field in (("maj@N", "majority"), ("best-of-N", "best_of"), ("pass@N", "pass_at")):
        left.plot(ns, [getattr(p, field) for p in result.by_n], marker="o", label=label)
    left.set(xscale="log", xlabel="samples N", ylabel="accuracy", title="more samples")
    left.legend()
    capped = [p for p in result.by_budget if p.budget is not None]
    right.plot([p.budget for p in capped], [p.pass_at_1 for p in capped], marker="o", label="pass@1 with budget B")
    uncapped = [p.pass_at_1 for p in result.by_budget if p.budget is None]
    if uncapped:
        right.axhline(uncapped[0], linestyle="--", color="gray", label="no cap")
    right.set(xscale="log", xlabel="thinking budget B (tokens)", ylabel="accuracy", title="longer thinking")
    right.legend()
    fig.tight_layout()
    path = stem.with_suffix(".png")
    fig.savefig(path)
    plt.close(fig)
    return path, None
