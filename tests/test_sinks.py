"""Metric sinks (metrics/sinks.py): metrics.jsonl/samples.jsonl as before, TensorBoard events read
back with tensorboard's EventAccumulator, W&B calls through a recording stand-in for the `wandb` module, one
clear error for a missing package, and a sink that fails mid-run dropped with one warning while the JSONL goes on."""
from __future__ import annotations

import io
import json
import sys
import types

import pytest

from rlvr.checkpoint.state import config_differences
from rlvr.config.run import load_config
from rlvr.errors import UserFacingError
from rlvr.metrics.logger import RunLogger
from rlvr.metrics.sinks import SinkError, TensorBoardSink, WandbSink, build_sinks


def sinks_of(config, run_dir, writes=True):
    """What a trainer builds: the logging section, and the resolved config that W&B records with the run."""
    return build_sinks(config.logging, config.model_dump(mode="json"), run_dir, writes=writes)

SAMPLES = [{"step": 1, "prompt_id": "a/1", "question": "What is 2 | 3?", "reference": "3",
            "completion": "<think>bitwise</think>\nAnswer: 3", "reward": 1.0,
            "verdicts": {"math": {"outcome": "correct", "score": 1.0, "detail": ""}}},
           {"step": 1, "prompt_id": "a/2", "question": "What is 1 + 1?", "reference": "2", "completion": "3",
            "reward": 0.0, "verdicts": {"math": {"outcome": "wrong", "score": 0.0, "detail": ""}}}]


def record(step: int, loss: float) -> dict:
    return {"step": step, "reward_mean": 0.5 * step, "loss": loss, "kl": float("nan"), "skipped": False,
            "outcomes/math/correct": 3}


def test_jsonl_files_are_written_as_before(tmp_path):
    logger = RunLogger(tmp_path, 2, stream=io.StringIO())
    logger.log_step(record(1, 0.25))
    logger.log_samples(SAMPLES)
    logger.log_eval(2, {"eval/pass@1": 0.75})
    logger.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    # step, then elapsed_s, then the record's keys in order; NaN written as null
    assert lines[0] == json.dumps({"step": 1, "elapsed_s": first["elapsed_s"], "reward_mean": 0.5, "loss": 0.25,
                                   "kl": None, "skipped": False, "outcomes/math/correct": 3})
    assert lines[1] == json.dumps({"step": 2, "elapsed_s": json.loads(lines[1])["elapsed_s"], "eval/pass@1": 0.75})
    assert (tmp_path / "samples.jsonl").read_text() == "".join(json.dumps(row) + "\n" for row in SAMPLES)


def test_tensorboard_scalars_and_completions_table(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = load_config(None, ["logging.tensorboard=true"])
    sinks = sinks_of(config, tmp_path)
    assert [type(s) for s in sinks] == [TensorBoardSink]
    assert not (tmp_path / "tensorboard").exists()  # nothing is opened before the first row
    logger = RunLogger(tmp_path, 2, stream=io.StringIO(), sinks=sinks)
    logger.log_step(record(1, 0.25))
    logger.log_samples(SAMPLES)
    logger.log_step(record(2, -0.5))
    logger.log_eval(2, {"eval/pass@1": 0.75})
    logger.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    scalars = {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert scalars["loss"] == [(1, 0.25), (2, -0.5)]
    assert scalars["reward_mean"] == [(1, 0.5), (2, 1.0)]
    assert scalars["outcomes/math/correct"] == [(1, 3.0), (2, 3.0)]
    assert scalars["skipped"] == [(1, 0.0), (2, 0.0)]
    assert scalars["eval/pass@1"] == [(2, 0.75)]
    assert "kl" not in scalars and "step" not in scalars  # NaN (null) has no point; the step is the x axis
    texts = events.Tensors("completions/text_summary")
    assert [t.step for t in texts] == [1]
    table = texts[0].tensor_proto.string_val[0].decode()
    assert table.splitlines() == [
        "| prompt | completion | reward | verdict |", "|---|---|---|---|",
        # the pipe escaped, the tags shown as text (not stripped as HTML), the newline kept as a line break
        "| What is 2 \\| 3? | &lt;think&gt;bitwise&lt;/think&gt;<br>Answer: 3 | 1 | math=correct |",
        "| What is 1 + 1? | 3 | 0 | math=wrong |"]


class FakeWandb(types.ModuleType):
    """Records what WandbSink asks of `wandb` (the real package is large and wants an account)."""

    def __init__(self):
        super().__init__("wandb")
        self.calls: list[tuple] = []
        outer = self

        class Run:
            def log(self, data, step=None):
                outer.calls.append(("log", data, step))

            def finish(self):
                outer.calls.append(("finish",))

        class Table:
            def __init__(self, columns, data):
                self.columns, self.data = columns, data

        self.Table = Table
        self._run = Run()

    def init(self, **kwargs):
        self.calls.append(("init", kwargs))
        return self._run


def test_wandb_run_config_metrics_table_and_finish(tmp_path, monkeypatch):
    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    config = load_config(None, ["logging.wandb.project=grpo", "logging.wandb.entity=lab", "logging.wandb.name=r1",
                                "logging.wandb.mode=offline", "max_steps=7"])
    sinks = sinks_of(config, tmp_path)
    assert [type(s) for s in sinks] == [WandbSink] and fake.calls == []  # the W&B run starts at the first row
    logger = RunLogger(tmp_path, 2, stream=io.StringIO(), sinks=sinks)
    logger.log_step(record(1, 0.25))
    logger.log_samples(SAMPLES)
    logger.log_eval(2, {"eval/pass@1": 0.75})
    logger.close()
    (init, kwargs), *rest = fake.calls
    run_id = (tmp_path / "wandb-run-id").read_text().strip()  # kept in the run directory for a resume
    assert init == "init" and kwargs == {"project": "grpo", "entity": "lab", "name": "r1", "dir": str(tmp_path),
                                         "mode": "offline", "config": config.model_dump(mode="json"),
                                         "id": run_id, "resume": "allow"}
    assert kwargs["config"]["max_steps"] == 7
    (_, metrics, step), (_, table, table_step), (_, evaluation, eval_step), finish = rest
    elapsed = metrics.pop("elapsed_s")
    assert step == 1 and elapsed >= 0
    assert metrics == {"reward_mean": 0.5, "loss": 0.25, "skipped": 0.0, "outcomes/math/correct": 3.0}  # no NaN
    assert table_step == 1 and list(table) == ["completions"]
    assert table["completions"].columns == ["step", "prompt", "completion", "reward", "verdict"]
    assert table["completions"].data == [
        [1, "What is 2 | 3?", "<think>bitwise</think>\nAnswer: 3", 1.0, "math=correct"],
        [1, "What is 1 + 1?", "3", 0.0, "math=wrong"]]
    assert eval_step == 2 and evaluation["eval/pass@1"] == 0.75
    assert finish == ("finish",)


@pytest.mark.parametrize("override, module, message", [
    ("logging.tensorboard=true", "torch.utils.tensorboard",
     "logging.tensorboard=true needs `pip install tensorboard` (or `pip install rlvr[tensorboard]`)"),
    ("logging.wandb.project=grpo", "wandb",
     "logging.wandb.project=grpo needs `pip install wandb` (or `pip install rlvr[wandb]`)")])
def test_a_missing_package_is_one_clear_error(tmp_path, monkeypatch, override, module, message):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail as if it were not installed
    with pytest.raises(SinkError) as err:
        sinks_of(load_config(None, [override]), tmp_path)
    assert str(err.value) == message and isinstance(err.value, UserFacingError)
    with pytest.raises(SinkError):  # torchrun ranks > 0 check it as well: every rank stops at start
        sinks_of(load_config(None, [override]), tmp_path, writes=False)


def test_no_sink_unless_enabled_and_none_on_other_ranks(tmp_path):
    assert sinks_of(load_config(None, []), tmp_path) == []
    assert sinks_of(load_config(None, ["logging.tensorboard=true"]), tmp_path, writes=False) == []


class Breaks:
    """A sink that fails at its second row."""

    name = "flaky"

    def __init__(self):
        self.steps: list[int] = []

    def scalars(self, step, record):
        if step == 2:
            raise OSError("disk quota exceeded")
        self.steps.append(step)

    def completions(self, step, rows):
        pass

    def close(self):
        raise AssertionError("a dropped sink is not closed")


def test_a_failing_sink_is_dropped_with_one_warning_and_the_jsonl_goes_on(tmp_path):
    out, flaky = io.StringIO(), Breaks()
    logger = RunLogger(tmp_path, 4, stream=out, sinks=[flaky])
    for n in range(1, 5):
        logger.log_step(record(n, 0.1))
        logger.log_samples(SAMPLES)
    logger.close()
    assert flaky.steps == [1]  # nothing after the failure
    warnings = [line for line in out.getvalue().splitlines() if line.startswith("WARNING")]
    assert warnings == ["WARNING: the flaky sink failed (OSError: disk quota exceeded); it is switched off for the "
                        "rest of the run (metrics.jsonl keeps every step)"]
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert len((tmp_path / "samples.jsonl").read_text().splitlines()) == 4 * len(SAMPLES)


def test_logging_may_change_on_resume():
    saved = load_config(None, []).model_dump(mode="json")
    wanted = load_config(None, ["logging.tensorboard=true", "logging.wandb.project=grpo"]).model_dump(mode="json")
    assert config_differences(saved, wanted) == []
    assert config_differences(saved, load_config(None, ["seed=1"]).model_dump(mode="json")) == ["seed: 0 -> 1"]


def _scalar_steps(run_dir, tag: str) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    return [e.step for e in events.Scalars(tag)]


def test_grpo_and_sft_runs_write_tensorboard_when_asked(tiny_model_dir, tmp_path):
    """The training commands pass logging.* to their loggers (and close them): every step reaches the event file."""
    from rlvr.cli.main import main
    from test_train_tiny import tiny_overrides

    out = tmp_path / "grpo"
    assert main(["train", *tiny_overrides(tiny_model_dir, out), "logging.tensorboard=true"]) == 0
    assert _scalar_steps(out, "reward_mean") == [1, 2] and _scalar_steps(out, "eval/pass@1") == [2]
    data = tmp_path / "chats.jsonl"
    data.write_text(json.dumps({"prompt": "What is 2 + 2?", "completion": "Answer: 4"}) + "\n")
    out = tmp_path / "sft"
    assert main(["sft", f"model.name_or_path={tiny_model_dir}", f"output_dir={out}", f"sft.data={data}",
                 "sft.epochs=3", "sft.batch_size=1", "logging.tensorboard=true"]) == 0
    assert _scalar_steps(out, "loss") == [1, 2, 3]  # 3 epochs x 1 row, one row a step


def test_a_resumed_run_logs_into_the_same_wandb_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    config = load_config(None, ["logging.wandb.project=grpo"])  # mode online, with a key
    ids = []
    for _ in range(2):  # the first process, then the resumed one, on the same run directory
        fake = FakeWandb()
        monkeypatch.setitem(sys.modules, "wandb", fake)
        logger = RunLogger(tmp_path, 2, stream=io.StringIO(), sinks=sinks_of(config, tmp_path))
        logger.log_step(record(1, 0.25))
        logger.close()
        ids.append(fake.calls[0][1]["id"])
    assert ids[0] == ids[1] and len(ids[0]) == 12


def test_online_wandb_without_a_login_is_refused_before_the_run(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", FakeWandb())
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))  # no ~/.netrc entry either
    with pytest.raises(SinkError, match="needs a W&B login: run `wandb login` or set WANDB_API_KEY"):
        sinks_of(load_config(None, ["logging.wandb.project=grpo"]), tmp_path)
    (tmp_path / "netrc").write_text("machine api.wandb.ai login user password " + "k" * 40 + "\n")
    (tmp_path / "netrc").chmod(0o600)
    assert [type(s) for s in sinks_of(load_config(None, ["logging.wandb.project=grpo"]), tmp_path)] == [WandbSink]


def test_tensorboard_drops_the_steps_a_resume_logs_again(tmp_path):
    """A run logged steps 1-3, stopped, and resumed from its step-1 checkpoint: steps 2 and 3 are logged again, and
    TensorBoard shows each step once, with the resumed values (purge_step)."""
    config = load_config(None, ["logging.tensorboard=true"])
    first = RunLogger(tmp_path, 3, stream=io.StringIO(), sinks=sinks_of(config, tmp_path))
    for step in (1, 2, 3):
        first.log_step(record(step, 1.0))
    first.close()
    resumed = RunLogger(tmp_path, 3, stream=io.StringIO(), sinks=sinks_of(config, tmp_path))
    for step in (2, 3):
        resumed.log_step(record(step, -1.0))
    resumed.close()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(1, 1.0), (2, -1.0), (3, -1.0)]


@pytest.mark.parametrize("override", ["logging.wandb.project=", "logging.wandb.project=  ", "logging.wandb.name="])
def test_a_blank_wandb_name_is_refused_not_taken_for_off(override):
    from rlvr.config.run import ConfigError

    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=f"{key} is blank: give a name, or leave it out"):
        load_config(None, [override])
