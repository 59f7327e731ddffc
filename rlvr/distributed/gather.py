"""The step's global view for metrics.jsonl and samples.jsonl: every rank's rollouts and rewards on rank 0
(issue #11, item 1: metrics over the global batch, not rank 0's share).

The records are small (token ids, masks, verdicts of one step), so they are pickled with all_gather_object;
the tensors the update needs never travel this way.
"""
from __future__ import annotations

import torch

from rlvr.distributed.context import DistContext
from rlvr.types import RolloutBatch, ScoredBatch


def _pad_right(t: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(t, (0, width - t.shape[1]))


def _pad_left(t: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(t, (width - t.shape[1], 0))


def merge_rollouts(parts: list[RolloutBatch]) -> RolloutBatch:
    """Rank-ordered concatenation: prompts stay left-padded (mask 0 on the padding), completions right-padded."""
    if len(parts) == 1:
        return parts[0]
    p = max(r.prompt_ids.shape[1] for r in parts)
    c = max(r.completion_ids.shape[1] for r in parts)
    cat = torch.cat
    return RolloutBatch(
        prompts=[prompt for r in parts for prompt in r.prompts], group_size=parts[0].group_size,
        prompt_ids=cat([_pad_left(r.prompt_ids, p) for r in parts]),
        prompt_mask=cat([_pad_left(r.prompt_mask, p) for r in parts]),
        completion_ids=cat([_pad_right(r.completion_ids, c) for r in parts]),
        completion_mask=cat([_pad_right(r.completion_mask, c) for r in parts]),
        sampling_logprobs=cat([_pad_right(r.sampling_logprobs, c) for r in parts]),
        completions=[text for r in parts for text in r.completions], truncated=cat([r.truncated for r in parts]))


def merge_scored(parts: list[ScoredBatch]) -> ScoredBatch:
    if len(parts) == 1:
        return parts[0]
    names = parts[0].verdicts.keys()
    return ScoredBatch(rewards=torch.cat([s.rewards for s in parts]), scorable=torch.cat([s.scorable for s in parts]),
                       verdicts={n: [v for s in parts for v in s.verdicts[n]] for n in names},
                       scores={n: torch.cat([s.scores[n] for s in parts]) for n in parts[0].scores})


def _cpu(rollouts: RolloutBatch) -> RolloutBatch:
    move = lambda t: t.detach().cpu()  # noqa: E731
    return RolloutBatch(rollouts.prompts, rollouts.group_size, move(rollouts.prompt_ids), move(rollouts.prompt_mask),
                        move(rollouts.completion_ids), move(rollouts.completion_mask),
                        move(rollouts.sampling_logprobs), rollouts.completions, move(rollouts.truncated))


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
    return (merge_rollouts([r for r, _ in everything]), merge_scored([s for _, s in everything]),
            {k: int(v) for k, v in zip(service_keys, totals)}, {**extra, **dict(zip(keys, means))})
