"""The sampler's prefill, with rows that open alike run once (multi-turn episodes).

An episode's second and later turns continue each row from its whole context: the prompt (~400 tokens on the
calculator and filesystem tasks, worked examples included), then its own earlier turns (~50 tokens each). The G rows
of a group share the prompt, and prefilling each row's context in full ran that prompt G times a turn: on this CPU
most of a calculator step's rollout time. Here consecutive rows that share an opening are cut into that opening,
run once per distinct opening with its KV cache gathered to the rows, and each row's own rest, run on top of it.
The result is the cache, mask and last logits that prefilling the whole contexts gives, to float tolerance
(tests/test_prefill.py); only the left padding sits between the opening and the rest instead of before both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rlvr.model.logprobs import position_ids_from_mask

# Openings shorter than this are not worth a second forward call.
MIN_SHARED = 16


@dataclass(frozen=True)
class SharedPrefix:
    """Openings of rows: prefix k is run once and row r continues prefix rows[r]."""

    ids: torch.Tensor  # [K, Lp] distinct openings, left-padded
    mask: torch.Tensor  # [K, Lp]
    rows: torch.Tensor  # [R] long: each row's opening


def left_pad(rows: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids [N, W], mask [N, W]) left-padded to the longest."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # host: filled row by row, moved once below
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # host: as above
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)  # host: as above
            mask[i, width - len(row):] = 1
    return ids.to(device), mask.to(device)


def _common_length(a: list[int], b: list[int], limit: int) -> int:
    n = min(limit, len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def split_contexts(contexts: list[list[int]], min_shared: int = MIN_SHARED
                   ) -> tuple[list[list[int]], list[int], list[list[int]]] | None:
    """-> (openings, each row's opening, each row's rest) over runs of consecutive rows that share at least
    `min_shared` leading tokens; every rest keeps at least one token (its last logits start the turn). None when
    no two rows share an opening (nothing to save). A row alone is its own run: its opening is all but its last token.
    """
    openings: list[list[int]] = []
    row_opening: list[int] = []
    rests: list[list[int]] = []
    shared_any, i = False, 0
    while i < len(contexts):
        common, j = len(contexts[i]) - 1, i + 1
        while j < len(contexts):
            length = min(_common_length(contexts[i], contexts[j], common), len(contexts[j]) - 1)
            if length < min_shared:
                break
            common, j = length, j + 1
        shared_any |= j - i > 1
        openings.append(contexts[i][:common])
        for row in contexts[i:j]:
            row_opening.append(len(openings) - 1)
            rests.append(row[common:])
        i = j
    if not shared_any or not all(openings):  # an empty opening would be an all-padding row (NaN attention)
        return None
    return openings, row_opening, rests


def prefill(model, ids: torch.Tensor, mask: torch.Tensor, shared: SharedPrefix | None = None
            ) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """-> (last-token logits [R, V], KV cache of the R rows, attention mask [R, W] the decode continues).

    Without `shared`, ids/mask [R, W] are the rows, run as one forward. With it they are the rows' rests [R, Ls]:
    the openings run first, their cache is gathered to the rows, and the rests run on top (positions continue
    from each row's opening, skipping the padding between)."""
    if shared is None:
        out = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask), use_cache=True,
                    logits_to_keep=1)
        return out.logits[:, -1], out.past_key_values, mask
    opened = model.base_model(input_ids=shared.ids, attention_mask=shared.mask,
                              position_ids=position_ids_from_mask(shared.mask), use_cache=True)
    cache = opened.past_key_values
    cache.batch_select_indices(shared.rows)
    full = torch.cat([shared.mask[shared.rows], mask], dim=1)
    positions = position_ids_from_mask(full)[:, shared.ids.shape[1]:]
    out = model(input_ids=ids, attention_mask=full, position_ids=positions, past_key_values=cache, use_cache=True,
                logits_to_keep=1)
    return out.logits[:, -1], out.past_key_values, full
