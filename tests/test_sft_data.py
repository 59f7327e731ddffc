"""SFT data: row forms (messages, prompt/completion as text or turns), sources (JSONL,
parquet, a saved dataset directory, cold_start), and bad rows: skipped and counted by reason in one line, or
sft.bad_rows=error naming the file and row; no usable row and a missing sft.data are one clear error each."""
from __future__ import annotations

import json
import sys
import types

import pytest

from rlvr.config.run import ModelConfig, load_config
from rlvr.model.load import load_tokenizer
from rlvr.sft.data import COLD_START, RowScreen, SFTDataError, Turn, data_source, load_chat_rows, source_name
from rlvr.sft.trainer import load_examples


def chat(question: str, answer: str) -> dict:
    return {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]}


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def rows_of(data: str, *extra: str):
    config = load_config(None, [f"sft.data={data}", *extra])
    screen = RowScreen(source_name(config), config.sft.bad_rows)
    return load_chat_rows(config, screen), screen


def test_messages_and_prompt_completion_forms(tmp_path):
    rows, _ = rows_of(write_jsonl(tmp_path / "m.jsonl", [chat("q1", "a1")]))
    assert rows[0].turns == (Turn("user", "q1"), Turn("assistant", "a1"))
    assert rows[0].row_id == f"{tmp_path / 'm.jsonl'}/0"
    pc = [{"prompt": "q2", "completion": "a2"},
          {"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "q3"}],
           "completion": [{"role": "assistant", "content": "a3"}]}]
    rows, _ = rows_of(write_jsonl(tmp_path / "pc.jsonl", pc))
    assert rows[0].turns == (Turn("user", "q2"), Turn("assistant", "a2"))
    assert rows[1].turns == (Turn("system", "s"), Turn("user", "q3"), Turn("assistant", "a3"))


def test_other_field_names_and_trailing_turns_dropped(tmp_path):
    row = {"conv": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                    {"role": "user", "content": "thanks"}]}
    rows, _ = rows_of(write_jsonl(tmp_path / "c.jsonl", [row]), "sft.messages_field=conv")
    assert rows[0].turns == (Turn("user", "q"), Turn("assistant", "a"))  # the trailing user turn teaches nothing


def test_parquet_and_saved_dataset_directory(tmp_path):
    import datasets

    data = datasets.Dataset.from_list([chat("q1", "a1"), chat("q2", "a2")])
    data.to_parquet(str(tmp_path / "d.parquet"))
    rows, _ = rows_of(str(tmp_path / "d.parquet"))
    assert [r.turns[1].content for r in rows] == ["a1", "a2"]
    datasets.DatasetDict({"train": data, "test": data.select([1])}).save_to_disk(str(tmp_path / "saved"))
    rows, _ = rows_of(str(tmp_path / "saved"), "sft.split=test")
    assert [r.turns[1].content for r in rows] == ["a2"]


BAD = [
    {"messages": [{"role": "user", "content": "only a question"}]},  # 1: no assistant turn
    {"messages": [{"role": "user", "content": "q"}, {"role": "robot", "content": "a"}]},  # 2: bad role
    {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "  "}]},  # 3: empty
    {"messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "s"},
                  {"role": "assistant", "content": "a"}]},  # 4: system turn not first
    {"messages": [{"role": "assistant", "content": "a"}]},  # 5: nothing before the assistant
]


def test_bad_rows_are_skipped_and_counted_by_reason(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    lines = [json.dumps(chat("q", "a")).encode()] + [json.dumps(r).encode() for r in BAD]
    lines += [b'{"messages": "\xff\xfe"}', b"{not json", json.dumps(chat("q", "a\ud800")).encode()]
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows, screen = rows_of(str(path))
    assert [r.index for r in rows] == [0]
    # rows 1..5 above, then line 6 (bad UTF-8), 7 (bad JSON), 8 (a lone surrogate: not encodable as UTF-8)
    assert screen.reasons == {"no assistant turn": 1, "bad role": 3, "empty content": 1, "not valid UTF-8": 2,
                              "not valid JSON": 1}
    screen.report(len(rows))
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "skipped 8 of 9 rows" in err[0] and "3 bad role" in err[0]


def test_bad_rows_error_mode_names_file_and_row(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [chat("q", "a"), BAD[0]])
    with pytest.raises(SFTDataError, match=r"bad.jsonl row 1: no assistant turn \(sft.bad_rows=skip"):
        rows_of(path, "sft.bad_rows=error")


def test_no_usable_row_is_one_error(tmp_path):
    rows, screen = rows_of(write_jsonl(tmp_path / "bad.jsonl", BAD[:2]))
    with pytest.raises(SFTDataError, match="no usable row for SFT .*skipped 2 of 2 rows"):
        screen.report(len(rows))


def test_missing_column_names_the_fields(tmp_path):
    with pytest.raises(SFTDataError, match=r"no column 'messages' \(sft.messages_field\).*columns: text"):
        rows_of(write_jsonl(tmp_path / "t.jsonl", [{"text": "hello"}]))


def test_missing_data_setting_and_missing_file():
    with pytest.raises(SFTDataError, match="sft.data is required"):
        data_source(load_config(None, []))
    with pytest.raises(SFTDataError, match=r"sft.data: 'nowhere/chats.jsonl' does not exist"):
        data_source(load_config(None, ["sft.data=nowhere/chats.jsonl"]))


def test_cold_start_rows_come_from_the_task_generator(monkeypatch):
    calls = []

    def cold_start_rows(task_config, size, seed):
        calls.append((task_config.name, size, seed))
        return [{"id": "arithmetic/0", "source": "cold_start", **chat("What is 1 + 1?", "<think>1+1=2</think> 2")}]

    monkeypatch.setitem(sys.modules, "rlvr.tasks.cold_start", types.SimpleNamespace(cold_start_rows=cold_start_rows))
    rows, _ = rows_of(COLD_START, "sft.cold_start_size=5", "seed=3")
    assert calls == [("arithmetic", 5, 3)]
    assert rows[0].row_id == "arithmetic/0" and rows[0].turns[-1].role == "assistant"


def test_rows_longer_than_max_length_are_bad_rows(tiny_model_dir, tmp_path, capsys):
    path = write_jsonl(tmp_path / "long.jsonl", [chat("q", "short"), chat("q", "x" * 200)])
    config = load_config(None, [f"sft.data={path}"])
    tokenizer = load_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    examples = load_examples(config, tokenizer, max_length=64)  # the character tokenizer: ~230 tokens for row 1
    assert [e.row_id for e in examples] == [f"{path}/0"]
    assert "1 longer than max_length" in capsys.readouterr().err
