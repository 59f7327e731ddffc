"""Pass-rate curriculum: running per-prompt estimates, skipping predicted all-right/all-wrong prompts, the
revisit chance, the no-hang guarantee, and exact state round trips."""
from __future__ import annotations

import itertools

import pytest
import torch

from rlvr.config.run import CurriculumConfig
from rlvr.grpo.curriculum import PassRateCurriculum, group_pass_rates
from rlvr.types import Prompt


def prompt(i: int) -> Prompt:
    return Prompt(f"p{i}", ({"role": "user", "content": str(i)},), str(i))


def test_group_pass_rates_by_hand() -> None:
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.2, 1.0, 0.0, 0.0])
    valid = torch.tensor([True, True, True, True, True, False, False, False])
    # G = 4: group 0 -> 3 of 4 reach 1.0 -> 0.75 ; group 1 -> valid rows [0.2] only, 0 of 1 -> 0.0
    assert group_pass_rates(rewards, valid, 4, 1.0) == [0.75, 0.0]
    # threshold 0.1: group 1's 0.2 passes -> 1.0
    assert group_pass_rates(rewards, valid, 4, 0.1) == [0.75, 1.0]
    # a group with no valid row has no rate at all
    assert group_pass_rates(rewards, torch.zeros(8, dtype=torch.bool), 4, 1.0) == [None, None]


def test_running_estimate_is_an_exponential_average() -> None:
    c = PassRateCurriculum(CurriculumConfig(enabled=True, decay=0.5), seed=0)
    c.observe([prompt(1)], [1.0])  # first observation taken as is
    c.observe([prompt(1)], [0.5])  # 0.5 * 1.0 + 0.5 * 0.5 = 0.75
    c.observe([prompt(1)], [0.25])  # 0.5 * 0.75 + 0.5 * 0.25 = 0.5
    c.observe([prompt(1)], [None])  # no information: unchanged
    assert c.estimates == {"p1": 0.5}


def test_skips_always_and_never_solved_prompts_and_counts_them() -> None:
    config = CurriculumConfig(enabled=True, skip_below=0.0, skip_above=1.0, revisit_probability=0.0)
    c = PassRateCurriculum(config, seed=0)
    c.observe([prompt(0), prompt(1), prompt(2)], [1.0, 0.0, 0.5])  # solved, hopeless, informative
    stream = iter([prompt(i) for i in (0, 1, 2, 3, 0, 4)])
    chosen, stats = c.take(stream, 3)
    # p0 (rate 1) and p1 (rate 0) are skipped; p2 (0.5) and p3 (unseen) are kept; p0 skipped again; p4 kept
    assert [p.id for p in chosen] == ["p2", "p3", "p4"]
    assert (stats.skipped, stats.admitted, stats.forced) == (3, 3, 0)
    assert stats.skipped_share == pytest.approx(3 / 6)


def test_revisit_probability_one_admits_everything() -> None:
    c = PassRateCurriculum(CurriculumConfig(enabled=True, revisit_probability=1.0), seed=0)
    c.observe([prompt(0)], [1.0])
    chosen, stats = c.take(itertools.repeat(prompt(0)), 4)
    assert len(chosen) == 4 and stats.skipped == 0


def test_fully_solved_task_does_not_hang() -> None:
    # every prompt predicted solved and no revisits: after 50 * n skips the rest are admitted, counted as forced
    c = PassRateCurriculum(CurriculumConfig(enabled=True, revisit_probability=0.0), seed=0)
    c.observe([prompt(0)], [1.0])
    chosen, stats = c.take(itertools.repeat(prompt(0)), 2)
    assert len(chosen) == 2 and stats.skipped == 100 and stats.forced == 2


def test_state_round_trip_continues_identically() -> None:
    config = CurriculumConfig(enabled=True, revisit_probability=0.3)
    a = PassRateCurriculum(config, seed=5)
    a.observe([prompt(i) for i in range(4)], [1.0, 0.0, 1.0, 0.0])
    a.take(itertools.cycle([prompt(i) for i in range(4)]), 3)
    b = PassRateCurriculum(config, seed=99)
    b.load_state_dict(a.state_dict())
    stream = [prompt(i) for i in range(4)] * 20
    assert [p.id for p in a.take(iter(stream), 5)[0]] == [p.id for p in b.take(iter(stream), 5)[0]]
