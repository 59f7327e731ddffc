"""Reward shaping on top of the verifiers' scores: pure tensor functions, each a reward component [B].

The loop adds them to the reward components it hands to advantages.combined_advantages, so they are
combined (sum-then-normalise or normalise-then-sum) like any verifier. (The KL-in-reward component is built
from loss.KL_ESTIMATORS in recipes/stages.py.)
"""
from __future__ import annotations

import torch



def soft_overlong_penalty(lengths: torch.Tensor, max_length: int, buffer: int) -> torch.Tensor:
    """DAPO soft overlong punishment (Yu et al. 2025, eq. 13), in [-1, 0], to be scaled by a penalty factor:

      0                              if |y| <= L_max - L_cache
      ((L_max - L_cache) - |y|) / L_cache   if L_max - L_cache < |y| <= L_max
      -1                             if |y| > L_max

    `lengths` [B] are completion token counts, `max_length` is L_max, `buffer` is L_cache. Truncation noise
    ("too long" is not "wrong") is replaced by a smooth length signal. buffer = 0 turns it off.
    """
    if buffer <= 0:
        return torch.zeros_like(lengths, dtype=torch.float32)
    if buffer > max_length:
        raise ValueError(f"overlong buffer {buffer} exceeds the length budget {max_length}")
    over = lengths.float() - (max_length - buffer)
    return torch.where(lengths > max_length, -1.0, -(over.clamp(min=0.0) / buffer))

