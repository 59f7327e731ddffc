"""Packing a micro-batch's real tokens into one sequence without padding.

Layout: the tokens the micro-batch's distinct prompts all open with, once (MIN_SHARED_PREFIX); then for each
distinct prompt, the rest of the prompt once (its real tokens, left padding dropped), then each of its completion
rows' tokens; all of it one sequence. A block mask lets a token attend to
- a shared-prefix token at an earlier or equal position,
- a prompt token: of its own prompt, at an earlier or equal position, and
- a completion token: of its own row, at an earlier or equal position,
so each completion sees exactly what it sees when concatenated to its prompt and run alone, and positions
restart at 0 for each prompt (as position_ids_from_mask gives them for left-padded rows).

Only the hidden states that predict a completion token are read back: for token t of a row, the state of token
t - 1 of that row, or the last prompt token's for t = 0. The row's last token predicts nothing, so it is left out
of the packed inputs. Index bookkeeping only; no model code here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AttentionBlocks:
    """The packed sequence's attention cut into blocks that share their keys (blocked_attention.py): one for the
    shared prompt opening if any, one per distinct prompt (queries: its tokens; keys: the shared opening and its
    tokens) and one per completion row (queries: its tokens; keys: its prompt's tokens, then its own). Attention
    then costs sum over blocks of queries x keys instead of T x T: on the benchmark's batch ~16 x 24 x 73 +
    2 x 49 x 49 ~ 33k score entries instead of 441^2 ~ 194k."""

    query_index: torch.Tensor  # [K, Q] token index of each block's queries (0 past its count)
    query_valid: torch.Tensor  # [K, Q] bool: a real query (padding queries' outputs are dropped)
    key_index: torch.Tensor  # [K, S] token index of each block's keys (0 past its count)
    allowed: torch.Tensor  # [K, Q, S] bool: the packed mask restricted to the block; a padding query may attend
    # its first key only, so no softmax row is empty (an all-masked row is NaN, and NaN survives a zero gradient)
    token_slot: torch.Tensor  # [T] where each token's output is in the flattened [K * Q] block queries (every
    # token is the query of exactly one block, so gathering by this puts the outputs back in sequence order)


@dataclass(frozen=True)
class Packed:
    input_ids: torch.Tensor  # [1, T] each distinct prompt, then its completions' tokens, without padding
    positions: torch.Tensor  # [1, T] position of each token within its own prompt + completion
    allowed: torch.Tensor  # [1, T, T] bool: query t may attend key u
    state_index: torch.Tensor  # [N] for each real completion token (row-major over the mask): the index into the
    # [T] hidden states of the state that predicts it
    blocks: AttentionBlocks  # the same mask as blocks of shared keys

    @property
    def tokens(self) -> int:
        return int(self.input_ids.numel())


def is_prefix_mask(completion_mask: torch.Tensor) -> bool:
    """[B, C] -> does every row's mask read 1...1 0...0? (Packing reads row i's tokens as its first n_i.)"""
    m = completion_mask.bool()
    return bool((m[:, 1:] <= m[:, :-1]).all()) if m.shape[1] > 1 else True


def packed_tokens(prompt_mask: torch.Tensor, rows: torch.Tensor, completion_mask: torch.Tensor) -> int:
    """Real tokens `pack` would lay out (to cut a micro-batch into packs of bounded size first)."""
    lengths = completion_mask.sum(dim=1)
    return int(prompt_mask[torch.unique(rows)].sum() + (lengths - 1).clamp(min=0).sum())


# Distinct prompts of a micro-batch that open with the same tokens (a chat template's system turn and the task's
# fixed wording: 27 of the benchmark's 47-token prompts) have that prefix laid out once, attended by all of them:
# fewer tokens through every matrix product of the update and the reference forward. Shorter common prefixes are
# left alone (the saving would not pay for one more attention block).
MIN_SHARED_PREFIX = 4


@dataclass
class _Sequence:
    """One run of the packed sequence while it is being laid out: the shared prefix, or a distinct prompt's own
    tokens (after the shared prefix) with its completion rows."""
    ids: list[torch.Tensor]
    positions: list[torch.Tensor]
    owner: list[torch.Tensor]  # -1 for prompt tokens, else the completion row
    shared: bool = False  # the common prefix every other run attends to

    @property
    def length(self) -> int:
        return sum(t.numel() for t in self.ids)


def shared_prefix_length(prompts: list[torch.Tensor]) -> int:
    """Tokens that every one of >= 2 prompts opens with, if at least MIN_SHARED_PREFIX; else 0."""
    if len(prompts) < 2:
        return 0
    n = min(p.numel() for p in prompts)
    same = torch.stack([p[:n] == prompts[0][:n] for p in prompts[1:]]).all(dim=0)  # [n]
    length = n if bool(same.all()) else int((~same).nonzero()[0])
    return length if length >= MIN_SHARED_PREFIX else 0


def _run(ids: torch.Tensor, first_position: int, owner: int, shared: bool = False) -> _Sequence:
    n, device = ids.numel(), ids.device
    return _Sequence([ids], [first_position + torch.arange(n, device=device)], [torch.full((n,), owner, device=device)],
                     shared)


def _layout(prompt_ids, prompt_mask, rows, completion_ids, completion_mask):
    """-> (runs in order, [(run number, offsets)] locating each real completion token's predicting state)."""
    device = completion_ids.device
    real = {p: prompt_ids[p][prompt_mask[p].bool()] for p in torch.unique(rows).tolist()}
    common = shared_prefix_length(list(real.values()))
    runs = [_run(next(iter(real.values()))[:common], 0, -1, shared=True)] if common else []
    order = {}
    for p, ids in real.items():
        order[p] = len(runs)
        runs.append(_run(ids[common:], common, -1))
    states: list[tuple[int, torch.Tensor]] = []
    for i, n in enumerate(completion_mask.sum(dim=1).long().tolist()):
        if n == 0:
            continue
        p = int(rows[i])
        run, start = runs[order[p]], real[p].numel()
        # token 0 is predicted by the prompt's last token: in the prompt's own run, or the shared prefix's last
        last = (order[p], start - common - 1) if start > common else (0, common - 1)
        states.append((last[0], torch.tensor([last[1]], device=device)))
        states.append((order[p], run.length + torch.arange(n - 1, device=device)))
        run.ids.append(completion_ids[i, :n - 1])  # the last token predicts nothing we score
        run.positions.append(start + torch.arange(n - 1, device=device))
        run.owner.append(torch.full((n - 1,), i, device=device))
    return runs, states


def pack(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, rows: torch.Tensor, completion_ids: torch.Tensor,
         completion_mask: torch.Tensor) -> Packed:
    """prompt_ids/mask [P, Lp] (left-padded), rows [B] (each completion's prompt row), completion_ids/mask [B, C]
    (masks are prefixes: is_prefix_mask) -> the packed layout: the distinct prompts' shared prefix (if any), then
    each distinct prompt's own tokens followed by its completions, all in one sequence. (One padded sequence per
    prompt was measured slower on the benchmark's batch: the padding cost more in the matrix products than the
    smaller attention squares saved.)"""
    runs, states = _layout(prompt_ids, prompt_mask, rows, completion_ids, completion_mask)
    device = completion_ids.device
    starts = torch.tensor([0] + [run.length for run in runs], device=device).cumsum(dim=0)
    segment = torch.cat([torch.full((run.length,), -1 if run.shared else k, device=device)
                         for k, run in enumerate(runs)])
    position = torch.cat([t for run in runs for t in run.positions])
    owner = torch.cat([t for run in runs for t in run.owner])
    causal = position[None, :] <= position[:, None]  # [T, T] key position <= query position
    own_row_or_prompt = (owner[None, :] == -1) | (owner[None, :] == owner[:, None])
    # every query sees the shared prefix before it; otherwise only its own prompt's run (and its own row there)
    allowed = causal & ((segment[None, :] == -1) | ((segment[None, :] == segment[:, None]) & own_row_or_prompt))
    index = [int(starts[k]) + offsets for k, offsets in states]
    state_index = torch.cat(index) if index else torch.zeros(0, dtype=torch.long, device=device)
    block_of = segment * (completion_ids.shape[0] + 1) + owner + 1  # one id per (run, owner) pair
    return Packed(input_ids=torch.cat([t for run in runs for t in run.ids])[None], positions=position[None],
                  allowed=allowed[None], state_index=state_index, blocks=attention_blocks(allowed, block_of))


def attention_blocks(allowed: torch.Tensor, block_of: torch.Tensor) -> AttentionBlocks:
    """[T, T] mask and [T] block id of each query token -> the blocks; a block's keys are every key any of its
    queries may attend, so restricting the mask to them loses nothing."""
    queries = [torch.nonzero(block_of == b)[:, 0] for b in torch.unique(block_of)]
    keys = [torch.nonzero(allowed[q].any(dim=0))[:, 0] for q in queries]
    n_q, n_k, device = max(len(q) for q in queries), max(len(k) for k in keys), allowed.device
    query_index = torch.zeros(len(queries), n_q, dtype=torch.long, device=device)
    key_index = torch.zeros(len(queries), n_k, dtype=torch.long, device=device)
    query_valid = torch.zeros(len(queries), n_q, dtype=torch.bool, device=device)
    block_allowed = torch.zeros(len(queries), n_q, n_k, dtype=torch.bool, device=device)
    for b, (q, k) in enumerate(zip(queries, keys)):
        query_index[b, :len(q)], key_index[b, :len(k)], query_valid[b, :len(q)] = q, k, True
        block_allowed[b, :len(q), :len(k)] = allowed[q][:, k]
        block_allowed[b, len(q):, 0] = True
    token_slot = torch.empty(allowed.shape[0], dtype=torch.long, device=device)
    token_slot[query_index[query_valid]] = torch.nonzero(query_valid.flatten())[:, 0]
    return AttentionBlocks(query_index, query_valid, key_index, block_allowed, token_slot)


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[1, T, T] bool -> [1, 1, T, T] additive mask (0 where allowed, the dtype's lowest value elsewhere), the form
    every attention implementation of transformers accepts as a ready 4D mask (eager adds it to the scores)."""
    lowest = torch.finfo(dtype).min
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, lowest)[:, None]


def row_groups(prompt_mask: torch.Tensor, rows: torch.Tensor, completion_mask: torch.Tensor, budget: int
               ) -> list[torch.Tensor]:
    """Row indices cut, in order, into consecutive runs whose packs hold at most `budget` tokens each (a single row
    over the budget is a pack of its own)."""
    lengths = (completion_mask.sum(dim=1) - 1).clamp(min=0).tolist()
    prompt_lengths = prompt_mask.sum(dim=1).tolist()
    groups, current, seen, size = [], [], set(), 0
    for i, n in enumerate(lengths):
        p = int(rows[i])
        extra = n + (0 if p in seen else prompt_lengths[p])
        if current and size + extra > budget:
            groups.append(current)
            current, seen, size = [], set(), 0
            extra = n + prompt_lengths[p]
        current.append(i)
        seen.add(p)
        size += extra
    if current:
        groups.append(current)
    return [torch.tensor(g, dtype=torch.long, device=rows.device) for g in groups]
