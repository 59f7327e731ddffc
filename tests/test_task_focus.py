"""task.focus: a final RL stage trains on the prompts the model still missed, as listed by a sampling
run's misses.jsonl; bad files are one ConfigError naming task.focus."""
from __future__ import annotations

import itertools
import json

import pytest

from rlvr.config.run import ConfigError, TaskConfig
from rlvr.tasks import build_task
from rlvr.tasks.focus import find_prompts, read_focus_ids


def level_one_ids(count: int) -> list[str]:
    task = build_task(TaskConfig(level=1))
    return [task.prompt(problem, "train").id for problem in task.train[:count]]


def test_misses_jsonl_and_plain_ids_are_read(tmp_path):
    jsonl = tmp_path / "misses.jsonl"
    jsonl.write_text('{"id": "a", "correct": 1, "samples": 4}\n\n{"id": "b", "correct": 0, "samples": 4}\n')
    plain = tmp_path / "ids.txt"
    plain.write_text("a\n  b  \n")
    assert read_focus_ids(str(jsonl)) == read_focus_ids(str(plain)) == frozenset({"a", "b"})


@pytest.mark.parametrize("text, message", [
    ("", "holds no prompt id"),
    ('{"id": "a"}\n{"ident": "b"}\n', "line 2 is not a JSON object with an 'id'"),
    ('{"id": 7}\n', "line 1: a prompt id must be a non-empty string"),
])
def test_bad_focus_files_name_the_key_and_line(tmp_path, text, message):
    path = tmp_path / "misses.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"task.focus: .*{message}"):
        build_task(TaskConfig(focus=str(path)))
    with pytest.raises(ConfigError, match="task.focus: .* is not a file"):
        build_task(TaskConfig(focus=str(tmp_path / "missing.jsonl")))


def test_focused_stream_draws_only_the_listed_prompts_and_all_of_them(tmp_path):
    wanted = level_one_ids(3)
    path = tmp_path / "misses.jsonl"
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in wanted))
    task = build_task(TaskConfig(focus=str(path)))
    drawn = [p.id for p in itertools.islice(task.train_prompts(5), 60)]
    # only the three ids (a filter that let other prompts through fails), and each of them (60 uniform draws
    # over 3 prompts miss one with probability 3 x (2/3)^60 ~ 1e-10)
    assert set(drawn) == set(wanted)
    assert drawn == [p.id for p in itertools.islice(build_task(TaskConfig(focus=str(path))).train_prompts(5), 60)]
    # held-out prompts stay the task's own: focus never changes what is measured
    assert [p.id for p in task.eval_prompts(4)] == [p.id for p in build_task(TaskConfig()).eval_prompts(4)]
    assert task.name == "arithmetic-l1" and task.level == 1


def test_ids_of_another_task_or_level_are_refused(tmp_path):
    path = tmp_path / "misses.jsonl"
    path.write_text(json.dumps({"id": level_one_ids(1)[0]}) + "\n")
    task = build_task(TaskConfig(level=2, focus=str(path)))  # a level-1 id never occurs in level 2's stream
    with pytest.raises(ConfigError, match="none of the 1 prompt ids .* is a train prompt of task 'arithmetic-l2'"):
        next(task.train_prompts(0))


def test_find_prompts_stops_when_the_split_is_read():
    # a stream over 2 prompts never shows "c": the search ends after PATIENCE x 2 draws bring nothing new
    stream = itertools.cycle([type("P", (), {"id": "a"})(), type("P", (), {"id": "b"})()])
    found, draws = find_prompts(stream, frozenset({"a", "c"}))
    assert [p.id for p in found] == ["a"] and draws == 2 + 20 * 2


def test_ids_found_only_in_part_are_said(tmp_path, capsys):
    # a file half of whose ids belong to another level: the stage trains on the half found, and says how many
    wanted = level_one_ids(2)
    path = tmp_path / "misses.jsonl"
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in [*wanted, "arithmetic-l2/train/47 + 35"]))
    drawn = {p.id for p in itertools.islice(build_task(TaskConfig(focus=str(path))).train_prompts(0), 40)}
    assert drawn == set(wanted)
    said = capsys.readouterr().err
    assert "task.focus: 2 of the 3 prompt ids" in said and "1 not found, e.g. 'arithmetic-l2/train/47 + 35'" in said
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in wanted))  # all found: nothing said
    next(build_task(TaskConfig(focus=str(path))).train_prompts(0))
    assert "task.focus" not in capsys.readouterr().err
