"""Per-step signals that answer "is it working?" (issue #13, item 1), beside what metrics.jsonl already held.

- reflection_rate: the share of a step's completions with a self-correction phrase ("wait", "let me check", ...).
  DeepSeek-R1's "aha moment" is the policy starting to write such phrases during RL; tracking their rate shows
  whether (and when) that happens. Phrases match whole words, case-insensitively ("await" is not "wait").
- tokens_per_s: completion tokens of the step over the step's wall time (every phase).
- peak_memory_gb: the accelerator's peak allocation on CUDA, else the process's peak resident set (Linux, macOS).
"""
from __future__ import annotations

import functools
import re
import resource
import sys
from typing import Sequence


@functools.lru_cache(maxsize=8)
def _phrase_pattern(phrases: tuple[str, ...]) -> re.Pattern[str]:
    words = sorted((p.strip() for p in phrases if p.strip()), key=len, reverse=True)
    # \s+ between the words of a phrase: "let me\ncheck" is the same phrase across a line break
    alternatives = "|".join(r"\s+".join(re.escape(w) for w in phrase.split()) for phrase in words)
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


def reflection_rate(completions: Sequence[str], phrases: Sequence[str]) -> float:
    """Share of completions containing at least one of `phrases` (0.0 for no completions or no phrases)."""
    if not completions or not any(p.strip() for p in phrases):
        return 0.0
    pattern = _phrase_pattern(tuple(phrases))
    return sum(1 for text in completions if pattern.search(text)) / len(completions)


def tokens_per_second(completion_tokens: int, seconds: float) -> float:
    return completion_tokens / seconds if seconds > 0 else 0.0


def peak_memory_gb(device_type: str) -> float:
    """CUDA: torch's peak allocation on the current device; otherwise this process's peak RSS."""
    if device_type == "cuda":
        import torch

        return torch.cuda.max_memory_allocated() / 1e9
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e9 if sys.platform == "darwin" else peak * 1024 / 1e9  # bytes on macOS, KiB on Linux
