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
    with pytest.raises(ConfigError, match="reflection_phrases"):  # a blank phrase would match nothing, silently
        load_config(None, ['reflection_phrases=["wait", "  "]'])
    assert load_config(None, ["reflection_phrases=[]"]).reflection_phrases == []  # the metric off


def _diagnose(records, mu=1):
    from rlvr.signals import Diagnostics

    diagnostics = Diagnostics(mu)
    return [diagnostics.check({"step": i + 1, **r}) for i, r in enumerate(records)]


def test_tied_groups_are_explained_when_they_begin_only() -> None:
    """Steps 1-2 all tied (said at step 1 only), step 3 not, step 4 tied again (said again)."""
    out = _diagnose([{"zero_std_fraction": 1.0}, {"zero_std_fraction": 1.0}, {"zero_std_fraction": 0.5},
                     {"zero_std_fraction": 1.0}])
    assert [len(lines) for lines in out] == [1, 0, 0, 1]
    assert "no learning signal" in out[0][0] and out[0][0].startswith("note (step 1)")
    assert "dynamic_sampling" in out[3][0]


def test_zero_loss_is_explained_once_and_only_at_mu_1() -> None:
    assert [len(x) for x in _diagnose([{"loss": 0.0}, {"loss": 0.1}, {"loss": 0.0}])] == [1, 0, 0]
    assert [len(x) for x in _diagnose([{"loss": 0.0}, {"loss": 0.0}, {"loss": 0.0}])] == [1, 0, 0]
    assert "expected at mu = 1" in _diagnose([{"loss": 0.0}])[0][0]
    assert _diagnose([{"loss": 0.0}], mu=2) == [[]]


def test_zero_loss_note_covers_what_prints_as_zero() -> None:
    # the step line formats the loss with '+.4f': 3e-8 (a real step's round-off) and -4.9e-5 print +0.0000 /
    # -0.0000, 5e-5 prints +0.0001 (no note), as does NaN (no note: the divergence guard speaks for it)
    assert format(-4.9e-5, "+.4f") == "-0.0000" and format(5e-5, "+.4f") == "+0.0001"
    assert [len(x) for x in _diagnose([{"loss": 3e-8}])] == [1]
    assert [len(x) for x in _diagnose([{"loss": -4.9e-5}])] == [1]
    assert _diagnose([{"loss": 5e-5}]) == [[]]
    assert _diagnose([{"loss": float("nan")}]) == [[]]


def test_kl_and_entropy_alarms() -> None:
    out = _diagnose([{"kl": 0.2, "entropy": 1.2}, {"kl": 1.5, "entropy": 0.01}, {"kl": float("nan")}])
    assert out[0] == []
    assert any("KL to the reference is 1.5" in line for line in out[1])
    assert any("entropy is collapsing (0.01" in line for line in out[1])
    assert out[2] == []  # NaN is no alarm here (the skip guard reports non-finite steps)
    assert not any("largest single token" in line for line in out[1])  # no kl_max in the record: not mentioned
    spike = _diagnose([{"kl": 1.77, "kl_max": 842.0}])[0][0]
    assert "KL to the reference is 1.77" in spike and "(largest single token: 842; far above the mean" in spike


def test_reward_rising_while_held_out_falls() -> None:
    """Eval 1 at step 2 after rewards 0.4, 0.5 (mean 0.45), pass@1 0.80; eval 2 at step 4 after rewards 0.6, 0.8
    (mean 0.70 > 0.45) with pass@1 0.70 (fell by 0.10 >= 0.05): reward hacking is suspected at step 4 only.
    A third eval with pass@1 back up (0.85) says nothing."""
    out = _diagnose([{"reward_mean": 0.4}, {"reward_mean": 0.5, "eval/pass@1": 0.8},
                     {"reward_mean": 0.6}, {"reward_mean": 0.8, "eval/pass@1": 0.7},
                     {"reward_mean": 0.9, "eval/pass@1": 0.85}])
    assert [len(lines) for lines in out] == [0, 0, 0, 1, 0]
    assert "possible reward hacking" in out[3][0] and "0.450 -> 0.700" in out[3][0] and "0.800 -> 0.700" in out[3][0]
