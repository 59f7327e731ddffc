"""Rows mixed into the SFT data: sft.mix_data and sft.mix_ratio.

Why: R1 (Guo et al. 2025, sec. 2.3.3) trains its second SFT on ~600k reasoning rows plus ~200k non-reasoning
ones, so that the model keeps answering ordinary requests well; the recipe's earlier cold start was found, trained on
worked solutions alone, answering plain questions worse than the base model and not ending its turn. Mixing rows of
the model's ordinary answers (in the R1 recipe: the base model's own verified answers to plain questions, written
by the recipe's `plain_answers` stage) into each SFT stage keeps them.

With `main` usable rows of sft.data and a share `ratio` wanted from sft.mix_data, m / (main + m) = ratio gives
m = round(main x ratio / (1 - ratio)) (the formula rlvr.sampling.mix uses for the rejection-sampled set). The m rows
are a seeded draw from the usable rows of sft.mix_data, without replacement when it holds enough and with
replacement otherwise (said in one line at start). They are appended after the main rows; the training order
shuffles every row each epoch (rlvr.sft.batching.row_stream), and the data fingerprint that a resume checks covers
them too.
"""
from __future__ import annotations

import random
import sys
from dataclasses import dataclass

from rlvr.config.run import RunConfig
from rlvr.sampling.mix import general_count


@dataclass(frozen=True)
class MixDraw:
    """Which of sft.mix_data's usable rows are trained on (indices into them, in training-data order)."""

    indices: tuple[int, ...]
    available: int  # usable rows in sft.mix_data
    with_replacement: bool  # more rows were wanted than it holds


def draw_mix(available: int, main_rows: int, ratio: float, seed: int) -> MixDraw:
    """The seeded choice of mixed rows (module docstring); `available` must be > 0 when any row is wanted."""
    wanted = general_count(main_rows, ratio)
    if wanted and not available:
        raise ValueError("sft.mix_data has no usable row to mix in")
    rng = random.Random(f"sft-mix:{seed}")  # a str seed hashes with sha512: the same draw in every process
    with_replacement = wanted > available
    indices = rng.choices(range(available), k=wanted) if with_replacement else rng.sample(range(available), wanted)
    return MixDraw(tuple(indices), available, with_replacement)


def mix_source_config(config: RunConfig) -> RunConfig:
    """The config whose sft.data is sft.mix_data: the mixed rows are read with every rule sft.data has."""
    return config.model_copy(update={"sft": config.sft.model_copy(update={"data": config.sft.mix_data})})


def say_mix(draw: MixDraw, main_rows: int, config: RunConfig) -> None:
    """One line at start: how many rows were mixed in, from how many."""
    how = "with replacement: it holds fewer" if draw.with_replacement else "without replacement"
    print(f"rlvr: sft.mix_data: {len(draw.indices)} rows mixed into {main_rows} (mix_ratio {config.sft.mix_ratio}; "
          f"drawn {how} of its {draw.available} usable rows)", file=sys.stderr)


__all__ = ["MixDraw", "draw_mix", "mix_source_config", "say_mix"]
