"""Pieces of exact resume (issue #9): the prompt stream's cursor, RNG capture, config differences, signals."""
from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap

import torch

from rlvr.checkpoint.state import CountingStream, config_differences, restore_rng, rng_state


def test_counting_stream_resumes_at_the_same_item():
    def stream():
        rng = random.Random(7)
        while True:
            yield rng.randrange(1000)

    first = CountingStream(stream())
    for _ in range(25):
        next(first)
    resumed = CountingStream(stream(), skip=first.drawn)
    assert first.drawn == 25 and resumed.drawn == 25
    assert [next(resumed) for _ in range(10)] == [next(first) for _ in range(10)]


def test_rng_state_round_trip_replays_draws():
    state = rng_state()
    draws = (random.random(), torch.rand(3))
    restore_rng(state)
    assert random.random() == draws[0] and torch.equal(torch.rand(3), draws[1])


def test_config_differences_name_keys_and_ignore_free_ones():
    saved = {"seed": 1, "max_steps": 10, "rollout": {"group_size": 8, "top_p": 1.0}, "eval": {"every": 0}}
    asked = {"seed": 1, "max_steps": 40, "rollout": {"group_size": 4, "top_p": 1.0}, "eval": {"every": 5}}
    assert config_differences(saved, asked) == ["rollout.group_size: 8 -> 4"]
    assert config_differences(saved, saved) == []


_STOPPER = textwrap.dedent("""
    import sys, time
    from rlvr.checkpoint.stop import GracefulStop
    with GracefulStop() as stop:
        print("ready", flush=True)
        for step in range(100):
            time.sleep(0.05)  # a step in flight: the signal must not interrupt it
            if stop.requested:
                print(f"stopped after step {step} on {stop.signal_name}", flush=True)
                sys.exit(0)
    sys.exit(3)
""")


def _stopper():
    proc = subprocess.Popen([sys.executable, "-c", _STOPPER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_first_signal_finishes_the_step_and_exits_zero():
    proc = _stopper()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stopped after step" in out and "SIGTERM" in out
    assert "finishing this step" in err


def test_second_signal_exits_at_once():
    proc = subprocess.Popen([sys.executable, "-c", _STOPPER.replace("time.sleep(0.05)", "time.sleep(5)")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    proc.stderr.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT and "stopped" not in out and "exiting now" in err


def test_resume_keeps_each_log_s_lines_up_to_the_step_and_drops_a_torn_one(tmp_path):
    """On resume the logs are cut back to the checkpoint's step: the steps after it run again and write their lines
    again. A line a crash tore mid-write is dropped (issue 41: kept, it broke every later reader of the file)."""
    import json

    from rlvr.checkpoint.resume import LOGS, truncate_logs

    lines = [json.dumps({"step": 1, "loss": 0.5}), json.dumps({"event": "start"}),  # no step: a run-level line
             json.dumps({"step": 2, "loss": 0.4}), json.dumps({"step": 3, "loss": 0.3}), "", '{"step": 2, "loss": 0.']
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines))  # the torn line last, with no newline
    (tmp_path / "eval.jsonl").write_text(json.dumps({"step": 3, "pass@1": 0.5}) + "\n")
    (tmp_path / "notes.txt").write_text("not a log\n")
    truncate_logs(tmp_path, 2)
    assert (tmp_path / "metrics.jsonl").read_text().splitlines() == lines[:3]
    assert (tmp_path / "eval.jsonl").read_text() == "" and (tmp_path / "notes.txt").read_text() == "not a log\n"
    assert not (tmp_path / "samples.jsonl").exists() and "metrics.jsonl" in LOGS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.jsonl", "metrics.jsonl", "notes.txt"]  # no staging
