"""Evaluation with the training verifiers: pass@1 as in the R1 paper (mean correctness of n samples per
problem at temperature 0.6, top-p 0.95), unbiased pass@k (Chen et al. 2021, Codex), greedy accuracy."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

import torch

from rlvr.config import EvalConfig
from rlvr.rewards import Rewarder
from rlvr.rollout.base import RolloutEngine, SamplingParams
from rlvr.types import Outcome, Prompt, ScoredBatch


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def correct_mask(scored: ScoredBatch, names: list[str] | None = None) -> torch.Tensor:
    """[B] bool: every verifier in `names` (default: all) said CORRECT (format and answer alike)."""
    gated = [scored.verdicts[name] for name in (names if names is not None else scored.verdicts)]
    rows = [all(v.outcome == Outcome.CORRECT for v in verdicts) for verdicts in zip(*gated)]
    return torch.tensor(rows, dtype=torch.bool)


@dataclass
class EvalResult:
    problems: int
    samples_per_problem: int
    temperature: float
    pass_at_1: float  # mean correctness of n samples per problem
    greedy: float  # accuracy of the greedy completion
    pass_at_k: dict[int, float] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)  # sampled completions, per verifier/outcome

    def as_json(self) -> dict:
        data = asdict(self)
        data["pass@1"] = data.pop("pass_at_1")
        data.update({f"pass@{k}": v for k, v in data.pop("pass_at_k").items()})
        return data


def _scored_chunks(engine: RolloutEngine, rewarder: Rewarder, prompts: list[Prompt], n: int,
                   sampling: SamplingParams, batch_size: int):
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start:start + batch_size]
        yield rewarder.score_rollout(engine.generate(chunk, n, sampling))


def evaluate(engine: RolloutEngine, rewarder: Rewarder, prompts: list[Prompt], config: EvalConfig,
             max_new_tokens: int, ks: tuple[int, ...] = ()) -> EvalResult:
    if not prompts:
        raise ValueError("evaluation needs at least one held-out problem")
    n = config.samples
    gated = [name for name, (_, weight) in rewarder.components.items() if weight > 0]  # weight 0: logged only
    sampled = SamplingParams(config.temperature, config.top_p, max_new_tokens)
    correct_counts: list[int] = []
    outcomes: Counter[str] = Counter()
    for scored in _scored_chunks(engine, rewarder, prompts, n, sampled, config.batch_size):
        correct_counts += correct_mask(scored, gated).view(-1, n).sum(dim=1).tolist()
        for name, verdicts in scored.verdicts.items():
            outcomes.update(f"{name}/{v.outcome.value}" for v in verdicts)
    greedy_hits = 0
    for scored in _scored_chunks(engine, rewarder, prompts, 1, SamplingParams(0.0, 1.0, max_new_tokens),
                                 config.batch_size):
        greedy_hits += int(correct_mask(scored, gated).sum())
    problems = len(prompts)
    return EvalResult(
        problems=problems, samples_per_problem=n, temperature=config.temperature,
        pass_at_1=sum(c / n for c in correct_counts) / problems, greedy=greedy_hits / problems,
        pass_at_k={k: sum(pass_at_k(n, c, k) for c in correct_counts) / problems for k in ks if k <= n},
        outcomes=dict(sorted(outcomes.items())))
