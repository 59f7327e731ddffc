"""Per-step "is it working?" signals (rlvr/signals.py, issue #13 item 1)."""
from __future__ import annotations

import pytest

from rlvr.config import ConfigError, load_config
from rlvr.signals import peak_memory_gb, reflection_rate, tokens_per_second

PHRASES = ["wait", "let me check", "double-check"]


def test_reflection_rate_by_hand() -> None:
    """4 completions: "Wait, 7*8 is 56" (wait, any case), "let me\\ncheck: 56" (phrase across a line break),
    "I await your answer" ("await" is no "wait"), "56" (none): 2 of 4 = 0.5."""
    texts = ["Wait, 7*8 is 56", "let me\ncheck: 56", "I await your answer", "56"]
    assert reflection_rate(texts, PHRASES) == 0.5


def test_reflection_rate_counts_a_completion_once_and_handles_empty_input() -> None:
    assert reflection_rate(["wait wait, let me check, double-check"], PHRASES) == 1.0
    assert reflection_rate([], PHRASES) == 0.0
    assert reflection_rate(["wait"], []) == 0.0
    assert reflection_rate(["wait"], ["  "]) == 0.0
    assert reflection_rate(["a b c"], ["(b)"]) == 0.0  # regex characters are literal: "(b)" is not "b"
    assert reflection_rate(["a (b) c"], ["(b)"]) == 1.0


def test_tokens_per_second_and_peak_memory() -> None:
    assert tokens_per_second(300, 1.5) == 200.0
    assert tokens_per_second(300, 0.0) == 0.0
    assert 0.01 < peak_memory_gb("cpu") < 1000  # this test process's own peak resident set


def test_default_phrases_and_override() -> None:
    assert "wait" in load_config(None, []).reflection_phrases
    assert load_config(None, ['reflection_phrases=["hmm"]']).reflection_phrases == ["hmm"]
    with pytest.raises(ConfigError):
        load_config(None, ["reflection_phrases=3"])
