"""What the dashboard's group view shows: one prompt's G completions per step, with each token's
advantage and the ratio pi_new / pi_old the step's update left on it. groups.jsonl gets one such row per step.

The ratio is measured after the update on the logged group only (one no-gradient forward of G rows): at mu = 1 the
loss itself only ever sees ratio 1, so this is where a user sees how far one step moved each token, and which tokens
a further pass (mu > 1) or clip range would stop. pi_old is the scoring forward's when there was one, else the
sampler's log-probs, which are pi_old's at top_p = 1 (same weights, same temperature); under top-p they are of the
renormalised nucleus, so no ratio is shown then rather than a wrong one.
"""
from __future__ import annotations

from typing import Callable

import torch

from rlvr.algorithms.advantages import tied_groups
from rlvr.algorithms.loss import KL_ESTIMATORS
from rlvr.types import Outcome, RolloutBatch, ScoredBatch, row_extent

# rows (a [G] long index into the batch) -> log-probs [G, C] of the current (updated) policy
Rescore = Callable[[torch.Tensor], torch.Tensor]


def pick_group(rewards: torch.Tensor, group_size: int, scorable: torch.Tensor, step: int) -> int:
    """A group whose rewards differ (the ones that teach), a different one each step when there are several;
    group 0 when every group tied."""
    untied = (~tied_groups(rewards, group_size, scorable)).nonzero().flatten().tolist()
    return untied[step % len(untied)] if untied else 0


def token_ratios(old: torch.Tensor | None, sampled: torch.Tensor, top_p: float, rows: torch.Tensor,
                 rescore: Rescore | None) -> torch.Tensor | None:
    """[G, C] pi_new / pi_old on the group's tokens, or None when pi_old is not known exactly (see the module doc)
    or nothing can rescore (torchrun: the weights are sharded across ranks)."""
    if rescore is None or (old is None and top_p < 1):
        return None
    before = old[rows] if old is not None else sampled[rows]
    return torch.exp(rescore(rows) - before)


def token_kl(old: torch.Tensor | None, sampled: torch.Tensor, ref: torch.Tensor | None, top_p: float,
             rows: torch.Tensor, estimator: str | None) -> torch.Tensor | None:
    """[G, C] the per-token KL estimate the loss charged (beta times it), between the policy the first pass saw
    (pi_old) and the frozen reference; None when the loss holds no KL or pi_old is not known exactly (top-p)."""
    if estimator is None or ref is None or (old is None and top_p < 1):
        return None
    before = old[rows] if old is not None else sampled[rows]
    return KL_ESTIMATORS[estimator](before, ref[rows])


def decode_tokens(decode: Callable[[list[int]], str], ids: list[int], context: int = 8) -> list[str]:
    """Each token's share of the decoded text, so that "".join(pieces) reads as the text does.

    decode([id]) alone would be wrong twice: a byte-level BPE token holding part of a UTF-8 character (an emoji,
    "√", CJK) decodes to U+FFFD, and a SentencePiece token loses its leading space when decoded on its own. So each
    token is decoded after up to `context` tokens before it, and its piece is what it adds; a token that ends inside
    a character adds "" and the token that completes the character carries it."""
    pieces: list[str] = []
    done = 0  # ids[:done] are assigned their pieces; ids[done:k] end inside a character
    for k in range(len(ids)):
        start = max(0, done - context)
        text = decode(ids[start:k + 1])
        if text.endswith("\ufffd") and k + 1 < len(ids):
            pieces.append("")  # wait for the rest of the character
            continue
        before = decode(ids[start:done])
        pieces.append(text[len(before):] if text.startswith(before) else text)
        done = k + 1
    return pieces


def episode_view(record, sampled: torch.Tensor) -> dict:
    """A multi-turn episode's extras: which tokens the model sampled (the dashboard greys the
    environment's), and how the episode went."""
    return {"sampled": [int(x) for x in sampled.tolist()], "episode": record.as_json()}


def shown_values(ratios: torch.Tensor, sampled: torch.Tensor) -> list[float | None]:
    """A row's ratios (or KL), null on an episode's environment tokens: no policy sampled them, so what the forwards
    left there is no ratio (the dashboard reads null as uncoloured)."""
    return [round(x, 5) if s else None for x, s in zip(ratios.tolist(), sampled.tolist())]


def pass_rates(rollouts: RolloutBatch, scored: ScoredBatch) -> list[list]:
    """[[prompt_id, share of its scorable completions every verifier called correct], ...] for every group of the
    batch, tied ones included: the line's one shown group is picked among untied groups, so it alone would hide
    how many prompts the policy always or never solves (the explainer's difficulty view reads these). Dynamic
    sampling sets tied groups aside before the batch is made: stages.draw_batch collects these rates of every group
    it draws instead. A group with no scorable completion (its reference unreadable) has no rate and is left
    out."""
    g, out = rollouts.group_size, []
    scorable = scored.scorable.tolist()
    for group, prompt in enumerate(rollouts.prompts):
        rows = [row for row in range(group * g, (group + 1) * g) if scorable[row]]
        right = sum(all(v[row].outcome == Outcome.CORRECT for v in scored.verdicts.values()) for row in rows)
        if rows:
            out.append([prompt.id, right / len(rows)])
    return out


def group_row(step: int, rollouts: RolloutBatch, scored: ScoredBatch, advantages: torch.Tensor, group: int,
              decode: Callable[[list[int]], str], clip: tuple[float, float],
              ratios: torch.Tensor | None, kl: torch.Tensor | None = None, rates: list | None = None) -> dict:
    """One groups.jsonl line. advantages: [B] (one per completion) or [B, C] (per token, e.g. GAE); ratios and kl
    [G, C] (see token_ratios, token_kl). rates: the step's pass rates when the batch does not hold every group
    drawn (dynamic sampling), else computed from the batch."""
    g = rollouts.group_size
    prompt = rollouts.prompts[group]
    completions = []
    extents = row_extent(rollouts.completion_mask)  # an episode's environment turns lie inside its extent
    for j, row in enumerate(range(group * g, (group + 1) * g)):
        length = int(extents[row])
        ids = rollouts.completion_ids[row, :length].tolist()
        sampled = rollouts.completion_mask[row, :length]
        per_token = advantages[row, :length] if advantages.dim() == 2 else advantages[row].expand(length)
        if rollouts.turns is not None:  # environment tokens carry no advantage (0, not the -0.0 of a product)
            per_token = torch.where(sampled.bool(), per_token, 0.0)
        shown = (advantages[row] if advantages.dim() == 1 else per_token[sampled.bool()].mean() if length
                 else advantages.new_zeros(()))
        completions.append({
            "text": rollouts.completions[row], "reward": scored.rewards[row].item(),
            "advantage": shown.item(),
            "truncated": bool(rollouts.truncated[row]),
            "verdicts": {name: v[row].as_json() for name, v in scored.verdicts.items()},
            "tokens": decode_tokens(decode, ids),
            "token_advantages": [round(x, 5) for x in per_token.tolist()],
            "token_ratios": None if ratios is None else shown_values(ratios[j, :length], sampled),
            **({} if kl is None else {"token_kl": shown_values(kl[j, :length], sampled)}),  # lines stay as before
            **({} if rollouts.turns is None else episode_view(rollouts.turns.records[row], sampled)),
        })
    return {"step": step, "prompt_id": prompt.id, "question": prompt.messages[-1]["content"],
            "reference": prompt.reference, "clip_low": clip[0], "clip_high": clip[1], "completions": completions,
            "pass_rates": pass_rates(rollouts, scored) if rates is None else rates}
