"""One seeding for every entry point (train, sft, sample, eval each wrote their own)."""
from __future__ import annotations

import random


def seed_everything(seed: int, *, python: bool = True) -> None:
    """Seed torch's default generators (CPU and every CUDA device) and, unless python=False, python's `random`.

    Evaluation passes python=False: it has always seeded torch only, and evaluate_model is also called as a
    library function, whose caller's `random` stream it must not reset."""
    import torch  # here: rlvr.sampling.run and rlvr.cli.eval import this module before they need torch

    if python:
        random.seed(seed)
    torch.manual_seed(seed)
