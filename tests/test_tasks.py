"""Tasks: arithmetic spaces and splits, chat layout, qa loading and its error messages."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from rlvr.config.run import ConfigError, TaskConfig
from rlvr.tasks import TASKS, Task, build_task
from rlvr.tasks.arithmetic import splits
from rlvr.tasks.chat import build_messages
from rlvr.tasks.qa import DatasetError, extract_reference


def take(task: Task, seed: int, n: int = 50) -> list[str]:
    return [p.id for p in itertools.islice(task.train_prompts(seed), n)]


# --- arithmetic ---------------------------------------------------------------------------------

def test_train_stream_is_deterministic_by_seed() -> None:
    task = build_task(TaskConfig(name="arithmetic", level=2))
    assert take(task, 0) == take(task, 0)
    assert take(task, 0) != take(task, 1)
    assert take(build_task(TaskConfig(level=2)), 3) == take(task, 3)  # a fresh task, same stream


def test_train_stream_samples_with_replacement_from_train_only() -> None:
    task = build_task(TaskConfig(level=1))
    ids = take(task, 0, 2000)
    assert all(i.startswith("arithmetic-l1/train/") for i in ids)
    assert len(set(ids)) == len(splits(1)[0])  # 2000 draws over 137 problems cover them all
    assert len(set(ids)) < len(ids)


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_splits_disjoint_and_held_out_large_enough(level: int) -> None:
    train, held = splits(level)
    train_texts, held_texts = {p.canonical for p in train}, {p.canonical for p in held}
    assert len(train_texts) == len(train) and len(held_texts) == len(held)  # no duplicates
    assert not train_texts & held_texts
    assert len(held) >= 200 and len(held) == max(200, (len(train) + len(held)) // 5)
    assert "3 + 4" not in train_texts | held_texts  # the one-shot example is in neither split
    assert len(train) > 0


def test_space_sizes() -> None:
    sizes = {level: sum(map(len, splits(level))) for level in (1, 2, 3, 4)}
    assert sizes[1] == 338 - 1  # 2 ops x 13 x 13, minus the one-shot example
    assert sizes[2] == 100 * 100 + 5050 + 11 * 11 - 1
    assert sizes[3] == 90 * 8 + 13 ** 3
    assert sizes[4] == 90 * 90


def test_references_and_prompt_text() -> None:
    by_level = {level: {p.canonical: p.value for s in splits(level) for p in s} for level in (1, 2, 3, 4)}
    assert by_level[1]["7 * 8"] == 56 and by_level[1]["12 + 0"] == 12 and by_level[1]["0 * 9"] == 0
    assert by_level[2]["99 - 99"] == 0 and by_level[2]["41 - 7"] == 34 and "7 - 41" not in by_level[2]
    assert by_level[2]["12 * 12"] == 144 and "1 * 5" not in by_level[2]
    assert by_level[3]["2 + 3 * 4"] == 14  # precedence: not 20
    assert by_level[3]["99 * 9"] == 891 and by_level[4]["37 * 24"] == 888

    prompt = build_task(TaskConfig(level=3, one_shot=False)).eval_prompts(1)[0]
    canonical = prompt.id.split("/")[-1]
    assert prompt.id.startswith("arithmetic-l3/eval/")
    assert prompt.reference == str(by_level[3][canonical])
    assert prompt.messages[-1]["content"] == f"What is {canonical}? End with 'Answer: <number>'."


def test_eval_prompts_fixed_order_and_all_when_too_many() -> None:
    task = build_task(TaskConfig(level=1))
    first10 = [p.id for p in task.eval_prompts(10)]
    assert first10 == [p.id for p in task.eval_prompts(50)][:10]
    assert len(task.eval_prompts(10_000)) == 200  # asks beyond the split: everything available
    assert task.name == "arithmetic-l1"


# --- chat layout --------------------------------------------------------------------------------

def test_build_messages_default_has_example_and_no_system_turn() -> None:
    messages = build_messages("What is 5 * 6?", TaskConfig())
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"] == "What is 3 + 4? End with 'Answer: <number>'."
    assert messages[1]["content"] == "3 + 4 = 7\nAnswer: 7"
    assert messages[2]["content"] == "What is 5 * 6? End with 'Answer: <number>'."


def test_build_messages_with_system_prompt_without_example() -> None:
    config = TaskConfig(system_prompt="Be brief.", one_shot=False, instruction="")
    messages = build_messages("  What is 5 * 6? ", config)
    assert messages == ({"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "What is 5 * 6?"})


def test_build_messages_system_and_example() -> None:
    messages = build_messages("Q?", TaskConfig(system_prompt="S", instruction=" Say it. "))
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"] == "What is 3 + 4? Say it."
    assert messages[-1]["content"] == "Q? Say it."


# --- qa -----------------------------------------------------------------------------------------

GSM8K = [{"question": f"Tom has {i} apples and buys {i + 1} more. How many?",
          "answer": f"He has {i} + {i + 1} = {2 * i + 1}.\n#### {2 * i + 1}", "topic": "apples"}
         for i in range(40)]
MATH = [{"problem": f"Compute $\\frac{{1}}{{{i + 2}}}$.",
         "solution": f"It is $\\boxed{{\\frac{{1}}{{{i + 2}}}}}$.", "level": "Level 1"}
        for i in range(40)]


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_extract_reference_forms() -> None:
    assert extract_reference("so 8 * 9 = 72\n#### 72") == "72"
    assert extract_reference("#### 1,000") == "1000"
    assert extract_reference("#### x, y") == "x, y"
    assert extract_reference("first \\boxed{1}, then \\boxed{\\frac{1}{2}}.") == "\\frac{1}{2}"
    assert extract_reference("$\\boxed{\\{1, 2\\}}$") == "\\{1, 2\\}"
    assert extract_reference("$\\boxed 5$") == "5"
    assert extract_reference("  42 ") == "42"
    with pytest.raises(ValueError, match="never close"):
        extract_reference("\\boxed{\\frac{1}{2}")


def test_qa_jsonl_gsm8k(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "gsm.jsonl", GSM8K)
    task = build_task(TaskConfig(name="qa", path=path))
    train, held = task.train, task.held_out  # type: ignore[attr-defined]
    assert len(train) + len(held) == 40 and held
    assert not {r.question for r in train} & {r.question for r in held}
    prompt = task.eval_prompts(1)[0]
    row = int(prompt.id.rsplit("/", 1)[1])
    assert prompt.id == f"{path}/{row}"
    assert prompt.reference == str(2 * row + 1)
    assert prompt.columns["topic"] == "apples" and "question" not in prompt.columns
    assert prompt.messages[-1]["content"].startswith(GSM8K[row]["question"])
    stream = [p.id for p in itertools.islice(task.train_prompts(7), 30)]
    assert stream == [p.id for p in itertools.islice(task.train_prompts(7), 30)]
    assert not set(stream) & {p.id for p in task.eval_prompts(100)}
    assert len(task.eval_prompts(100)) == len(held)  # fewer than asked: all of them


def test_qa_parquet_math_with_eval_file(tmp_path: Path) -> None:
    import datasets

    datasets.Dataset.from_list(MATH[:30]).to_parquet(str(tmp_path / "train.parquet"))
    datasets.Dataset.from_list(MATH[25:]).to_parquet(str(tmp_path / "test.parquet"))
    config = TaskConfig(name="qa", path=str(tmp_path / "train.parquet"), eval_split=str(tmp_path / "test.parquet"),
                        question_field="problem", answer_field="solution")
    task = build_task(config)
    assert len(task.eval_prompts(100)) == 15
    assert len(task.train) == 25  # type: ignore[attr-defined]  # rows 25..29 repeat held-out questions
    assert task.eval_prompts(1)[0].reference == "\\frac{1}{27}"
    assert task.eval_prompts(1)[0].columns["level"] == "Level 1"


def test_qa_saved_dataset_dict_splits(tmp_path: Path) -> None:
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_list(GSM8K[:30]),
                          "test": datasets.Dataset.from_list(GSM8K[30:])}).save_to_disk(str(tmp_path / "gsm"))
    task = build_task(TaskConfig(name="qa", path=str(tmp_path / "gsm"), eval_split="test"))
    assert len(task.eval_prompts(100)) == 10
    assert task.eval_prompts(1)[0].id == f"{tmp_path / 'gsm'}/test/0"
    with pytest.raises(DatasetError, match=r"no split 'dev'; splits: train, test"):
        build_task(TaskConfig(name="qa", path=str(tmp_path / "gsm"), eval_split="dev"))


@pytest.mark.parametrize("row, message", [
    ({"question": "Q?"}, "line 4: field 'answer' is missing or empty"),
    ({"question": "Q?", "answer": None}, "line 4: field 'answer' is missing or empty"),
    ({"question": "  ", "answer": "#### 1"}, "line 4: field 'question' is missing or empty"),
    ({"question": "Q?", "answer": "no number ####  "}, "line 4: field 'answer' gives an empty reference"),
    ({"question": "Q?", "answer": "\\boxed{1"}, "line 4: field 'answer' has a \\boxed{ whose braces never close"),
])
def test_qa_bad_row_names_file_row_and_field(tmp_path: Path, row: dict, message: str, capsys) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", GSM8K[:3] + [row] + GSM8K[3:5])
    with pytest.raises(DatasetError) as err:
        build_task(TaskConfig(name="qa", path=path, bad_rows="error"))
    assert str(err.value).startswith(f"{path} {message}")
    task = build_task(TaskConfig(name="qa", path=path))  # the default skips it and says so at start
    assert len(task.train) + len(task.held_out) == 5
    assert f"{path}: skipped 1 of 6 rows ({message}" in capsys.readouterr().err


def test_qa_bad_lines_and_duplicates_are_skipped_and_counted(tmp_path: Path, capsys) -> None:
    # invalid UTF-8, not JSON, not an object, a repeated question: 4 of 9 lines skipped (hand count)
    path = tmp_path / "data.jsonl"
    good = [json.dumps(r).encode() for r in GSM8K[:5]]
    path.write_bytes(b"\n".join([good[0], b'{"question": "\xff\xfe?", "answer": "#### 1"}', good[1], b"{not json",
                                  good[2], b"[1, 2]", good[3], json.dumps(GSM8K[0]).encode(), good[4]]) + b"\n")
    task = build_task(TaskConfig(name="qa", path=str(path)))
    assert len(task.train) + len(task.held_out) == 5
    err = capsys.readouterr().err
    assert "skipped 4 of 9 rows" in err and "line 2: not valid UTF-8" in err and "line 4: not valid JSON" in err
    assert "line 6: a JSON array, not an object" in err and "line 8: the same question as line 1" in err
    null = tmp_path / "null.jsonl"  # a null line is named as JSON names it, not as Python's NoneType
    null.write_text("".join(json.dumps(r) + "\n" for r in GSM8K[:5]) + "null\n")
    build_task(TaskConfig(name="qa", path=str(null)))
    assert "line 6: a JSON null, not an object" in capsys.readouterr().err
    with pytest.raises(DatasetError, match="line 2: not valid UTF-8"):
        build_task(TaskConfig(name="qa", path=str(path), bad_rows="error"))


def test_qa_dataset_with_no_usable_row_fails_before_any_model(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", [{"question": "Q?"}, {"question": "R?", "answer": ""}])
    with pytest.raises(DatasetError, match=r"no usable row \(.*skipped 2 of 2 rows"):
        build_task(TaskConfig(name="qa", path=path))


def test_qa_missing_file_and_missing_column(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match=r"dataset file '.*nope.jsonl' does not exist"):
        build_task(TaskConfig(name="qa", path=missing))
    path = write_jsonl(tmp_path / "math.jsonl", MATH[:3])
    with pytest.raises(DatasetError) as err:
        build_task(TaskConfig(name="qa", path=path))
    assert str(err.value) == (f"{path}: no column 'question' (task.question_field), nor a 'prompt' column (TRL and "
                              "verl layouts); columns: problem, solution, level")
    assert isinstance(err.value, ConfigError) and isinstance(err.value, ValueError)


def test_unknown_task_name() -> None:
    assert set(TASKS) >= {"arithmetic", "qa", "calculator", "humaneval"}
    valid = ", ".join(sorted(TASKS))  # every task, sorted: a new one is a line of config/task_catalog.py, not here
    with pytest.raises(ConfigError, match=rf"unknown task 'arithmetc'; valid tasks: {valid}"):
        build_task(TaskConfig(name="arithmetc"))


def test_qa_prompt_longer_than_the_context_is_a_bad_row(tiny_model_dir, tmp_path: Path, capsys) -> None:
    # the tiny model has 512 positions and one token per character: a 600-character question cannot fit
    from rlvr.config.run import load_config
    from rlvr.model.load import load_tokenizer
    from rlvr.tasks.screening import screen_prompt_lengths

    rows = GSM8K[:6] + [{"question": "x" * 600, "answer": "#### 3"}]
    path = write_jsonl(tmp_path / "data.jsonl", rows)
    config = load_config(None, ["task.name=qa", f"task.path={path}", f"model.name_or_path={tiny_model_dir}",
                                "rollout.max_new_tokens=8"])
    task, tokenizer = build_task(config.task), load_tokenizer(config.model)
    screen_prompt_lengths(task, tokenizer, config)
    assert len(task.train) + len(task.held_out) == 6
    assert "line 7: prompt of" in capsys.readouterr().err
    config.task.bad_rows = "error"
    with pytest.raises(DatasetError, match=r"line 7: prompt of \d+ tokens; the context leaves 504"):
        screen_prompt_lengths(build_task(config.task), tokenizer, config)
