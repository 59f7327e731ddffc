"""The warning when more than a quarter of a step's completions hit the length cap: the default 32
new tokens cut 84-91 % of word-problem answers and nothing said so. Said once per run, naming the setting and value."""
from __future__ import annotations

import math

import pytest

from rlvr.config.rules import with_dynamic_sampling_decided
from rlvr.config.run import load_config
from rlvr.metrics.diagnostics import Diagnostics, RunFacts, truncation_note

BUDGET = "rollout.max_new_tokens=32"


@pytest.mark.parametrize("fraction", [0.0, 0.25, math.nan, None])  # a quarter exactly is not "more than a quarter"
def test_no_warning_up_to_a_quarter(fraction) -> None:
    assert truncation_note(fraction, BUDGET) is None


def test_the_warning_names_the_share_the_setting_and_its_value() -> None:
    note = truncation_note(0.875, BUDGET)  # 28 of 32 completions cut: 87.5 %, printed rounded to 88%
    assert note is not None and note.startswith("88% of this step's completions were cut at "
                                                "rollout.max_new_tokens=32 before they ended")
    assert "raise rollout.max_new_tokens " in note
    assert truncation_note(0.26, BUDGET) is not None  # just above a quarter


def test_said_once_per_run_not_every_step() -> None:
    # steps 1..6: 91 %, 84 %, 10 %, 90 %, 90 %, 88 % cut: one warning, at step 1, though the share drops and returns
    diagnostics = Diagnostics(RunFacts(length_budget=BUDGET))
    lines = [diagnostics.check({"step": step, "truncated_fraction": share})
             for step, share in enumerate([0.91, 0.84, 0.10, 0.90, 0.90, 0.88], 1)]
    assert [len(step) for step in lines] == [1, 0, 0, 0, 0, 0]
    assert lines[0][0].startswith("warning (step 1): 91% of this step's completions were cut at "
                                  "rollout.max_new_tokens=32")


def test_the_budget_comes_from_the_run_config() -> None:
    config = with_dynamic_sampling_decided(load_config(None, ["rollout.max_new_tokens=48"]), 1)
    assert RunFacts.of(config).length_budget == "rollout.max_new_tokens=48"
    episodes = with_dynamic_sampling_decided(load_config(None, ["task.name=calculator"]), 1)
    budget = RunFacts.of(episodes).length_budget  # episodes are cut by their own budgets, not max_new_tokens
    assert budget == "episode.tokens_per_turn=48 / episode.tokens_per_episode=192"
    assert "raise episode.tokens_per_turn or episode.tokens_per_episode " in truncation_note(0.5, budget)
