"""Which rows each optimizer step sees, and how they become micro-batches.

Order: every epoch is a permutation of the rows drawn from the seed and the epoch number alone (a string
seed, so it does not depend on PYTHONHASHSEED or on global RNG state); the epochs are concatenated and each
optimizer step takes the next sft.batch_size rows, the last one fewer. A resumed run rebuilds the stream and
skips what was drawn (rlvr.checkpoint.state.CountingStream).

Micro-batches: within a step the rows are sorted by length and cut into optimizer.micro_batch_size rows.
The loss is normalised by the step's assistant-token count (rlvr/sft/step.py), so the step's gradient does
not depend on the order or the cut; sorting only removes padding. Two layouts:
  * length_grouped: one row per example, right-padded to the longest of its micro-batch;
  * padding_free: a micro-batch's rows packed into one row whose position ids restart at 0 for every
    example. With no attention mask given, transformers (>= 4.54, masking_utils.find_packed_sequence_indices)
    reads the restarts as sequence boundaries and builds a block-diagonal causal mask for sdpa and eager
    attention as well as flash-attention, so no token attends to another example (tests/test_sft.py checks
    the loss equals the padded one). Models with their own masking code (trust_remote_code) may not do this;
  * shared_prefix: each row cut at its first trained token into a prompt and a completion, and the micro-batch
    run as the RL update runs its rollouts (rlvr/model/logprobs.completion_logprobs): packed without padding, the
    opening that the rows' prompts share (system turn, one-shot example: ~75 of a recipe row's ~140 tokens) once,
    attention by blocks, only trained tokens through the LM head. Same loss and gradients (tests/test_sft.py);
    fewer tokens through the model (the cold start is the recipe's costliest stage).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Iterator

import torch

from rlvr.sft.masking import Example
from rlvr.types import row_extent


def epoch_order(rows: int, seed: int, epoch: int) -> list[int]:
    order = list(range(rows))
    random.Random(f"rlvr-sft/{seed}/{epoch}").shuffle(order)
    return order


def row_stream(rows: int, epochs: int, seed: int) -> Iterator[int]:
    """Row indices in training order: epoch 0's permutation, then epoch 1's, ..."""
    for epoch in range(epochs):
        yield from epoch_order(rows, seed, epoch)


def total_steps(rows: int, epochs: int, batch_size: int) -> int:
    """ceil(epochs x rows / batch_size): every row is seen `epochs` times, the last step may be short."""
    return math.ceil(epochs * rows / batch_size)


@dataclass(frozen=True)
class MicroBatch:
    input_ids: torch.Tensor  # [B, T] int64
    position_ids: torch.Tensor  # [B, T] int64; restart at 0 for every packed example
    attention_mask: torch.Tensor | None  # [B, T] 1 on real tokens; None when packed (positions mark examples)
    target_mask: torch.Tensor  # [B, T] bool: tokens the loss is taken on
    rows: int  # examples in this micro-batch

    @property
    def tokens(self) -> int:
        """Real (non-padding) tokens."""
        return self.input_ids.numel() if self.attention_mask is None else int(self.attention_mask.sum())

    def to(self, device: torch.device) -> MicroBatch:
        if self.input_ids.device == device:
            return self
        mask = None if self.attention_mask is None else self.attention_mask.to(device)
        return MicroBatch(self.input_ids.to(device), self.position_ids.to(device), mask, self.target_mask.to(device),
                          self.rows)


def pad_rows(examples: list[Example], pad_id: int) -> MicroBatch:
    """One row per example, padded on the right (the positions of real tokens are then 0..T-1 as usual)."""
    width = max(e.length for e in examples)
    # host: built from the examples on the host; MicroBatch.to moves each micro-batch
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(examples), width), dtype=torch.long)  # host: as ids
    target = torch.zeros((len(examples), width), dtype=torch.bool)  # host: as ids
    for row, e in enumerate(examples):
        ids[row, :e.length], attention[row, :e.length], target[row, :e.length] = e.input_ids, 1, e.target_mask
    positions = torch.arange(width).expand(len(examples), width).clone()  # host: as ids above
    return MicroBatch(ids, positions, attention, target, len(examples))


def pack_rows(examples: list[Example]) -> MicroBatch:
    """All examples in one row [1, sum T]. Each example's first token is never a target (Example guarantees
    it), so no loss term predicts one example from the end of the previous one."""
    ids = torch.cat([e.input_ids for e in examples])[None]
    positions = torch.cat([torch.arange(e.length) for e in examples])[None]  # host: MicroBatch.to moves it
    target = torch.cat([e.target_mask for e in examples])[None]
    return MicroBatch(ids, positions, None, target, len(examples))


@dataclass(frozen=True)
class SplitBatch:
    """Rows cut at their first trained token: the prompt / completion layout of a rollout batch (row i is the only
    completion of prompt i), for rlvr/model/logprobs.completion_logprobs."""

    prompt_ids: torch.Tensor  # [B, P] int64, left-padded (the rollout engine's layout)
    prompt_mask: torch.Tensor  # [B, P] int64: 1 on real prompt tokens
    completion_ids: torch.Tensor  # [B, C] int64, right-padded: from the first trained token to the row's end
    completion_mask: torch.Tensor  # [B, C] int64: 1 on trained tokens (holes: untrained turns between them)
    rows: int

    @property
    def tokens(self) -> int:
        """Real tokens of the rows (sharing the prompts' opening runs fewer through the model)."""
        return int(self.prompt_mask.sum() + row_extent(self.completion_mask).sum())  # one sync, not one per row

    def to(self, device: torch.device) -> SplitBatch:
        if self.prompt_ids.device == device:
            return self
        return SplitBatch(self.prompt_ids.to(device), self.prompt_mask.to(device), self.completion_ids.to(device),
                          self.completion_mask.to(device), self.rows)


def split_rows(examples: list[Example], pad_id: int) -> SplitBatch:
    """Each example's tokens before its first target as a left-padded prompt, the rest (up to its last target:
    later tokens predict nothing trained) as a right-padded completion."""
    firsts = [int(e.target_mask.nonzero()[0]) for e in examples]
    lasts = [int(e.target_mask.nonzero()[-1]) + 1 for e in examples]
    width_p = max(firsts)
    width_c = max(last - first for first, last in zip(firsts, lasts))
    # host: built from the examples on the host; .to(device) moves each micro-batch
    prompt_ids = torch.full((len(examples), width_p), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((len(examples), width_p), dtype=torch.long)  # host: as prompt_ids
    completion_ids = torch.full((len(examples), width_c), pad_id, dtype=torch.long)  # host: as prompt_ids
    completion_mask = torch.zeros((len(examples), width_c), dtype=torch.long)  # host: as prompt_ids
    for row, (e, first, last) in enumerate(zip(examples, firsts, lasts)):
        prompt_ids[row, width_p - first:], prompt_mask[row, width_p - first:] = e.input_ids[:first], 1
        completion_ids[row, :last - first] = e.input_ids[first:last]
        completion_mask[row, :last - first] = e.target_mask[first:last]
    return SplitBatch(prompt_ids, prompt_mask, completion_ids, completion_mask, len(examples))


LAYOUTS = {  # sft.batching -> how a micro-batch's rows are laid out (module docstring)
    "length_grouped": pad_rows,
    "padding_free": lambda chunk, pad_id: pack_rows(chunk),
    "shared_prefix": split_rows,
}


def micro_batches(examples: list[Example], micro_batch_size: int, batching: str, pad_id: int
                  ) -> list[MicroBatch | SplitBatch]:
    """One optimizer step's examples, longest first, cut into micro-batches of `micro_batch_size` rows."""
    ordered = sorted(examples, key=lambda e: -e.length)  # stable: ties keep the stream's order
    layout = LAYOUTS[batching]
    return [layout(ordered[i:i + micro_batch_size], pad_id) for i in range(0, len(ordered), micro_batch_size)]
