"""The step's global view for metrics.jsonl and samples.jsonl: every rank's rollouts and rewards on rank 0
(metrics over the global batch, not rank 0's share).

The records are small (token ids, masks, verdicts of one step), so they are pickled with all_gather_object;
the tensors the update needs never travel this way.
"""
from __future__ import annotations

from rlvr.distributed.context import DistContext
from rlvr.types import RolloutBatch, ScoredBatch, concat_groups  # the re-padding join dynamic sampling also uses


def _cpu(rollouts: RolloutBatch) -> RolloutBatch:
    move = lambda t: t.detach().cpu()  # noqa: E731
    return RolloutBatch(rollouts.prompts, rollouts.group_size, move(rollouts.prompt_ids), move(rollouts.prompt_mask),
                        move(rollouts.completion_ids), move(rollouts.completion_mask),
                        move(rollouts.sampling_logprobs), rollouts.completions, move(rollouts.truncated),
                        None if rollouts.turns is None else rollouts.turns.to("cpu"))  # episodes


def global_step_view(ctx: DistContext, rollouts: RolloutBatch, scored: ScoredBatch, service_stats: dict[str, int],
                     extra: dict[str, float | int]) -> tuple[RolloutBatch, ScoredBatch, dict[str, int], dict]:
    """(all ranks' rollouts, their rewards, reward-service counts summed, `extra` averaged over ranks).

    `extra` holds per-row means of the rank's share (shaped reward, KL in the reward); every rank holds the
    same number of rows, so the mean of the ranks' means is the global mean. Collective: every rank calls it.
    """
    if not ctx.enabled:
        return rollouts, scored, service_stats, extra
    everything = ctx.gather((_cpu(rollouts), scored))
    keys = sorted(k for k, v in extra.items() if isinstance(v, (int, float)))
    means = [v / ctx.world_size for v in ctx.sum([float(extra[k]) for k in keys])]
    service_keys = sorted(service_stats)
    totals = ctx.sum([float(service_stats[k]) for k in service_keys])
    merged, merged_scored = concat_groups(everything)
    return (merged, merged_scored, {k: int(v) for k, v in zip(service_keys, totals)},
            {**extra, **dict(zip(keys, means))})
