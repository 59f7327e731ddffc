"""Progress of the long phases (rlvr/metrics/progress.py): plain lines off a terminal at the interval
with rate, share and ETA derived by hand; a tqdm bar on a terminal; nothing when off or on torchrun ranks > 0;
the training steps' lines unchanged off a terminal; evaluation, `rlvr eval` and `rlvr sample` report progress."""
from __future__ import annotations

import io
import json
import os
import select
import sys

import pytest
import torch

from rlvr.cli.main import main
from rlvr.config.run import EvalConfig, LoggingConfig, load_config
from rlvr.evaluation.evaluate import evaluate
from rlvr.metrics.logger import RunLogger
from rlvr.metrics.progress import Progress, Reporter, progress
from rlvr.rewards.rewarder import Rewarder
from rlvr.types import Prompt, RolloutBatch
from rlvr.verifiers.math.verifier import MathVerifier


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_at_the_interval_with_rate_share_and_eta():
    clock, out = Clock(), io.StringIO()  # StringIO is no terminal: auto -> lines
    with progress("evaluating", total=800, unit="prompts", stream=out, interval_s=30, clock=clock) as bar:
        for t, n in [(20, 60), (40, 60), (60, 120), (80, 80)]:
            clock.now = t
            bar.update(n)
        clock.now = 200
        bar.update(480)
    assert out.getvalue().splitlines() == [
        "evaluating: 0/800 prompts (0 %)",  # at the start: nothing measured, no rate or ETA
        # t=20: 20 s < 30 s since the first line, nothing. t=40: 120 done; 120/40 = 3.0/s, 120/800 = 15 %,
        # eta (800-120)/3.0 = 226.7 s = 3.8 min
        "evaluating: 120/800 prompts (15 %) | 3.0 prompts/s | eta 3.8 min",
        # t=60: 20 s since t=40, nothing. t=80: 320 done; 320/80 = 4.0/s, 40 %, eta 480/4.0 = 120 s = 2.0 min
        "evaluating: 320/800 prompts (40 %) | 4.0 prompts/s | eta 2.0 min",
        # t=200: 120 s since t=80 -> a line; all done: 800/200 = 4.0/s, 200 s = 3.3 min. Closing adds no line:
        # this one already shows where the phase ended
        "evaluating: 800/800 prompts (100 %) | 4.0 prompts/s | done in 3.3 min",
    ]


def test_a_resumed_phase_rates_only_this_sessions_work():
    clock, out = Clock(), io.StringIO()
    with progress("sampling", total=100, unit="prompts", stream=out, interval_s=30, clock=clock, initial=40) as bar:
        clock.now = 30
        bar.update(30)  # 70 done, 30 of them now: 30/30 s = 1.0/s (not 70/30); eta 30 left / 1.0 = 30 s = 0.5 min
        clock.now = 31
        bar.update(1)  # 1 s after the last line: nothing
        clock.now = 59
        bar.update(29)  # 29 s after the last line: nothing; the closing line shows the end
        clock.now = 300
    # closed at t=300: 60 prompts since this start in 300 s = 0.2/s (two significant digits under 1/s), 5.0 min
    assert out.getvalue().splitlines() == [
        "sampling: 40/100 prompts (40 %)", "sampling: 70/100 prompts (70 %) | 1.0 prompts/s | eta 0.5 min",
        "sampling: 100/100 prompts (100 %) | 0.2 prompts/s | done in 5.0 min"]


def test_a_terminal_gets_a_tqdm_bar_with_rate_and_eta():
    out = Terminal()
    with progress("evaluating", total=8, unit="samples", stream=out) as bar:
        for _ in range(8):
            bar.update(1)
    text = out.getvalue()
    assert "\r" in text and "evaluating: 100%" in text and "8/8" in text  # redrawn in place, ends full
    last = text.split("\r")[-1]
    assert "samples/s" in last or "s/samples" in last  # the rate
    assert "<00:00" in last  # elapsed<remaining: the ETA, 0 at the end
    assert "evaluating: 8/8 samples" not in text  # no plain lines on a terminal


def test_a_terminal_that_reports_no_size_still_shows_the_bar():
    master, slave = os.openpty()  # a fresh pseudo-terminal reports 0 x 0, as under `script` or in some containers
    with os.fdopen(slave, "w", encoding="utf-8") as stream:
        with progress("evaluating", total=2, unit="samples", stream=stream) as bar:
            bar.update(2)
        stream.flush()
        shown = b""
        while select.select([master], [], [], 0.5)[0]:  # one read may return only the first chunk of the output
            chunk = os.read(master, 65536)
            if not chunk:
                break
            shown += chunk
        shown = shown.decode()
    os.close(master)
    assert "evaluating: 100%" in shown and "2/2" in shown  # tqdm alone would have drawn an empty line


@pytest.mark.parametrize("stream", [io.StringIO(), Terminal()])
def test_off_prints_nothing_on_any_stream(stream):
    with progress("evaluating", total=4, unit="samples", stream=stream, mode="off") as bar:
        bar.update(4)
    quiet = Reporter.from_config(LoggingConfig(progress="bar"), stream, writes=False)  # a torchrun rank > 0
    with quiet("evaluating", 4, "samples") as bar:
        bar.update(4)
    assert stream.getvalue() == ""


def test_lines_and_bar_can_be_forced_against_the_stream():
    out = Terminal()
    with progress("x", total=2, unit="it", stream=out, mode="lines") as bar:
        bar.update(2)
    assert out.getvalue().startswith("x: 0/2 it (0 %)\n") and "\r" not in out.getvalue()
    piped = io.StringIO()
    with progress("x", total=2, unit="it", stream=piped, mode="bar") as bar:
        bar.update(2)
    assert "\r" in piped.getvalue() and "2/2" in piped.getvalue()


def step(n: int) -> dict:
    return {"step": n, "reward_mean": 0.5, "loss": 0.25, "kl": 0.001, "completion_length": 10.0,
            "clip_fraction": 0.0, "zero_std_fraction": 0.5}


def test_training_lines_off_a_terminal_are_todays_step_lines(tmp_path):
    out = io.StringIO()
    logger = RunLogger(tmp_path, 3, stream=out)
    for n in (1, 2):
        logger.log_step(step(n))
    logger.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    # exactly the step lines (no bar, no extra progress line), each as RunLogger._progress_line formats its row
    assert out.getvalue() == "".join(logger._progress_line(r) + "\n" for r in rows)
    assert out.getvalue().startswith("step    1/3 | reward 0.500 | loss +0.2500 | kl 0.00100 | len 10.0 |")


def test_training_on_a_terminal_prints_the_step_lines_above_a_bar(tmp_path):
    out = Terminal()
    logger = RunLogger(tmp_path, 2, stream=out)
    logger.log_step(step(1))
    logger.message("a note between steps")
    logger.log_step(step(2))
    text = out.getvalue()
    assert "training:" in text and "2/2" in text and "step" in text.split("\r")[-1]  # bar of steps, ended full
    lines = [line.split("\r")[-1] for line in text.splitlines()]  # what the terminal shows after the redraws
    assert any(line.startswith("step    1/2 | reward 0.500") for line in lines)
    assert any(line.startswith("step    2/2 | reward 0.500") for line in lines)
    assert "a note between steps" in lines
    logger.close()


def test_a_rank_other_than_0_shows_no_progress(tmp_path):
    out = Terminal()
    logger = RunLogger(tmp_path, 2, stream=out, writes=False)
    logger.log_step(step(1))
    with logger.progress("evaluating", 10, "samples") as bar:
        bar.update(10)
    assert out.getvalue() == "" and not (tmp_path / "metrics.jsonl").exists()


# --- the phases that use it ---------------------------------------------------------------------------------------

PROMPTS = [Prompt(f"t/{i}", ({"role": "user", "content": f"What is {i} + 1?"},), str(i + 1), {}) for i in range(3)]


class OneAnswerEngine:
    def generate(self, prompts, group_size, sampling) -> RolloutBatch:
        texts = [f"Answer: {p.reference}" for p in prompts for _ in range(group_size)]
        mask = torch.ones(len(texts), 4, dtype=torch.long)
        return RolloutBatch(prompts=list(prompts), group_size=group_size, prompt_ids=torch.zeros(len(prompts), 1),
                            prompt_mask=torch.ones(len(prompts), 1), completion_ids=mask.clone(), completion_mask=mask,
                            sampling_logprobs=torch.zeros(mask.shape), completions=texts,
                            truncated=torch.zeros(len(texts), dtype=torch.bool))


class Recorded(Progress):
    def __init__(self, log: list, *opened):
        self.log = log
        log.append(("open", *opened))

    def update(self, n: int = 1) -> None:
        self.log.append(("update", n))

    def close(self) -> None:
        self.log.append(("close",))


def test_evaluation_counts_every_sample_including_the_greedy_pass():
    log: list = []
    config = EvalConfig(samples=4, batch_size=2, greedy=True, ks=[1])
    evaluate(OneAnswerEngine(), Rewarder({"math": (MathVerifier(), 1.0)}), PROMPTS, config, max_new_tokens=4,
             progress=lambda *opened, **kw: Recorded(log, *opened))
    # 3 problems x (4 samples + 1 greedy) = 15; chunks of 2 prompts: sampled 2x4, 1x4, then greedy 2x1, 1x1
    assert log == [("open", "evaluating", 15, "samples"), ("update", 8), ("update", 4), ("update", 2),
                   ("update", 1), ("close",)]


def test_eval_command_shows_progress_on_stderr_and_keeps_stdout_json(tiny_model_dir, tmp_path, capsys):
    code = main(["eval", str(tiny_model_dir), "rollout.max_new_tokens=4", "--n", "2", "--size", "3", "--k", "1",
                 "--greedy", "--output", str(tmp_path / "e.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    json.loads(out)  # stdout stays one JSON document
    # captured stderr is no terminal: plain lines; 3 problems x (2 samples + 1 greedy) = 9
    assert "evaluating: 0/9 samples (0 %)\n" in err
    assert "evaluating: 9/9 samples (100 %) | " in err and " | done in " in err


def test_rlvr_sample_reports_prompts_sampled(tiny_model_dir, tmp_path, monkeypatch, capsys):
    def third(prompts, completions, **columns):
        return [1.0 if sum(map(ord, c)) % 3 == 0 else 0.0 for c in completions]

    monkeypatch.setattr("rlvr.sampling.run.make_rewarder", lambda config: Rewarder({"math": (third, 1.0)}))
    assert main(["sample", f"model.name_or_path={tiny_model_dir}", f"output_dir={tmp_path / 'run'}",
                 "sample.prompts=6", "sample.batch_size=4", "sample.samples=2", "rollout.max_new_tokens=4",
                 "threads=1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "sampling: 0/6 prompts (0 %)" in lines
    # the batch lines stay; the phase ends with its own line (rate and time vary)
    assert any(line.startswith("batch 2/2: 6/6 prompts;") for line in lines)
    assert any(line.startswith("sampling: 6/6 prompts (100 %) | ") and " | done in " in line for line in lines)
    assert lines[-1].startswith("rlvr sample: 6 prompts")


def test_logging_progress_off_silences_rlvr_sample(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("rlvr.sampling.run.make_rewarder",
                        lambda config: Rewarder({"math": (lambda completions, **k: [1.0] * len(completions), 1.0)}))
    config = load_config(None, [f"model.name_or_path={tiny_model_dir}", f"output_dir={tmp_path / 'run'}",
                                "sample.prompts=2", "sample.samples=2", "rollout.max_new_tokens=4", "threads=1",
                                "logging.progress=off"])
    from rlvr.sampling.run import rejection_sample

    rejection_sample(config, say=lambda text: None)
    assert "sampling:" not in capsys.readouterr().out


def test_the_modes_are_the_configs():
    from typing import get_args

    from rlvr.metrics.progress import Mode

    assert get_args(Mode) == get_args(LoggingConfig.model_fields["progress"].annotation)


def test_the_logger_writes_to_the_stdout_of_now_not_of_its_import(tmp_path, monkeypatch):
    """RunLogger's default stream is sys.stdout when the logger is made. As a default argument it was the stdout of
    whoever imported rlvr.metrics.logger first: under pytest, a capture closed since, so a pipeline test run after
    test_resume.py failed with 'I/O operation on closed file' (seen once). Catches `stream=sys.stdout`."""
    import rlvr.metrics.logger as logger_module

    now = io.StringIO()
    monkeypatch.setattr(sys, "stdout", now)
    logger_module.RunLogger(tmp_path, 1).message("hello from the logger")
    assert now.getvalue() == "hello from the logger\n"
