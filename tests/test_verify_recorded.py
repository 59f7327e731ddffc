"""`rlvr verify` on what a run recorded: a samples.jsonl line's recorded verdict beside the
re-checked one, the lines that disagree counted; a multi-turn run's final states re-scored by the task's environment
with the prompt columns samples.jsonl recorded."""
from __future__ import annotations

import json

import pytest

from rlvr.cli.verify import Line, verify_file
from rlvr.config.run import TaskConfig
from rlvr.grpo.step_log import sample_rows
from rlvr.tasks import TASKS
from rlvr.types import Outcome, Prompt, Verdict
from test_episode_views import hand_episode_batch


def _run(capsys, tmp_path, rows: list, verifier: str, task: TaskConfig) -> tuple[list[dict], str]:
    source, output = tmp_path / "samples.jsonl", tmp_path / "verdicts.jsonl"
    source.write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows))
    assert verify_file(verifier, source, task, output) == 0
    return [json.loads(line) for line in output.read_text().splitlines()], capsys.readouterr().err


def test_recorded_verdicts_are_compared_with_the_rechecked_ones(tmp_path, capsys):
    def row(completion: str, recorded=None) -> dict:
        return {"completion": completion, "reference": "4", **({} if recorded is None else {"verdicts": recorded})}

    correct = {"math": {"outcome": "correct", "score": 1.0, "detail": "as recorded"}}
    rows = [row("Answer: 4", correct),  # 1: agrees
            row("Answer: 5", correct),  # 2: the outcome differs
            row("Answer: 4"),  # 3: nothing recorded: a plain verdict line, as before
            "{not json\n",  # 4: a bad line is an error verdict, never compared
            row("Answer: 4", {"math": {"outcome": "correct", "score": "1"}}),  # 5: no numeric score: not compared
            row("Answer: 4", {"math": {"outcome": "correct", "score": 0.5}}),  # 6: same outcome, another score
            row("Answer: 4", {"format": correct["math"]})]  # 7: another verifier's verdict: not compared
    out, err = _run(capsys, tmp_path, rows, "math", TaskConfig())
    assert [v.get("agrees") for v in out] == [True, False, None, None, None, False, None]
    assert out[1]["outcome"] == "wrong" and out[1]["recorded"] == {"outcome": "correct", "score": 1.0,
                                                                   "detail": "as recorded"}
    assert set(out[2]) == {"line", "outcome", "score", "detail"}  # a line without a recorded verdict: unchanged
    assert "recorded verdicts: 3 compared, 2 disagree (lines 2, 6)" in err


def test_a_file_without_recorded_verdicts_has_no_comparison_in_its_summary(tmp_path, capsys):
    _, err = _run(capsys, tmp_path, [{"completion": "Answer: 4", "reference": "4"}], "math", TaskConfig())
    assert "recorded verdicts" not in err and "mean score" in err


class Rooms:
    """An environment task whose state check reads the prompt's columns, as examples/capitals.py does."""

    name, tools, scores_state = "rooms", (), True

    def __init__(self, config):
        self.environment = lambda episode_config: self

    def score_state(self, final_state: str, prompt: Prompt) -> Verdict:
        room = json.loads(final_state)["room"]
        moved = room != prompt.columns["start"]  # a KeyError without the recorded columns
        ok = moved and room == prompt.reference
        return Verdict(Outcome.CORRECT if ok else Outcome.WRONG, float(ok), f"in the {room}")


def test_environment_verdicts_re_score_recorded_states_with_the_recorded_columns(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(TASKS, "rooms", Rooms)
    rollouts, scored = hand_episode_batch()  # row 0 ends in the kitchen (correct), row 1 in the hall (wrong)
    rows = sample_rows(2, rollouts, scored, 2)  # written as a run writes them
    out, err = _run(capsys, tmp_path, rows, "environment", TaskConfig(name="rooms"))
    assert [(v["outcome"], v["agrees"]) for v in out] == [("correct", True), ("wrong", True)]
    assert "recorded verdicts: 2 compared, 0 disagree" in err
    # a state that no longer earns what training recorded (the environment's check or the log changed)
    rows[0]["episode"]["final_state"] = '{"room": "hall"}'
    out, err = _run(capsys, tmp_path, rows, "environment", TaskConfig(name="rooms"))
    assert (out[0]["outcome"], out[0]["recorded"]["outcome"], out[0]["agrees"]) == ("wrong", "correct", False)
    assert "2 compared, 1 disagree (line 1)" in err


@pytest.mark.parametrize("record, prompt", [
    ({"prompt_id": "rooms/0", "question": "Go.", "columns": {"start": "hall"}},
     Prompt("rooms/0", ({"role": "user", "content": "Go."},), "kitchen", {"start": "hall"})),
    ({"columns": ["not", "an", "object"]}, Prompt("recorded", (), "kitchen", {})),  # a plain line: what is there
])
def test_a_line_gives_back_the_task_row_it_recorded(record, prompt):
    assert Line("state", "kitchen", record).prompt() == prompt
