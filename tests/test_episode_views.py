"""What a run shows of its episodes: the group view keeps the whole trajectory with the
environment's tokens marked (the dashboard greys them) and without advantage, samples.jsonl carries each episode,
metrics.jsonl its tool use; single-turn rows are unchanged."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from rlvr.agents.episodes import EpisodeRunner
from rlvr.agents.protocol import Budgets, EpisodeRecord
from rlvr.agents.scoring import EpisodeRewarder
from rlvr.grpo.group_view import group_row
from rlvr.grpo.step_log import episode_metrics, sample_rows
from rlvr.rollout.base import SamplingParams
from rlvr.types import Outcome, Prompt, RolloutBatch, ScoredBatch, Turns, Verdict
from rlvr.viz.jsonl import RunDataError
from rlvr.viz.rundata import Episode, Message, load_run
from test_episodes import PROMPT, EchoEnvironment, ScriptedEngine, chars, tokenizer  # noqa: F401 (a fixture, F811 ignored in pyproject)

DATA = Path(__file__).resolve().parent / "data"


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
    assert shown.sampled == [bool(x) for x in first["sampled"]] and shown.episode.valid_calls == 1


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


# --- hand-built batches: numbers worked out by hand, no engine --------------------------------

def single_turn_batch():
    """Two prompts, G = 2, no turns: rows of 3, 1, 2 and 0 tokens (a contiguous mask, as a single-turn sampler
    leaves it), a verdict with a non-ASCII detail."""
    prompts = [Prompt("p/0", ({"role": "user", "content": "What is 2 + 2?"},), "4"),
               Prompt("p/1", ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "3 × 3?"}), "9")]
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [0, 0, 0]])
    rollouts = RolloutBatch(prompts, 2, torch.tensor([[1, 2], [0, 3]]), torch.tensor([[1, 1], [0, 1]]),
                            torch.tensor([[5, 6, 7], [8, 0, 0], [9, 10, 0], [0, 0, 0]]), mask, torch.zeros(4, 3),
                            ["Answer: 4", "4", "Answer: 9 ✓", ""], torch.tensor([False, False, True, False]))
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0])
    verdicts = [Verdict(Outcome.CORRECT, 1.0, "ok"), Verdict(Outcome.UNPARSEABLE, 0.0, "no \"Answer:\" line"),
                Verdict(Outcome.CORRECT, 1.0, "9 = 9 ✓"), Verdict(Outcome.WRONG, 0.0, "", scorable=False)]
    scored = ScoredBatch(rewards, torch.tensor([True, True, True, False]), {"math": verdicts}, {"math": rewards})
    return rollouts, scored


def single_turn_lines(rollouts, scored):
    """groups.jsonl lines (one advantage per completion with ratios; per-token advantages without) and the
    samples.jsonl lines of the batch above, as the sinks write them (json.dumps per row)."""
    decode = lambda ids: "".join(chr(96 + i) for i in ids)  # noqa: E731
    ratios = torch.tensor([[1.25, 0.5, 1.0], [0.75, 9.0, 9.0]])
    per_token = torch.tensor([[0.1, 0.2, 0.3], [-0.4, 7.0, 7.0], [0.5, -0.5, 7.0], [7.0, 7.0, 7.0]])
    groups = [group_row(4, rollouts, scored, torch.tensor([0.5, -0.5, 0.25, 0.0]), 0, decode, (0.2, 0.28), ratios),
              group_row(5, rollouts, scored, per_token, 1, decode, (0.2, 0.2), None)]
    for line in groups:  # the batch's pass rates came later (the explainer's difficulty view): the rest is as before
        # group 0: correct and unparseable -> 1/2; group 1: correct, and an unscorable row left out -> 1/1
        assert [rate for _, rate in line.pop("pass_rates")] == [0.5, 1.0]
    return [json.dumps(line) for line in [*groups, *sample_rows(6, rollouts, scored, 4)]]


def test_single_turn_lines_are_byte_identical_to_before_the_episode_views():
    """tests/data/single_turn_views.jsonl was written by the code before episode views (commit 68785e4^) from
    this very batch: a single-turn run's groups.jsonl and samples.jsonl lines must not change by one byte."""
    rollouts, scored = single_turn_batch()
    golden = (DATA / "single_turn_views.jsonl").read_text(encoding="utf-8").splitlines()
    # the premise: the same rows as an episode do change (else the comparison below would prove nothing)
    rollouts.turns = Turns(torch.where(rollouts.completion_mask.bool(), 0, -1), torch.zeros(4, 1),
                           torch.ones(4, 1, dtype=torch.bool), [EpisodeRecord() for _ in range(4)])
    assert single_turn_lines(rollouts, scored) != golden
    rollouts.turns = None
    assert single_turn_lines(rollouts, scored) == golden


def hand_episode_batch():
    """One prompt, G = 2, C = 7. Row 0: model turn 0 (2 tokens), an environment turn (3 tokens), model turn 1
    (2 tokens). Row 1: one model turn of 3 tokens, then padding."""
    prompt = Prompt("rooms/0", ({"role": "user", "content": "Go to the kitchen."},), "kitchen",
                    {"start": "hall", "doors": {"hall", "kitchen"}})  # a set: JSON cannot hold it
    mask = torch.tensor([[1, 1, 0, 0, 0, 1, 1], [1, 1, 1, 0, 0, 0, 0]])
    turn_of_token = torch.tensor([[0, 0, -1, -1, -1, 1, 1], [0, 0, 0, -1, -1, -1, -1]])
    records = [EpisodeRecord([{"role": "assistant", "content": "go(kitchen)"}, {"role": "tool", "content": "ok"},
                              {"role": "assistant", "content": "Done."}], '{"room": "kitchen"}', "answered", [0.0, 0.0],
                             3, 1),
               EpisodeRecord([{"role": "assistant", "content": "Done."}], '{"room": "hall"}', "max_turns", [0.0], 0, 0)]
    turns = Turns(turn_of_token, torch.zeros(2, 2), torch.tensor([[True, True], [True, False]]), records)
    rollouts = RolloutBatch([prompt], 2, torch.tensor([[1, 2]]), torch.ones(1, 2, dtype=torch.long),
                            torch.tensor([[5, 6, 20, 21, 22, 7, 8], [5, 9, 8, 0, 0, 0, 0]]), mask, torch.zeros(2, 7),
                            ["Done.", "Done."], torch.tensor([False, True]), turns)
    verdicts = {"environment": [Verdict(Outcome.CORRECT, 1.0), Verdict(Outcome.WRONG, 0.0, "in the hall")]}
    scored = ScoredBatch(torch.tensor([1.0, 0.0]), torch.ones(2, dtype=torch.bool), verdicts,
                         {"environment": torch.tensor([1.0, 0.0])})
    return rollouts, scored


def test_an_episode_row_shows_its_whole_trajectory_with_environment_tokens_neutral():
    rollouts, scored = hand_episode_batch()
    # per-token advantages: -9.0 on the environment's tokens and 5.0 on padding must not be shown. The completion's
    # advantage is the mean over its sampled tokens: row 0 (0.3 + 0.6 + 0.9 + 1.2) / 4 = 0.75 (not / 7 = 0.4286),
    # row 1 (-0.2 - 0.4 - 0.6) / 3 = -0.4
    adv = torch.tensor([[0.3, 0.6, -9.0, -9.0, -9.0, 0.9, 1.2], [-0.2, -0.4, -0.6, 5.0, 5.0, 5.0, 5.0]])
    ratios = torch.tensor([[1.1, 0.9, 7.0, 7.0, 7.0, 1.2, 0.8], [1.0, 1.0, 1.0, 7.0, 7.0, 7.0, 7.0]])
    row = group_row(2, rollouts, scored, adv, 0, lambda ids: "".join(chr(92 + i) for i in ids), (0.2, 0.2), ratios)
    first, second = row["completions"]
    assert first["tokens"] == ["a", "b", "p", "q", "r", "c", "d"]  # up to the last sampled token: 7, not 4
    assert first["sampled"] == [1, 1, 0, 0, 0, 1, 1] and second["sampled"] == [1, 1, 1]
    assert first["token_advantages"] == [0.3, 0.6, 0.0, 0.0, 0.0, 0.9, 1.2]
    assert math.isclose(first["advantage"], 0.75, abs_tol=1e-6) and math.isclose(second["advantage"], -0.4,
                                                                                  abs_tol=1e-6)
    assert first["token_ratios"] == [1.1, 0.9, None, None, None, 1.2, 0.8] and second["token_ratios"] == [1.0] * 3
    assert first["episode"]["valid_calls"] == 3 and second["episode"]["stop_reason"] == "max_turns"
    assert "-0.0" not in json.dumps(row)  # environment tokens get 0, not the -0.0 of a negative advantage times 0


def test_episode_samples_carry_the_prompt_columns_and_metrics_list_every_stop_reason():
    rollouts, scored = hand_episode_batch()
    rows = sample_rows(2, rollouts, scored, 2)
    assert rows[0]["episode"]["final_state"] == '{"room": "kitchen"}' and rows[1]["episode"]["invalid_calls"] == 0
    # the columns score_state may read; a value JSON cannot hold is its repr, and the line can be written
    assert rows[0]["columns"]["start"] == "hall" and rows[0]["columns"]["doors"].startswith("{")
    json.dumps(rows)
    metrics = episode_metrics(rollouts)
    # turns 2 + 1 over 2 episodes = 1.5; calls (3 + 1 invalid + 0) / 2 = 2.0, 3 of 4 valid = 0.75;
    # environment tokens: row 0 extent 7 - 4 sampled = 3, row 1 3 - 3 = 0 -> 1.5; stop reasons 1 of 2 each
    assert metrics == {"episode/turns_mean": 1.5, "episode/calls_mean": 2.0, "episode/valid_call_share": 0.75,
                       "episode/env_tokens_mean": 1.5, "episode/stop_answered": 0.5, "episode/stop_env_done": 0.0,
                       "episode/stop_max_turns": 0.5, "episode/stop_turn_tokens": 0.0,
                       "episode/stop_episode_tokens": 0.0, "episode/stop_time": 0.0}


def test_the_report_reads_episodes_of_samples_and_names_a_malformed_one(tmp_path):
    rollouts, scored = hand_episode_batch()
    rows = sample_rows(2, rollouts, scored, 2)
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 2, "reward_mean": 0.5}) + "\n")
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shown = {c.reward: c.episode for c in load_run(tmp_path).completions}
    assert shown[1.0] == Episode([Message("assistant", "go(kitchen)"), Message("tool", "ok"),
                                  Message("assistant", "Done.")], 2, "answered", 3, 1, '{"room": "kitchen"}',
                                  [0.0, 0.0])  # the step rewards the record holds
    assert shown[0.0].model_turns == 1 and shown[0.0].stop_reason == "max_turns"
    rows[1]["episode"] = {"messages": "Done."}
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(RunDataError, match=r"line 2: \"episode\" is not an object with a list of \"messages\""):
        load_run(tmp_path)
