"""CLI: every expected failure is one `rlvr: error: ...` line on stderr with exit code 2, never a traceback.

All commands run in-process through `rlvr.cli.main.main` except one subprocess test of the real entry point.
Nothing here loads a model: `train` and `eval` are only driven into failures that happen before loading.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from rlvr.cli.main import main
from rlvr.cli.verify import VerifyInputError, verify_file
from rlvr.config.run import TaskConfig


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Relative paths (eval.json, runs/...) can never land in the repository."""
    monkeypatch.chdir(tmp_path)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, *fragments: str) -> None:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rlvr: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, err)


# ---------------------------------------------------------------- train
def test_train_unknown_key_exits_2_and_creates_no_run_dir(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code, out, err = run(capsys, "train", "max_step=3", f"output_dir={run_dir}")
    assert code == 2
    assert_one_line_error(err, "'max_step'", "max_steps")
    assert not run_dir.exists()
    assert out == ""


def test_train_unknown_key_from_yaml_file(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("rollout:\n  group_sise: 4\n")
    run_dir = tmp_path / "run"
    code, _, err = run(capsys, "train", str(config), f"output_dir={run_dir}")
    assert code == 2
    assert_one_line_error(err, "'rollout.group_sise'", "group_size")
    assert not run_dir.exists()


def test_train_missing_config_file(tmp_path, capsys):
    code, _, err = run(capsys, "train", str(tmp_path / "nope.yaml"), f"output_dir={tmp_path / 'run'}")
    assert code == 2
    assert_one_line_error(err, "nope.yaml", "does not exist")
    assert not (tmp_path / "run").exists()


def test_train_malformed_override(tmp_path, capsys):
    code, _, err = run(capsys, "train", f"output_dir={tmp_path / 'run'}", "foo")
    assert code == 2
    assert_one_line_error(err, "'foo'", "dotted.key=value")
    assert not (tmp_path / "run").exists()


def test_train_refuses_a_non_empty_output_dir(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    (run_dir / "final").mkdir()
    (run_dir / "final" / "model.safetensors").write_bytes(b"weights")
    before = sorted((p.relative_to(run_dir), p.read_bytes() if p.is_file() else None) for p in run_dir.rglob("*"))
    code, out, err = run(capsys, "train", "max_steps=1", f"output_dir={run_dir}")
    assert code == 2
    assert_one_line_error(err, str(run_dir), "already holds files")
    after = sorted((p.relative_to(run_dir), p.read_bytes() if p.is_file() else None) for p in run_dir.rglob("*"))
    assert after == before
    assert "run directory" not in out


def test_train_missing_model_fails_before_writing_anything(tmp_path, capsys):
    run_dir, missing = tmp_path / "run", tmp_path / "no-such-model"
    code, _, err = run(capsys, "train", f"model.name_or_path={missing}", f"output_dir={run_dir}")
    assert code == 2
    assert_one_line_error(err, str(missing), "does not exist")
    assert not run_dir.exists() or not any(run_dir.iterdir())  # no config.yaml, metrics or checkpoint


# ---------------------------------------------------------------- eval
def test_eval_missing_model_path(tmp_path, capsys):
    missing = tmp_path / "no-such-model"
    code, out, err = run(capsys, "eval", str(missing))
    assert code == 2
    assert_one_line_error(err, str(missing), "does not exist")
    assert out == ""
    assert not (tmp_path / "eval.json").exists()


def test_eval_directory_without_model(tmp_path, capsys):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    code, _, err = run(capsys, "eval", str(empty))
    assert code == 2
    assert_one_line_error(err, "config.json")


def test_eval_run_without_final_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("max_steps: 1\n")
    code, _, err = run(capsys, "eval", str(run_dir))
    assert code == 2
    assert_one_line_error(err, "no final checkpoint")


def test_eval_unknown_task(tmp_path, capsys):
    code, _, err = run(capsys, "eval", str(tmp_path / "no-such-model"), "--task", "nosuchtask")
    assert code == 2
    assert_one_line_error(err, "nosuchtask", "arithmetic")


# ---------------------------------------------------------------- verify
LINES = [
    {"completion": "3 + 4 = 7\nAnswer: 7", "reference": "7"},  # 1 correct
    {"completion": "Answer: 8", "reference": "7"},  # 2 wrong
    {"completion": "I am not sure.", "reference": "7"},  # 3 unparseable (strict mode)
    "this is {not json",  # 4 bad line
    {"completion": "48 + 24 = 72 clips.\nAnswer: 72", "answer": "Natalia sold 48/2 = 24 clips.\n#### 72"},  # 5
    {"reference": "7"},  # 6 no completion
]


def write_jsonl(path, rows) -> str:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


def summary_counts(err: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(correct|wrong|unparseable|timeout|error)"
                                                            r"\s+(\d+)\s+[\d.]+%$", err, re.MULTILINE)}


def mean_score(err: str) -> float:
    return float(re.search(r"mean score\s+([\d.]+)", err).group(1))


def test_verify_writes_one_verdict_per_line_and_a_summary(tmp_path, capsys):
    path = write_jsonl(tmp_path / "in.jsonl", LINES)
    code, out, err = run(capsys, "verify", "--verifier", "math", "--input", path)
    assert code == 0
    verdicts = [json.loads(line) for line in out.splitlines()]
    assert [v["line"] for v in verdicts] == [1, 2, 3, 4, 5, 6]  # aligned with the input
    assert [v["outcome"] for v in verdicts] == ["correct", "wrong", "unparseable", "error", "correct", "error"]
    assert [v["score"] for v in verdicts] == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert all(set(v) == {"line", "outcome", "score", "detail"} for v in verdicts)
    assert "expected 7" in verdicts[1]["detail"]
    assert "not valid JSON" in verdicts[3]["detail"]
    assert "'completion'" in verdicts[5]["detail"]
    assert "Traceback" not in err
    assert summary_counts(err) == {"correct": 2, "wrong": 1, "unparseable": 1, "timeout": 0, "error": 2}
    assert mean_score(err) == pytest.approx(2 / 6, abs=1e-3)
    assert "33.3%" in err  # share of correct
    assert "2 bad input lines" in err


def test_verify_answer_mode_last_number(tmp_path, capsys):
    path = write_jsonl(tmp_path / "in.jsonl", [{"completion": "so it is 7", "reference": "7"}])
    _, out, _ = run(capsys, "verify", "--verifier", "math", "--input", path)
    assert json.loads(out)["outcome"] == "unparseable"
    code, out, _ = run(capsys, "verify", "--verifier", "math", "--input", path, "--answer-mode", "last_number")
    assert code == 0 and json.loads(out)["outcome"] == "correct"


def test_verify_takes_train_overrides(tmp_path, capsys):
    path = write_jsonl(tmp_path / "in.jsonl", [{"completion": "so it is 7", "reference": "7"}])
    code, out, _ = run(capsys, "verify", "task.answer_mode=last_number", "--verifier", "math", "--input", path)
    assert code == 0 and json.loads(out)["outcome"] == "correct"
    config = tmp_path / "run.yaml"
    config.write_text("task:\n  answer_mode: last_number\n")
    code, out, _ = run(capsys, "verify", str(config), "--verifier", "math", "--input", path)
    assert code == 0 and json.loads(out)["outcome"] == "correct"


def test_verify_refuses_a_bad_override_in_one_line(tmp_path, capsys):
    path = write_jsonl(tmp_path / "in.jsonl", [{"completion": "Answer: 7", "reference": "7"}])
    code, out, err = run(capsys, "verify", "task.code_reward_mode=most", "--verifier", "code", "--input", path)
    assert code == 2 and out == "" and err.startswith("rlvr: error:") and "code_reward_mode" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.sandbox
def test_verify_code_reward_mode_override_changes_the_score(tmp_path, capsys):
    # f right for 1 of 2 asserts (f(2) = 2, expected 4): fraction 0.5, all 0.0 (hand count)
    row = {"completion": "def f(x):\n    return x if x < 2 else x", "reference": json.dumps(
        {"asserts": ["assert f(1) == 1", "assert f(2) == 4"]})}
    path = write_jsonl(tmp_path / "in.jsonl", [row])
    _, out, _ = run(capsys, "verify", "--verifier", "code", "--input", path)
    assert json.loads(out)["score"] == 0.5
    code, out, _ = run(capsys, "verify", "task.code_reward_mode=all", "task.code_time_limit_s=2", "--verifier", "code",
                       "--input", path)
    assert code == 0 and json.loads(out)["score"] == 0.0


@pytest.mark.parametrize("raw, problem", [
    ("", "blank line"),
    ("[1, 2]", "JSON object"),
    ('{"completion": 5, "reference": "5"}', "'completion' must be a string"),
    ('{"completion": "Answer: 5"}', "'reference'"),
    ('{"completion": "Answer: 5", "reference": null}', "'reference'"),
])
def test_verify_bad_lines_become_error_verdicts(tmp_path, capsys, raw, problem):
    path = tmp_path / "in.jsonl"
    path.write_text(raw + "\n" + json.dumps({"completion": "Answer: 5", "reference": "5"}) + "\n")
    code, out, err = run(capsys, "verify", "--verifier", "math", "--input", str(path))
    assert code == 0
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["line"] == 1 and first["outcome"] == "error" and first["score"] == 0.0
    assert problem in first["detail"]
    assert second["line"] == 2 and second["outcome"] == "correct"
    assert summary_counts(err)["error"] == 1


def test_verify_non_utf8_line_is_an_error_verdict(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"completion": "\xff", "reference": "1"}\n{"completion": "Answer: 1", "reference": 1}\n')
    code, out, _ = run(capsys, "verify", "--verifier", "math", "--input", str(path))
    assert code == 0
    assert [json.loads(line)["outcome"] for line in out.splitlines()] == ["error", "correct"]  # numeric ref ok


def test_verify_format_verifier_needs_no_reference(tmp_path, capsys):
    path = write_jsonl(tmp_path / "in.jsonl", [{"completion": "<think>hm</think><answer>4</answer>"},
                                                {"completion": "4"}])
    code, out, _ = run(capsys, "verify", "--verifier", "format", "--input", path)
    assert code == 0
    assert [json.loads(line)["outcome"] for line in out.splitlines()] == ["correct", "wrong"]


def test_verify_output_file(tmp_path, capsys):
    path = write_jsonl(tmp_path / "in.jsonl", LINES[:2])
    output = tmp_path / "verdicts.jsonl"
    code, out, err = run(capsys, "verify", "--verifier", "math", "--input", path, "--output", str(output))
    assert code == 0 and out == ""
    assert [json.loads(line)["outcome"] for line in output.read_text().splitlines()] == ["correct", "wrong"]
    assert summary_counts(err)["correct"] == 1 and str(output) in err


def test_verify_empty_file(tmp_path, capsys):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    code, out, err = run(capsys, "verify", "--verifier", "math", "--input", str(path))
    assert code == 0 and out == ""
    assert "0 lines" in err and "Traceback" not in err


def test_verify_unknown_verifier(tmp_path, capsys):
    path = write_jsonl(tmp_path / "in.jsonl", LINES[:1])
    code, out, err = run(capsys, "verify", "--verifier", "maths", "--input", path)
    assert code == 2 and out == ""
    assert_one_line_error(err, "'maths'", "math", "format", "answer_format")


def test_verify_missing_input(tmp_path, capsys):
    code, out, err = run(capsys, "verify", "--verifier", "math", "--input", str(tmp_path / "nope.jsonl"))
    assert code == 2 and out == ""
    assert_one_line_error(err, "nope.jsonl", "does not exist")


def test_verify_input_is_a_directory(tmp_path, capsys):
    code, _, err = run(capsys, "verify", "--verifier", "math", "--input", str(tmp_path))
    assert code == 2
    assert_one_line_error(err, "not a file")


def test_verify_output_in_missing_directory(tmp_path, capsys):
    path = write_jsonl(tmp_path / "in.jsonl", LINES[:1])
    code, _, err = run(capsys, "verify", "--verifier", "math", "--input", path,
                       "--output", str(tmp_path / "no" / "out.jsonl"))
    assert code == 2
    assert_one_line_error(err, "does not exist")


def test_verify_refuses_to_overwrite_its_input(tmp_path, capsys):
    path = write_jsonl(tmp_path / "in.jsonl", LINES[:2])
    before = (tmp_path / "in.jsonl").read_text()
    code, _, err = run(capsys, "verify", "--verifier", "math", "--input", path, "--output", path)
    assert code == 2
    assert_one_line_error(err, "is the input file")
    assert (tmp_path / "in.jsonl").read_text() == before


def test_verify_file_api(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    write_jsonl(path, LINES[:3])
    output = tmp_path / "out.jsonl"
    assert verify_file("math", path, TaskConfig(), output) == 0
    assert [json.loads(line)["line"] for line in output.read_text().splitlines()] == [1, 2, 3]
    with pytest.raises(VerifyInputError, match="valid verifiers"):
        verify_file("nope", path, TaskConfig(), None)
    assert issubclass(VerifyInputError, ValueError)


def test_real_entry_point_prints_no_traceback(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", LINES)
    command = [sys.executable, "-m", "rlvr.cli.main", "verify", "--verifier", "math"]
    bad = subprocess.run(command + ["--input", str(tmp_path / "missing.jsonl")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert bad.stderr.strip().startswith("rlvr: error: ") and len(bad.stderr.strip().splitlines()) == 1
    unknown = subprocess.run([sys.executable, "-m", "rlvr.cli.main", "verify", "--verifier", "nope", "--input", data],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr and "valid verifiers" in unknown.stderr
    good = subprocess.run(command + ["--input", data], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert good.returncode == 0 and "Traceback" not in good.stderr
    assert len(good.stdout.splitlines()) == len(LINES)
    assert summary_counts(good.stderr)["error"] == 2


# ---------------------------------------------------------------- known bugs (do not fix here: report)
def test_train_output_dir_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    code, _, err = run(capsys, "train", f"output_dir={target}")
    assert code == 2
    assert_one_line_error(err, str(target))
    assert target.read_text() == "keep me"


@pytest.mark.parametrize("extra", [["--n", "0"], ["--size", "0"], ["--temperature", "0"], ["--task", "qa"]])
def test_eval_invalid_settings_are_one_line_errors(tmp_path, capsys, extra):
    code, _, err = run(capsys, "eval", str(tmp_path / "no-such-model"), *extra)
    assert code == 2
    assert_one_line_error(err)


def test_eval_invalid_k_is_rejected_before_loading(tmp_path, capsys):
    code, _, err = run(capsys, "eval", str(tmp_path / "no-such-model"), "--k", "0")
    assert code == 2
    assert_one_line_error(err, "--k")


@pytest.mark.parametrize("extra,fragments", [
    (["--k", "1,8"], ["--k", "8 > n = 4"]),  # default n = eval.samples = 4
    (["--k", "1,8", "--n", "8"], None),  # fine with n = 8: fails later, on the missing model
    (["--k", "two"], ["--k", "comma-separated"]),
    (["--scaling", "--k", "4"], ["--k", "--n-list"]),
    (["--scaling", "--n-list", "0,4"], ["--n-list", ">= 1"]),
    (["--budgets", "8,16"], ["--budgets", "--scaling"]),
    (["--scaling", "--budgets", "8,x"], ["--budgets"]),
    (["eval.samples=0"], ["eval.samples"]),
])
def test_eval_list_flags_are_checked_before_loading(tmp_path, capsys, extra, fragments):
    code, out, err = run(capsys, "eval", str(tmp_path / "no-such-model"), *extra)
    assert code == 2 and out == ""
    assert_one_line_error(err, *(fragments or ["does not exist"]))
    assert not (tmp_path / "eval.json").exists() and not (tmp_path / "scaling.json").exists()


@pytest.mark.sandbox
def test_verify_survives_lone_surrogates_in_error_text(tmp_path, capsys):
    # a model-written `raise ValueError('\ud800')` ends up in the detail; the output stays writable
    row = {"completion": "def f(x):\n    raise ValueError('\\ud800')",
           "reference": json.dumps({"asserts": ["assert f(1) == 1"]})}
    path = write_jsonl(tmp_path / "in.jsonl", [row])
    output = tmp_path / "out.jsonl"
    code, _, _ = run(capsys, "verify", "--verifier", "code", "--input", path, "--output", str(output))
    verdict = json.loads(output.read_text(encoding="utf-8"))
    assert code == 0 and verdict["outcome"] == "wrong" and "ValueError" in verdict["detail"]


def test_overrides_may_follow_flags():
    """`rlvr eval RUN --size 100 k=v` once failed with 'unrecognized arguments' (argparse binds the
    positional list before the first flag); overrides on both sides of a flag are kept in order."""
    from rlvr.cli.main import parse

    args = parse(["eval", "run-dir", "a.b=1", "--size", "100", "c.d=2", "--no-greedy", "e=3"])
    assert (args.model, args.size, args.greedy) == ("run-dir", 100, False)
    assert args.overrides == ["a.b=1", "c.d=2", "e=3"]
    assert parse(["recipe", "r1", "--output-dir", "out", "max_steps=2"]).overrides == ["max_steps=2"]


def test_unknown_flag_after_overrides_is_still_an_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "run-dir", "--size", "100", "a=1", "--bogus"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_commands_other_than_train_refuse_torchrun_ranks(monkeypatch, tmp_path, capsys):
    # torchrun sets WORLD_SIZE for every rank; `rlvr verify` on 2 ranks would write one output twice.
    monkeypatch.setenv("WORLD_SIZE", "2")
    source = tmp_path / "in.jsonl"
    source.write_text('{"completion": "Answer: 4", "reference": "4"}\n')
    assert main(["verify", "--verifier", "math", "--input", str(source), "--output", str(tmp_path / "o")]) == 2
    assert "runs in one process (WORLD_SIZE=2 here)" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    monkeypatch.setenv("WORLD_SIZE", "1")  # a one-rank torchrun is one process: allowed
    assert main(["verify", "--verifier", "math", "--input", str(source), "--output", str(tmp_path / "o")]) == 0


@pytest.mark.parametrize("command", ["sft", "sample"])
def test_sft_and_sample_refuse_ray_trainer_ranks(command, tmp_path, capsys):
    """ray.trainer_ranks=N drives N Ray trainer actors in `rlvr train` only; sft and sample would ignore it."""
    out = tmp_path / "run"
    assert main([command, "ray.trainer_ranks=2", "ray.enabled=true", f"output_dir={out}"]) == 2
    assert "only `rlvr train` runs trainer ranks" in capsys.readouterr().err
    assert not out.exists()


# Every error a user can act on derives from rlvr.errors.UserFacingError: those 17 modules once set a
# `user_facing` flag, and the last 4 of this list were matched by class name in main().
USER_FACING = [("rlvr.cli.main", "UsageError"), ("rlvr.config.base", "ConfigError"),
               ("rlvr.cli.verify", "VerifyInputError"), ("rlvr.model.load", "ModelError"),
               ("rlvr.model.lora", "LoraError"), ("rlvr.evaluation.target", "InferenceInputError"),
               ("rlvr.tasks.cold_start", "ColdStartError"), ("rlvr.metrics.sinks", "SinkError"),
               ("rlvr.rollout.process", "EngineProcessError"), ("rlvr.rollout.pipelined", "PrefetchTimeout"),
               ("rlvr.rollout.vllm.convert", "VLLMError"), ("rlvr.rewards.reward_model", "RewardModelError"),
               ("rlvr.viz.jsonl", "RunDataError"), ("rlvr.distributed.context", "DistributedError"),
               ("rlvr.cluster.session", "RayBackendError"), ("rlvr.sft.step", "SFTOutOfMemory"),
               ("rlvr.sft.data", "SFTDataError"), ("rlvr.algorithms.correction", "EngineMismatch"),
               ("rlvr.sampling", "SampleError"), ("rlvr.tasks.qa", "DatasetError"),
               ("rlvr.training.guards", "TrainingDiverged"), ("rlvr.training.update", "MicroBatchOutOfMemory"),
               ("rlvr.checkpoint.store", "CheckpointError")]


def _raise_in_command(monkeypatch, error: BaseException) -> None:
    import rlvr.cli.main as cli_main

    def refuse(command):
        raise error
    monkeypatch.setattr(cli_main, "refuse_extra_ranks", refuse)  # the first call inside main()'s try


@pytest.mark.parametrize("module, name", USER_FACING)
def test_a_user_facing_error_from_any_module_is_one_line_exit_2(monkeypatch, capsys, module, name):
    import importlib

    _raise_in_command(monkeypatch, getattr(importlib.import_module(module), name)(f"{name}: lower x.y"))
    code, out, err = run(capsys, "verify", "--verifier", "math", "--input", "in.jsonl")
    assert code == 2 and out == ""
    assert_one_line_error(err, f"rlvr: error: {name}: lower x.y")


def test_any_other_error_is_a_bug_and_keeps_its_traceback(monkeypatch):
    _raise_in_command(monkeypatch, RuntimeError("not phrased for the user"))
    with pytest.raises(RuntimeError, match="not phrased for the user"):
        main(["verify", "--verifier", "math", "--input", "in.jsonl"])
