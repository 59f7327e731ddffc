"""What one step writes to metrics.jsonl and samples.jsonl."""
from __future__ import annotations

import json
from typing import Any, Sequence

from rlvr.agents.protocol import STOP_REASONS, EpisodeRecord
from rlvr.algorithms.advantages import tied_groups
from rlvr.algorithms.correction import CorrectionStats
from rlvr.metrics.diagnostics import peak_memory_gb, reflection_rate, tokens_per_second
from rlvr.rewards.rewarder import mean_scores, outcome_counts
from rlvr.training.update import UpdateStats
from rlvr.types import Prompt, RolloutBatch, ScoredBatch, row_extent


def step_record(step: int, rollouts: RolloutBatch, scored: ScoredBatch, stats: UpdateStats,
                timings: dict[str, float], lr: float, service_stats: dict[str, int],
                extra: dict[str, float | int], reflection_phrases: Sequence[str] = ()) -> dict:
    """One metrics.jsonl line. `extra`: what the step's optional parts add (dynamic sampling, curriculum,
    KL in the reward, critic), already named."""
    lengths = rollouts.completion_mask.sum(dim=1).float()
    signals = {"reflection_rate": reflection_rate(rollouts.completions, reflection_phrases),
               "tokens_per_s": tokens_per_second(int(lengths.sum()), sum(timings.values())),
               "peak_memory_gb": peak_memory_gb(rollouts.completion_mask.device.type)}
    # With G = 1 (PPO) there are no groups to tie: the metric is left out rather than always 1.
    tied = ({"zero_std_fraction": tied_groups(scored.rewards, rollouts.group_size, scored.scorable).float().mean()
             .item()} if rollouts.group_size > 1 else {})
    return {
        "step": step, "reward_mean": scored.rewards.mean().item(), "reward_std": scored.rewards.std().item(),
        "loss": stats.loss, "policy_loss": stats.policy_loss, "kl": stats.kl, "clip_fraction": stats.clip_fraction,
        "clip_fraction_low": stats.clip_fraction_low, "clip_fraction_high": stats.clip_fraction_high,
        "kl_max": stats.kl_max,
        "entropy": stats.entropy, "grad_norm": stats.grad_norm, "lr": lr, "skipped": stats.skipped,
        "completion_length": lengths.mean().item(), "completion_length_max": lengths.max().item(),
        "prompt_length": mean_prompt_tokens(rollouts.prompt_mask),  # the update's tokens (bench FLOP/s)
        "truncated_fraction": rollouts.truncated.float().mean().item(),
        **tied,
        **signals,
        **{f"reward/{k}": v for k, v in mean_scores(scored).items()},
        **{f"outcomes/{k}": v for k, v in outcome_counts(scored).items()},
        "unscorable": int((~scored.scorable).sum()),
        **{f"time/{k}_s": round(v, 3) for k, v in timings.items()},
        **{f"reward_service/{k}": v for k, v in service_stats.items()},
        **correction_metrics(stats.correction),
        **episode_metrics(rollouts),
        **extra,
    }


def mean_prompt_tokens(prompt_mask) -> float:
    """prompt_mask [N, P] (1 = real token, left padding 0) -> the mean real tokens of a prompt."""
    return prompt_mask.sum(dim=1).float().mean().item()


def correction_metrics(stats: CorrectionStats | None) -> dict[str, float]:
    """Rollout correction: the weights' mean and max, the share of loss tokens masked, and the
    trainer-vs-engine mismatch KL the agreement check compares with its threshold."""
    if stats is None:
        return {}
    return {"correction/mean_weight": stats.mean_weight, "correction/max_weight": stats.max_weight,
            "correction/masked_share": stats.masked_share, "correction/mismatch_kl": stats.mismatch_kl}


def sample_rows(step: int, rollouts: RolloutBatch, scored: ScoredBatch, limit: int) -> list[dict]:
    rows = []
    stride = max(1, rollouts.size // max(limit, 1))  # spread over groups, not the first group's samples
    for i in list(range(0, rollouts.size, stride))[:limit]:
        prompt = rollouts.prompt_of(i)
        rows.append({"step": step, "prompt_id": prompt.id, "question": prompt.messages[-1]["content"],
                     "reference": prompt.reference, "completion": rollouts.completions[i],
                     "truncated": bool(rollouts.truncated[i]),  # `rlvr verify` re-checks it as training did
                     "reward": scored.rewards[i].item(),
                     "verdicts": {name: v[i].as_json() for name, v in scored.verdicts.items()},
                     **({} if rollouts.turns is None else episode_sample(rollouts.turns.records[i], prompt))})
    return rows


def episode_sample(record: EpisodeRecord, prompt: Prompt) -> dict[str, Any]:
    """What an episode's samples.jsonl row adds: the episode, and the prompt's columns, which `rlvr
    verify --verifier environment` hands back to score_state (examples/capitals.py reads prompt.columns). A value
    JSON cannot hold is written as its repr: a log line must never stop a run."""
    return {"episode": record.as_json(), "columns": json.loads(json.dumps(prompt.columns, default=repr))}


def episode_metrics(rollouts: RolloutBatch) -> dict[str, float]:
    """Multi-turn episodes: turns, tool calls and environment tokens per episode, the share of calls
    that were valid, and the share of episodes per stop reason."""
    if rollouts.turns is None:
        return {}
    records, n = rollouts.turns.records, max(rollouts.size, 1)
    valid, invalid = sum(r.valid_calls for r in records), sum(r.invalid_calls for r in records)
    inside = row_extent(rollouts.completion_mask).sum() - rollouts.completion_mask.sum()
    reasons = [r.stop_reason for r in records]
    turns = sum(len(r.turn_rewards) for r in records)  # one reward per model turn, the final answer included
    return {"episode/turns_mean": turns / n,
            "episode/calls_mean": (valid + invalid) / n,
            "episode/valid_call_share": valid / (valid + invalid) if valid + invalid else 0.0,
            "episode/env_tokens_mean": float(inside) / n,
            # every stop reason, zeros included, so that the columns stay the same from step to step (as
            # rewards.outcome_counts): a reason absent at one step would leave a gap in its curve, not a 0
            **{f"episode/stop_{reason}": reasons.count(reason) / n
               for reason in (*STOP_REASONS, *sorted(set(reasons) - set(STOP_REASONS)))}}
