"""Bring your own data: the layouts the qa task reads (plain, TRL prompt-only, verl parquet) in each
file type, the start-up lines, and bad rows named by the line an editor shows (or the row counted from 1)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rlvr.cli.main import main
from rlvr.config.run import TaskConfig
from rlvr.tasks import build_task
from rlvr.tasks.qa import DatasetError

WORDS = [{"question": f"Sam has {i} pens and gets {i + 2} more. How many pens?", "answer": f"#### {2 * i + 2}"}
         for i in range(30)]


def jsonl(path: Path, rows: list[dict], blank_after: int | None = None) -> str:
    lines = [json.dumps(r) for r in rows]
    if blank_after is not None:
        lines.insert(blank_after, "")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def parquet(path: Path, rows: list[dict]) -> str:
    import datasets

    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return str(path)


def qa(path: str, **options) -> object:
    return build_task(TaskConfig(name="qa", path=path, **options))


def every_prompt(task) -> list:
    return [task.prompt(row) for row in task.train + task.held_out]


def data_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("rlvr: data ")]


# --- start-up lines ---------------------------------------------------------------------------------------------

def test_start_up_lines_count_rows_kept_skipped_and_held_out(tmp_path: Path, capsys) -> None:
    # 30 good rows + 2 bad (no answer; a repeated question) = 32 rows read, 2 skipped, 30 left for train + held-out
    rows = WORDS + [{"question": "Q?"}, WORDS[0]]
    path = jsonl(tmp_path / "mine.jsonl", rows)
    task = qa(path)
    layout, split = data_lines(capsys.readouterr().err)
    assert layout == (f"rlvr: data {path}: layout plain (questions from column 'question', references from column "
                      "'answer'): 32 rows, 2 skipped as bad")
    train, held = len(task.train), len(task.held_out)
    assert train + held == 30 and held > 0  # the hashed 10% of these 30 questions is not empty
    assert split.startswith(f"rlvr: data {path}: {train} rows for training, {held} held out for evaluation (about 10%")
    assert "task.eval_split" in split


def test_start_up_line_with_a_held_out_file_counts_the_dropped_repeats(tmp_path: Path, capsys) -> None:
    # train: rows 0..19; held-out file: rows 15..29; rows 15..19 repeat held-out questions: 15 train, 15 held out
    train_path, test_path = jsonl(tmp_path / "train.jsonl", WORDS[:20]), jsonl(tmp_path / "test.jsonl", WORDS[15:])
    task = qa(train_path, eval_split=test_path)
    assert (len(task.train), len(task.held_out)) == (15, 15)
    split = data_lines(capsys.readouterr().err)[-1]
    assert split == (f"rlvr: data {train_path}: 15 rows for training, 15 held out for evaluation (from {test_path}; "
                     "5 training rows dropped as they repeat a held-out question)")


# --- bad rows named as the user counts them -------------------------------------------------------------------------

def test_jsonl_bad_row_is_named_by_its_editor_line(tmp_path: Path, capsys) -> None:
    # A blank line after the 3rd record: the 10th record (no answer) sits on line 11; `datasets` skips the blank line
    rows = WORDS[:9] + [{"question": "No answer here?"}] + WORDS[9:12]
    path = jsonl(tmp_path / "d.jsonl", rows, blank_after=3)
    qa(path)
    assert "line 11: field 'answer' is missing or empty" in capsys.readouterr().err
    with pytest.raises(DatasetError, match=r"d\.jsonl line 11: field 'answer' is missing or empty"):
        qa(path, bad_rows="error")


def test_jsonl_read_line_by_line_names_lines_the_same_way(tmp_path: Path, capsys) -> None:
    # An unreadable line 11 makes the file be read line by line; the record without an answer is line 2. Both are
    # named by their line, in file order, though unreadable lines are found in a first pass over the file.
    lines = [json.dumps(r) for r in WORDS[:9]] + ["{not json"]
    lines.insert(1, json.dumps({"question": "No answer?"}))
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n")
    qa(str(path))
    err = capsys.readouterr().err
    assert re.search(r"skipped 2 of 11 rows \(line 2: field 'answer' is missing or empty; line 11: not valid JSON", err)


def test_csv_bad_row_is_named_by_its_csv_line(tmp_path: Path, capsys) -> None:
    # line 1 header; line 2-3 one record whose quoted question spans two lines; line 4 blank; line 5 a record without
    # an answer: the CSV's line 5 (the 2nd data record)
    path = tmp_path / "d.csv"
    path.write_text('question,answer\n"Two\nlines?",4\n\n"No answer?",\n"Five?",5\n')
    task = qa(str(path))
    assert "line 5: field 'answer' is missing or empty" in capsys.readouterr().err
    assert sorted(p.reference for p in every_prompt(task)) == ["4", "5"]  # CSV numbers read as numbers


def test_parquet_and_json_array_rows_are_counted_from_one(tmp_path: Path, capsys) -> None:
    rows = WORDS[:4] + [{"question": "No answer?", "answer": None}] + WORDS[4:6]  # the 5th row
    qa(parquet(tmp_path / "d.parquet", rows))
    assert "row 5: field 'answer' is missing or empty" in capsys.readouterr().err
    array = tmp_path / "d.json"
    array.write_text(json.dumps(rows, indent=2))  # one record spans several lines: named by its place in the array
    qa(str(array))
    assert "record 5: field 'answer' is missing or empty" in capsys.readouterr().err
    # an array after more than one 4096-byte read of blank lines is still an array
    array.write_bytes(b"\n" * 5000 + json.dumps(rows).encode())
    qa(str(array))
    assert "record 5: field 'answer' is missing or empty" in capsys.readouterr().err


# --- TRL prompt-only ------------------------------------------------------------------------------------------------

def test_trl_standard_prompt_with_solution_column_and_extra_columns(tmp_path: Path) -> None:
    rows = [{"prompt": f"What is {i} + {i}?", "solution": str(2 * i), "difficulty": i % 3} for i in range(12)]
    path = jsonl(tmp_path / "trl.jsonl", rows)
    with pytest.raises(DatasetError) as err:
        qa(path)  # TRL keeps its reference in a column of its own, which task.answer_field names
    assert str(err.value) == (f"{path}: no column 'answer' (task.answer_field: TRL's prompt-only rows carry the "
                              "reference in a column of their own); columns: prompt, solution, difficulty; "
                              "set task.answer_field=solution?")
    task = qa(path, answer_field="solution")
    prompts = {p.id: p for p in every_prompt(task)}
    first = prompts[f"{path}/5"]
    assert first.reference == "10"
    assert first.messages[-1]["content"] == "What is 5 + 5? End with 'Answer: <number>'."  # a text is a question
    assert first.columns == {"solution": "10", "difficulty": 2}  # every column but the prompt


def test_trl_conversational_prompt_is_used_as_written(tmp_path: Path, capsys) -> None:
    rows = [{"prompt": [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": f"Add {i} and 1. Put the result in \\boxed{{}}."}],
             "answer": str(i + 1), "source": "mine"} for i in range(10)]
    path = parquet(tmp_path / "chat.parquet", rows)
    task = qa(path, system_prompt="ignored: the rows have a system turn")
    prompt = {p.id: p for p in every_prompt(task)}[f"{path}/3"]
    assert prompt.messages == ({"role": "system", "content": "Be brief."},
                               {"role": "user", "content": "Add 3 and 1. Put the result in \\boxed{}."})
    assert prompt.reference == "4" and prompt.columns == {"answer": "4", "source": "mine"}
    assert "10 prompts are chat messages, used as written" in data_lines(capsys.readouterr().err)[0]
    no_system = [{**row, "prompt": row["prompt"][1:]} for row in rows]
    task = qa(parquet(tmp_path / "user_only.parquet", no_system), system_prompt="Think first.")
    assert every_prompt(task)[0].messages[0] == {"role": "system", "content": "Think first."}


def test_question_column_wins_over_prompt_unless_format_says_trl(tmp_path: Path) -> None:
    rows = [{"question": f"Q{i}?", "prompt": f"P{i}?", "answer": str(i)} for i in range(10)]
    path = jsonl(tmp_path / "both.jsonl", rows)
    assert every_prompt(qa(path))[0].messages[-1]["content"].startswith("Q")
    assert every_prompt(qa(path, format="trl"))[0].messages[-1]["content"].startswith("P")


# --- verl parquet ----------------------------------------------------------------------------------------------

def verl_rows(n: int) -> list[dict]:
    return [{"data_source": "openai/gsm8k",
             "prompt": [{"role": "user", "content": f"Tom has {i} apples and eats one. How many are left? Let's think "
                                                    "step by step and output the final answer after \"####\"."}],
             "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(i - 1)},
             "extra_info": {"split": "train", "index": i}} for i in range(1, n + 1)]


def test_verl_parquet_reference_from_ground_truth_and_columns_passed_on(tmp_path: Path, capsys) -> None:
    path = parquet(tmp_path / "train.parquet", verl_rows(12))
    task = qa(path)
    err = capsys.readouterr().err
    assert "layout verl (prompts from column 'prompt', references from reward_model.ground_truth)" in err
    prompt = {p.id: p for p in every_prompt(task)}[f"{path}/6"]  # the 7th row: 7 apples, 6 left
    assert prompt.reference == "6" and len(prompt.messages) == 1 and prompt.messages[0]["content"].startswith("Tom")
    assert prompt.columns["data_source"] == "openai/gsm8k" and prompt.columns["ability"] == "math"
    assert prompt.columns["extra_info"] == {"split": "train", "index": 7}
    assert prompt.columns["reward_model"]["ground_truth"] == "6" and "prompt" not in prompt.columns


def test_verl_rows_without_a_rule_reference_are_bad_rows(tmp_path: Path, capsys) -> None:
    rows = verl_rows(6)
    rows[2]["reward_model"] = {"style": "model", "ground_truth": None}  # row 3
    rows[4]["prompt"] = [{"role": "robot", "content": "beep"}]  # row 5
    qa(parquet(tmp_path / "v.parquet", rows))
    err = capsys.readouterr().err
    assert "row 3: field 'reward_model' has no 'ground_truth' (style 'model')" in err
    assert "row 5: field 'prompt': message 1 is not a {'role': system|user|assistant, 'content': text} pair" in err


def test_a_named_layout_missing_its_column_is_one_error_naming_the_columns(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "plain.jsonl", WORDS[:5])
    with pytest.raises(DatasetError) as err:
        qa(path, format="verl")
    assert str(err.value) == (f"{path}: no column 'prompt' (needed by the verl layout); columns: question, answer")
    with pytest.raises(DatasetError, match=re.escape("no column 'problem' (task.question_field), nor a 'prompt'")):
        qa(path, question_field="problem")


def test_screening_drops_too_long_prompts_from_both_sides_and_says_the_new_split(tmp_path, capsys):
    rows = [{"question": f"What is {i} + {i}? " + ("long " * 50 if i in (3, 17) else ""), "answer": str(2 * i)}
            for i in range(40)]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    task = qa(str(path))
    train, held = list(task.train), list(task.held_out)
    too_long = lambda prompt: "too long" if "long long" in prompt.messages[-1]["content"] else None  # noqa: E731
    long_rows = [row for row in train + held if "long long" in task.prompt(row).messages[-1]["content"]]
    assert len(long_rows) == 2
    capsys.readouterr()
    task.screen_prompts(too_long)
    # each side keeps exactly its rows that fit, in order (mutation: held_out keeping the rejected rows instead)
    assert task.train == [row for row in train if row not in long_rows]
    assert task.held_out == [row for row in held if row not in long_rows]
    assert f"{len(task.train)} rows for training, {len(task.held_out)} held out" in capsys.readouterr().err


def test_an_empty_reference_is_named_with_the_answer_s_last_80_characters(tmp_path, capsys):
    long_answer = "a" * 20 + "b" * 75 + "####"  # nothing after ####: an empty reference
    rows = WORDS[:4] + [{"question": "Empty?", "answer": long_answer}]
    qa(jsonl(tmp_path / "e.jsonl", rows))
    err = capsys.readouterr().err
    assert f"line 5: field 'answer' gives an empty reference (answer {long_answer[-80:]!r})" in err
    assert repr("aa" + "b" * 75 + "####") not in err  # 80 characters, not 81


def test_a_too_long_prompt_of_the_held_out_file_is_named_with_its_file(tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    held = tmp_path / "held.jsonl"
    train.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
                             for i in range(6)))
    held.write_text(json.dumps({"question": "What is 50 + 1?", "answer": "51"}) + "\n"
                    + json.dumps({"question": "long " * 60, "answer": "1"}) + "\n")
    task = qa(str(train), eval_split=str(held))
    capsys.readouterr()
    task.screen_prompts(lambda prompt: "too long" if "long long" in prompt.messages[-1]["content"] else None)
    err = capsys.readouterr().err
    # a row of task.path is named by its line alone; one of the held-out file by its line and that file
    assert f"line 2 of {held}" in err and len(task.held_out) == 1


# --- edge cases: BOMs, whitespace lines, wrong types, conversations --------------------------------------

BOM = b"\xef\xbb\xbf"


def test_a_jsonl_file_with_a_bom_keeps_its_first_line(tmp_path: Path, capsys) -> None:
    # line 1 was "not valid JSON (Unexpected UTF-8 BOM)"; now all 10 rows are kept (catches decoding line 1 as utf-8)
    path = tmp_path / "bom.jsonl"
    path.write_bytes(BOM + "\n".join(json.dumps(r) for r in WORDS[:9] + [{"question": "No answer?"}]).encode())
    task = qa(str(path))
    err = capsys.readouterr().err
    assert "Unexpected UTF-8 BOM" not in err and "10 rows, 1 skipped as bad" in err
    assert "line 10: field 'answer' is missing or empty" in err
    assert len(task.train) + len(task.held_out) == 9


def test_a_json_array_with_a_bom_is_labelled_by_records(tmp_path: Path, capsys) -> None:
    rows = WORDS[:4] + [{"question": "No answer?", "answer": None}] + WORDS[4:6]  # the 5th record
    path = tmp_path / "bom.json"
    path.write_bytes(BOM + json.dumps(rows, indent=2).encode())  # catches _is_array not stripping the BOM
    qa(str(path))
    assert "record 5: field 'answer' is missing or empty" in capsys.readouterr().err


def test_a_csv_whitespace_only_line_does_not_shift_later_lines(tmp_path: Path, capsys) -> None:
    # line 1 header, line 2 a record, line 3 spaces only (pandas skips it; csv.reader read a record), line 4 the
    # record without an answer: named line 4, not line 3 (catches counting the spaces line as a record)
    path = tmp_path / "d.csv"
    path.write_text('question,answer\n"Two?",2\n   \n"No answer?",\n"Five?",5\n')
    qa(str(path))
    assert "line 4: field 'answer' is missing or empty" in capsys.readouterr().err


def test_a_csv_record_with_an_empty_first_cell_is_a_record(tmp_path: Path, capsys) -> None:
    # line 2's question is empty (a bad row itself), line 3 lacks its answer: each named by its own line. Reading a
    # record whose first cell is empty as a blank line (an `or` for the `and` in positions._csv_record_lines) names
    # the second one line 2.
    path = tmp_path / "d.csv"
    path.write_text('question,answer\n,7\n"No answer?",\n"Five?",5\n"Six?",6\n')
    qa(str(path))
    err = capsys.readouterr().err
    assert "line 2: field 'question' is missing or empty" in err
    assert "line 3: field 'answer' is missing or empty" in err


@pytest.mark.parametrize(("ground_truth", "kind"), [(["3"], "list"), (True, "bool")])
def test_a_verl_ground_truth_of_the_wrong_type_says_so(tmp_path: Path, capsys, ground_truth, kind) -> None:
    rows = verl_rows(6)
    rows[2]["reward_model"] = {"style": "rule", "ground_truth": ground_truth}  # row 3, read through JSON lines
    qa(jsonl(tmp_path / "v.jsonl", rows))
    err = capsys.readouterr().err
    assert f"line 3: field 'reward_model''s 'ground_truth' has the wrong type: {kind}" in err and "empty" not in err


def test_an_answer_cell_holding_a_mapping_has_the_wrong_type(tmp_path: Path, capsys) -> None:
    rows = WORDS[:3] + [{"question": "Dict?", "answer": {"value": 4}}] + WORDS[3:6]  # line 4
    qa(jsonl(tmp_path / "d.jsonl", rows))
    err = capsys.readouterr().err
    assert "line 4: field 'answer' has the wrong type: dict" in err and "missing" not in err


def chat_rows(prompt_of_row_3: list[dict]) -> list[dict]:
    rows = [{"prompt": [{"role": "user", "content": f"Add {i} and 1."}], "answer": str(i + 1)} for i in range(6)]
    rows[2]["prompt"] = prompt_of_row_3
    return rows


def test_a_conversation_ending_with_an_assistant_turn_is_a_bad_row(tmp_path: Path, capsys) -> None:
    turns = [{"role": "user", "content": "Add 2 and 1."}, {"role": "assistant", "content": "It is 3."}]
    qa(parquet(tmp_path / "c.parquet", chat_rows(turns)))
    assert "row 3: field 'prompt': the prompt must end with a user turn (its last message is 'assistant')" in (
        capsys.readouterr().err)


def test_a_conversation_with_no_user_text_is_a_bad_row(tmp_path: Path, capsys) -> None:
    # a system turn and a blank user turn: not empty, yet no question (catches `if not turns`)
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  "}]
    qa(parquet(tmp_path / "c.parquet", chat_rows(turns)))
    assert "row 3: field 'prompt' holds no user message with text" in capsys.readouterr().err


def test_a_missing_held_out_file_is_no_such_file(tmp_path: Path) -> None:
    data = jsonl(tmp_path / "d.jsonl", [{"question": f"{i} + 1?", "answer": str(i + 1)} for i in range(5)])
    with pytest.raises(DatasetError, match="task.eval_split: no such file or directory: 'nope.jsonl'"):
        qa(data, eval_split="nope.jsonl")
    with pytest.raises(DatasetError, match="is a single file, so the held-out split must be another file"):
        qa(data, eval_split="test")  # a split's name, which a single file does not have


def test_a_dataset_that_holds_nothing_out_stops_before_training(tiny_model_dir, tmp_path: Path, capsys) -> None:
    # 3 rows: the hashed 10% picks none of them. Before, the run trained to the end and then failed (no FINISHED)
    data = jsonl(tmp_path / "d.jsonl", [{"question": q, "answer": a} for q, a in [("1+1?", "2"), ("2+2?", "4"),
                                                                                  ("3+3?", "6")]])
    out = tmp_path / "run"
    code = main(["train", f"model.name_or_path={tiny_model_dir}", f"output_dir={out}", "task.name=qa",
                 f"task.path={data}", "max_steps=1", "logging.progress=off"])
    assert code == 2 and "the held-out split is empty" in capsys.readouterr().err
    assert not (out / "metrics.jsonl").exists()  # nothing trained
    # without the final evaluation the same data trains (an `or` in the check would refuse it too)
    code = main(["train", f"model.name_or_path={tiny_model_dir}", f"output_dir={tmp_path / 'run2'}", "task.name=qa",
                 f"task.path={data}", "max_steps=1", "logging.progress=off", "eval.at_end=false",
                 "rollout.group_size=2", "rollout.prompts_per_step=1", "rollout.max_new_tokens=4"])
    assert code == 0 and (tmp_path / "run2" / "metrics.jsonl").is_file()


@pytest.mark.parametrize(("name", "text"), [("e.jsonl", ""), ("e.csv", ""), ("h.csv", "question,answer\n"),
                                            ("b.jsonl", "\n\n\n"), ("e.json", "  \n")])
def test_a_file_without_rows_says_so(tmp_path: Path, name: str, text: str) -> None:
    # `datasets` said "corresponds to no data!", or "could not read as json: " with nothing after the colon
    (tmp_path / name).write_text(text)
    with pytest.raises(DatasetError, match=f"{name}: the file holds no rows$"):
        qa(str(tmp_path / name))


def test_a_question_holding_a_mapping_has_the_wrong_type(tmp_path: Path, capsys) -> None:
    rows = [{"question": f"{i} + 1?", "answer": str(i + 1)} for i in range(4)] + [{"question": {"a": 1}, "answer": "3"}]
    qa(jsonl(tmp_path / "d.jsonl", rows))
    assert "line 5: field 'question' has the wrong type: dict \"{'a': 1}\"" in capsys.readouterr().err
