"""What a run shows of its episodes (issue 26, item 7): the group view keeps the whole trajectory with the
environment's tokens marked (the dashboard greys them) and without advantage, samples.jsonl carries each episode,
metrics.jsonl its tool use; single-turn rows are unchanged."""
from __future__ import annotations

import json

import torch

from rlvr.agents.episodes import EpisodeRunner
from rlvr.agents.protocol import Budgets
from rlvr.agents.scoring import EpisodeRewarder
from rlvr.grpo.group_view import group_row
from rlvr.grpo.step_log import episode_metrics, sample_rows
from rlvr.rollout.base import SamplingParams
from rlvr.viz.rundata import load_run
from test_episodes import PROMPT, EchoEnvironment, ScriptedEngine, chars, tokenizer  # noqa: F401 (a fixture, F811 ignored in pyproject)


def episode_batch(tokenizer):
    from test_episodes import EOS as eos

    call = chars(tokenizer, '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>') + [eos]
    answer = chars(tokenizer, "Answer: 1") + [eos]
    engine = ScriptedEngine([[call, answer], [answer]])  # row 0: call, then answer; row 1: answers at once
    batch = EpisodeRunner(engine, tokenizer, EchoEnvironment(), Budgets(3, 200, 400)).generate(
        [PROMPT], 2, SamplingParams())
    return batch, EpisodeRewarder(None, EchoEnvironment(), 1.0).score_rollout(batch), len(call), len(answer)


def test_the_group_view_marks_environment_tokens_and_gives_them_no_advantage(tokenizer, tmp_path):
    batch, scored, n_call, n_answer = episode_batch(tokenizer)
    advantages = torch.tensor([0.5, -0.5])
    row = group_row(3, batch, scored, advantages, 0, tokenizer.decode, (0.2, 0.2), None)
    first, second = row["completions"]
    n_env = len(first["tokens"]) - n_call - n_answer
    assert n_env > 0 and "".join(first["tokens"]).count("hi") == 2  # the call's argument, then the echoed result
    assert first["sampled"] == [1] * n_call + [0] * n_env + [1] * n_answer
    assert first["token_advantages"] == [0.5] * n_call + [0.0] * n_env + [0.5] * n_answer
    assert first["episode"]["stop_reason"] == "answered" and first["episode"]["valid_calls"] == 1
    assert second["sampled"] == [1] * n_answer and second["episode"]["valid_calls"] == 0
    # the dashboard's data layer reads it back
    (tmp_path / "groups.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 3, "reward_mean": 0.5}) + "\n")
    shown = load_run(tmp_path).groups[0].completions[0]
    assert shown.sampled == [bool(x) for x in first["sampled"]] and shown.episode["valid_calls"] == 1


def test_samples_and_metrics_carry_the_episodes(tokenizer):
    batch, scored, *_ = episode_batch(tokenizer)
    rows = sample_rows(3, batch, scored, 2)
    assert [r["episode"]["valid_calls"] for r in rows] == [1, 0]
    assert rows[0]["completion"] == "Answer: 1"
    metrics = episode_metrics(batch)
    # 2 episodes: turns 2 + 1, one valid call, environment tokens only in row 0
    assert metrics["episode/turns_mean"] == 1.5 and metrics["episode/valid_call_share"] == 1.0
    assert metrics["episode/calls_mean"] == 0.5 and metrics["episode/stop_answered"] == 1.0
    env_tokens = int(((batch.turns.turn_of_token == -1) & (batch.completion_ids != tokenizer.pad_token_id)).sum())
    assert metrics["episode/env_tokens_mean"] > 0 and env_tokens >= 1


def test_single_turn_rows_have_no_episode_keys(tokenizer):
    batch, scored, *_ = episode_batch(tokenizer)
    batch.turns = None
    assert episode_metrics(batch) == {}
    assert "episode" not in sample_rows(3, batch, scored, 2)[0]


def test_rlvr_verify_rescores_recorded_final_states_and_names_bad_lines(tmp_path, capsys):
    from rlvr.cli.main import main

    reference = json.dumps({"docs": {"a.txt": "hi"}}, sort_keys=True, separators=(",", ":"))
    rows = [{"completion": "Done.", "reference": reference, "episode": {"final_state": reference}},
            {"completion": "Done.", "reference": reference, "episode": {"final_state": '{"a.txt":"hi"}'}},
            {"completion": "Done.", "reference": reference}]  # a single-turn row: nothing recorded to re-score
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "verdicts.jsonl"
    assert main(["verify", "--verifier", "environment", "--input", str(samples), "--output", str(out),
                 "task.name=filesystem"]) == 0
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["outcome"] for v in verdicts] == ["correct", "wrong", "error"]
    assert "no recorded episode" in verdicts[2]["detail"]
    # a task without a state to check is one clear error before anything is written
    assert main(["verify", "--verifier", "environment", "--input", str(samples), "task.name=calculator"]) == 2
    assert "has no environment state to check" in capsys.readouterr().err
