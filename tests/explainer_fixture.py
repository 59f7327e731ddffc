"""A made-up example in the shape bench/explainer_record.py writes (rlvr/viz/example/explainer.json), for the
explainer's tests: they swap it in for the shipped one (`use_fake_example`), so that what a view draws is known
here, number by number, whatever the shipped recording holds."""
from __future__ import annotations

import pytest

from viz_helpers import group_row

MADE = {"date": "2026-01-02", "commit": "abc1234"}


def _with_kl(row: dict) -> dict:
    for j, c in enumerate(row["completions"]):
        c["token_kl"] = [round(0.001 * (k % 7) + 0.01 * j, 5) for k in range(len(c["tokens"]))]
    return row


def ppo_group() -> dict:
    """G = 4, per-token GAE advantages that fall along each completion (a critic's baseline moves per token)."""
    row = group_row(3, 4, 6, ratios=True)
    for j, c in enumerate(row["completions"]):
        c["token_advantages"] = [round((1 if c["reward"] else -1) * (0.9 - 0.1 * k) + 0.05 * j, 4) for k in range(6)]
        c["advantage"] = sum(c["token_advantages"]) / 6
    return row


def agent_group() -> dict:
    """G = 3 calculator episodes: a call, its result, an answer; turn rewards pay the valid call."""
    episodes = [([1.0, 0.0], 1.0), ([0.0, 0.0], 0.0), ([1.0], 0.0)]
    completions = []
    for j, (turn_rewards, reward) in enumerate(episodes):
        messages = [{"role": "assistant", "content": f"calc({j} + 4)"}, {"role": "user", "content": f"= {j + 4}"}]
        if len(turn_rewards) == 2:
            messages.append({"role": "assistant", "content": f"Answer: {j + 4}"})
        tokens = [m["content"] for m in messages]
        completions.append({
            "text": messages[-1]["content"], "reward": reward, "advantage": 0.0, "truncated": False,
            "verdicts": {"calculator": {"outcome": "correct" if reward else "wrong", "score": reward, "detail": ""}},
            "tokens": tokens, "token_advantages": [0.0] * len(tokens), "token_ratios": None,
            "sampled": [1 if m["role"] == "assistant" else 0 for m in messages],
            "episode": {"messages": messages, "final_state": "", "stop_reason": "answered",
                        "turn_rewards": turn_rewards, "valid_calls": 1, "invalid_calls": 0}})
    return {"step": 2, "prompt_id": "calc/train/1", "question": "Ann has 4 apples ...", "reference": "4",
            "clip_low": 0.2, "clip_high": 0.2, "completions": completions}


def grid_cells() -> list[dict]:
    cells = []
    for eps in (0.1, 0.2, 0.3):
        for beta in (0.0, 0.04, 0.2):
            for g in (4, 8):
                steps = [1, 2, 3, 4, 5, 6]
                cells.append({"clip_epsilon": eps, "beta": beta, "group_size": g, "seconds": 100.0, "curves": {
                    "steps": steps,
                    "reward_mean": [round(0.3 + 0.05 * s + eps / 10 - beta + g / 100, 4) for s in steps],
                    "kl": [round((0.2 - beta) * s / 10, 4) for s in steps],
                    "clip_fraction": [round(0.1 - eps / 5, 4)] * 6, "zero_std_fraction": [0.25] * 6,
                    "completion_length": [15.0] * 6, "entropy": [0.5] * 6}})
    return cells


def sweep_row(t: float) -> dict:
    return {"temperature": t, "distinct_answers": 1 + 3 * t, "tied_share": round(0.9 - 0.6 * t, 3),
            "mean_abs_advantage": round(0.2 + 0.4 * t, 3), "reward_mean": round(0.9 - 0.3 * t, 3),
            # the default temperature's (1.0) rates differ from the others': the view must pick that row
            "pass_rates": [0.125, 0.5, 0.875, 1.0] if t == 1.0 else [0.0, 0.25, 0.5, 0.75]}


def fake_example() -> dict:
    return {
        "example": {"command": "rlvr train max_steps=8", "seconds": 120.0, "config": "max_steps: 8\n", **MADE,
                    "curves": {"steps": [1, 2], "reward_mean": [0.4, 0.6], "kl": [0.0, 0.01]},
                    "groups": [_with_kl(group_row(s, 8, 12, ratios=True)) for s in (1, 2)]},
        "temperature": {"prompts": 4, "group_size": 8, "max_new_tokens": 32, "seconds": 60.0, **MADE,
                        "command": "python bench/explainer_record.py --only temperature",
                        "rows": [sweep_row(t) for t in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2)]},
        "grid": {"steps": 6, "updates_per_batch": 2, "seconds": 1700.0, **MADE, "command": "rlvr train ... (grid)",
                 "axes": {"clip_epsilon": [0.1, 0.2, 0.3], "beta": [0.0, 0.04, 0.2], "group_size": [4, 8]},
                 "cells": grid_cells()},
        "ppo": {"command": "rlvr train configs/ppo.yaml max_steps=3", "seconds": 90.0, **MADE, "std_epsilon": 1e-4,
                "group": ppo_group()},
        "agent": {"command": "rlvr train configs/agents/calculator.yaml max_steps=3", "seconds": 90.0, **MADE,
                  "std_epsilon": 1e-4, "group": agent_group()},
        "hacks": {"command": "rlvr train max_steps=4 reward.control=format_only", "seconds": 60.0, **MADE, "cases": [
            {"kind": "format only", "source": "real", "question": "What is 11 * 5?", "reference": "55",
             "completion": "11 * 5 = 65\nAnswer: 65", "naive": {"format": 1.0, "last_number": 0.0},
             "rlvr": {"outcome": "wrong", "reward": 0.0, "detail": "extracted 65, expected 55"}},
            {"kind": "hedge", "source": "attack tests", "question": "What is 7 * 8?", "reference": "56",
             "completion": "Answer: 63 or 56", "naive": {"format": 1.0, "last_number": 1.0},
             "rlvr": {"outcome": "wrong", "reward": 0.0, "detail": "hedged: several answers (63 or 56)"}}]},
    }


@pytest.fixture
def use_fake_example(monkeypatch) -> dict:
    """The explainer reads fake_example() instead of the shipped recording; returns it."""
    import rlvr.viz.explainer_data as explainer_data

    data = fake_example()
    monkeypatch.setattr(explainer_data, "load_example", lambda: data)
    return data
