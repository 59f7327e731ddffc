"""Per-step "is it working?" signals (rlvr/metrics/diagnostics.py)."""
from __future__ import annotations

import pytest

from rlvr.config.run import ConfigError, load_config
from rlvr.metrics.diagnostics import peak_memory_gb, reflection_rate, tokens_per_second

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


def _diagnose(records, mu=1, **facts):
    from rlvr.metrics.diagnostics import Diagnostics, RunFacts

    diagnostics = Diagnostics(RunFacts(updates_per_batch=mu, **facts))
    return [diagnostics.check({"step": i + 1, **r}) for i, r in enumerate(records)]


def _second(record, **facts) -> str:
    """The note a pattern gets on its second step in a row (PERSIST = 2), or "" when there is none."""
    lines = _diagnose([record, record], **facts)
    assert lines[0] == [], "one step of a pattern is no pattern yet"
    return " | ".join(lines[1])


def test_tied_groups_are_explained_when_they_persist_and_only_at_onset() -> None:
    """Steps 1-3 all tied (said at step 2 only: one tied step is noise), step 4 not, step 5 tied (a streak of 1:
    nothing), step 6 tied again (said again)."""
    tied, mixed = {"zero_std_fraction": 1.0}, {"zero_std_fraction": 0.5}
    out = _diagnose([tied, tied, tied, mixed, tied, tied])
    assert [len(lines) for lines in out] == [0, 1, 0, 0, 0, 1]
    assert "no learning signal" in out[1][0] and out[1][0].startswith("note (step 2)")
    assert "rollout.dynamic_sampling.enabled=true" in out[5][0] and "curriculum.enabled=true" in out[5][0]


def test_tied_advice_knows_what_the_run_does() -> None:
    """The earlier default-run case: dynamic sampling on and its 12 extra prompts drawn. The note must not advise
    turning dynamic sampling on; it may advise a higher cap (now 12) and the curriculum (off)."""
    stuck = {"zero_std_fraction": 1.0, "dynamic_sampling/extra_prompts": 12, "outcomes/math/correct": 10,
             "outcomes/math/wrong": 22}
    line = _second(stuck, dynamic_sampling=True, max_extra_prompts=12)
    assert "dynamic_sampling.enabled=true" not in line and "also among the 12 extra problems" in line
    assert "max_extra_prompts (now 12)" in line and "curriculum.enabled=true" in line
    both_on = _second(stuck, dynamic_sampling=True, max_extra_prompts=20, curriculum=True)
    assert "=true" not in both_on and "max_extra_prompts" not in both_on and "SFT first" in both_on
    # every verdict correct (32 of 32 >= 0.95): ties mean solved; the note says so and asks to change nothing
    solved = _second({**stuck, "outcomes/math/correct": 32, "outcomes/math/wrong": 0}, dynamic_sampling=True,
                     max_extra_prompts=12)
    assert "solves these problems every time" in solved and "try" not in solved
    # 26 of 32 (0.81 >= CONVERGED 0.75, < SOLVED 0.95): converged, said without advice
    converged = _second({**stuck, "outcomes/math/correct": 26, "outcomes/math/wrong": 6}, dynamic_sampling=True,
                        max_extra_prompts=12)
    assert "converged at this difficulty" in converged and "81% of them right" in converged and "try" not in converged
    assert "too hard" in _second({**stuck, "outcomes/math/correct": 0, "outcomes/math/wrong": 32})


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


def test_kl_alarm_needs_two_steps_and_names_the_largest_token() -> None:
    # docs/runs.md's default-run step 18: KL 1.77 for one step (one token with k3 = 562), 0.08 the next: no note
    assert _diagnose([{"kl": 0.2}, {"kl": 1.77, "kl_max": 562.0}, {"kl": 0.08}]) == [[], [], []]
    out = _diagnose([{"kl": 1.5}, {"kl": 1.6, "kl_max": 842.0}, {"kl": 1.7}, {"kl": float("nan")}, {"kl": 1.2}])
    assert [len(lines) for lines in out] == [0, 1, 0, 0, 0]  # onset at the second high step; NaN breaks the run
    assert "KL to the reference is 1.6 per token (> 1.0) two steps running" in out[1][0]
    assert "(largest single token: 842; when far above the mean" in out[1][0]
    assert "largest single token" not in _diagnose([{"kl": 1.5}, {"kl": 1.6}])[1][0]  # no kl_max: not mentioned


# The default run of 2026-11-26 (`rlvr train`, metrics.jsonl): steps 9-11 as logged. Entropy 0.047 at step 10
# with all 4 groups informative and no top-up: no note (an earlier set of rules printed one here).
DEFAULT_RUN_STEPS = [
    {"entropy": 0.2821, "zero_std_fraction": 0.0, "dynamic_sampling/topped_up": 0, "reward_mean": 0.78125},
    {"entropy": 0.0467, "zero_std_fraction": 0.0, "dynamic_sampling/topped_up": 0, "reward_mean": 0.8125},
    {"entropy": 0.1533, "zero_std_fraction": 0.0, "dynamic_sampling/topped_up": 0, "reward_mean": 0.8125},
]


def test_entropy_note_needs_low_entropy_and_ties_on_an_unsolved_task() -> None:
    assert _diagnose(DEFAULT_RUN_STEPS, dynamic_sampling=True, max_extra_prompts=12) == [[], [], []]
    stuck = {"entropy": 0.01, "zero_std_fraction": 0.5, "outcomes/math/correct": 8, "outcomes/math/wrong": 24}
    line = _second(stuck)
    assert "entropy is collapsing (0.01" in line and "clip_epsilon_high=0.28" in line and "entropy_coef" in line
    assert "clip_epsilon_high" not in _second(stuck, clip_higher=True, entropy_bonus=True)
    topped = {**stuck, "zero_std_fraction": 0.25, "dynamic_sampling/topped_up": 1}  # DS filled in a tied group
    assert "entropy is collapsing" in _second(topped, dynamic_sampling=True)
    # each condition alone is not enough: entropy above the floor, fewer ties, or a solved task (31/32 correct)
    assert "entropy" not in _second({**stuck, "entropy": 0.06})
    assert "entropy" not in _second({**stuck, "zero_std_fraction": 0.25})
    assert "entropy" not in _second({**stuck, "outcomes/math/correct": 31, "outcomes/math/wrong": 1})
    # the default run's steps 27-28: entropy 0.023 / 0.029, 3 of 4 groups topped up, 27 and 25 of 32 correct
    # (>= CONVERGED 0.75): converged, not collapsed
    late = [{"entropy": e, "zero_std_fraction": 0.75, "dynamic_sampling/topped_up": 3, "outcomes/math/correct": c,
             "outcomes/math/wrong": 32 - c} for e, c in ((0.0231, 27), (0.0288, 25))]
    assert _diagnose(late, dynamic_sampling=True, max_extra_prompts=12) == [[], []]
    assert "entropy is collapsing" in _diagnose([{**x, "outcomes/math/correct": 23, "outcomes/math/wrong": 9}
                                                 for x in late], dynamic_sampling=True)[1][0]  # 23/32 = 0.72


def test_run_facts_from_the_default_config() -> None:
    from rlvr.config.rules import with_dynamic_sampling_decided
    from rlvr.config.run import load_config
    from rlvr.metrics.diagnostics import RunFacts

    facts = RunFacts.of(with_dynamic_sampling_decided(load_config(None, []), 1))
    assert facts == RunFacts(updates_per_batch=1, dynamic_sampling=True, max_extra_prompts=12,
                             length_budget="rollout.max_new_tokens=32")
    higher = RunFacts.of(with_dynamic_sampling_decided(load_config(None, ["algorithm.clip_epsilon_high=0.28"]), 1))
    assert higher.clip_higher and not higher.curriculum
    # a small bonus is a bonus: 0.01 is on (mutation: `entropy_coef > 1`)
    bonus = RunFacts.of(with_dynamic_sampling_decided(load_config(None, ["algorithm.entropy_coef=0.01"]), 1))
    assert bonus.entropy_bonus and not facts.entropy_bonus


def test_reward_rising_while_held_out_falls() -> None:
    """Eval 1 at step 2 after rewards 0.4, 0.5 (mean 0.45), pass@1 0.80; eval 2 at step 4 after rewards 0.6, 0.8
    (mean 0.70 > 0.45) with pass@1 0.70 (fell by 0.10 >= 0.05): reward hacking is suspected at step 4 only.
    A third eval with pass@1 back up (0.85) says nothing."""
    out = _diagnose([{"reward_mean": 0.4}, {"reward_mean": 0.5, "eval/pass@1": 0.8},
                     {"reward_mean": 0.6}, {"reward_mean": 0.8, "eval/pass@1": 0.7},
                     {"reward_mean": 0.9, "eval/pass@1": 0.85}])
    assert [len(lines) for lines in out] == [0, 0, 0, 1, 0]
    assert "possible reward hacking" in out[3][0] and "0.450 -> 0.700" in out[3][0] and "0.800 -> 0.700" in out[3][0]


def test_the_measured_default_run_gets_no_advice_to_change_a_default() -> None:
    """Replays the 30 logged steps of `rlvr train` (default config, 2026-11-26; tests/data/default_run_metrics.jsonl
    keeps the keys the notes read). The earlier code printed 5 entropy notes (steps 10, 13, 16, 20, 22:
    "lower optimizer.lr or raise rollout.temperature") and 3 tied notes ("try rollout.dynamic_sampling.enabled=true"
    while it was on) on this run. Now: the zero-loss explanation, and at step 26 (the second of two steps whose 16
    problems were all solved every time) the fact that the model solves them - no setting named."""
    import json
    from pathlib import Path

    from rlvr.config.rules import with_dynamic_sampling_decided
    from rlvr.config.run import load_config
    from rlvr.metrics.diagnostics import Diagnostics, RunFacts

    rows = [json.loads(line) for line in (Path(__file__).parent / "data" / "default_run_metrics.jsonl").open()]
    assert [r["step"] for r in rows] == list(range(1, 31))
    diagnostics = Diagnostics(RunFacts.of(with_dynamic_sampling_decided(load_config(None, []), 1)))
    notes = [line for row in rows for line in diagnostics.check(row)]
    assert [n.split(":")[0] for n in notes] == ["note (step 1)", "note (step 26)"]
    assert "the loss shows as 0" in notes[0] and "solves these problems every time" in notes[1]
    assert not any(word in note for note in notes for word in ("try", "lower ", "raise ", "=true"))
