"""bench/gpu_check.py is run once per lent GPU session, where a crash in its own bookkeeping would cost device
time that cannot be had back: its check list and its one-line summaries are checked here on the CPU, on outputs
shaped like the 2026-11-27 H100 run's (bench/data/gpu_check_h100_2026-11-27.json)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import gpu_check  # noqa: E402


def test_the_default_list_is_issue_23s_and_extras_run_only_when_named(tmp_path):
    every = gpu_check.checks(tmp_path, steps=3)
    assert list(gpu_check.select(every, None)) == ["decode_fp32", "decode_bf16", "default", "bf16", "vs_trl_bf16",
                                                   "lora", "sft", "vs_trl_fp32"]
    assert list(gpu_check.select(every, "bf16_cudnn,bf16,bf16_cudnn")) == ["bf16_cudnn", "bf16"]  # as named
    with pytest.raises(SystemExit, match="no check"):
        gpu_check.select(every, "bf16,cudnn")


def test_summaries_of_a_decode_a_comparison_and_a_training_run(tmp_path):
    decode = {"dtype": "bfloat16", "rows": 64, "eager_ms_per_step": 11.2, "graph_ms_per_step": 2.45,
              "compiled_ms_per_step": 1.42, "eager_sample_s": 2.73, "graph_sample_s": 0.36, "compiled_sample_s": 0.23,
              "graph_rows_identical": "64/64", "compiled_rows_identical": "13/64", "compiled_first_sample_s": 2.8}
    (tmp_path / "decode_bf16.json").write_text(json.dumps(decode))
    line = gpu_check.summarize("decode_bf16", tmp_path)
    assert "11.20 eager -> 2.45 graph -> 1.42 compiled" in line and "compiled 13/64" in line
    more = {**decode, "paths": ["eager", "graph", "compiled", "graph_matmul"], "graph_matmul_ms_per_step": 2.0,
            "graph_matmul_sample_s": 0.3, "graph_matmul_rows_identical": "60/64"}
    line = gpu_check.decode_line(more)  # four paths: a list, each named
    assert "11.20 eager, 2.45 graph, 1.42 compiled, 2.00 graph_matmul" in line and "graph_matmul 60/64" in line

    def run(seconds):  # the first step of each run is warm-up and left out
        return {"steps": [{"s": 9.0, "tokens": 100}] + [{"s": s, "tokens": 2000} for s in seconds], "peak_rss": 7e9}
    (tmp_path / "vs_trl_bf16.json").write_text(json.dumps({"rlvr": [run([0.8, 1.0])], "trl": [run([4.0, 4.0])]}))
    line = gpu_check.summarize("vs_trl_bf16", tmp_path)
    assert "rlvr 0.90 s/step" in line and "TRL 4.00" in line and "ratio 0.23" in line  # 0.9 / 4.0 = 0.225
    (tmp_path / "vs_trl_fp32_sdpa.json").write_text(json.dumps({"rlvr": [run([0.6, 0.7]), run([0.8, 0.9])]}))
    line = gpu_check.summarize("vs_trl_fp32_sdpa", tmp_path)  # rlvr's side alone: median of 0.6-0.9 = 0.75
    # tokens/s: the median of each step's 2000 / s = 3333, 2857, 2500, 2222 -> (2857 + 2500) / 2 = 2679
    assert line == "rlvr 0.75 s/step (2679 tok/s, 7.00 GB)"

    (tmp_path / "bf16").mkdir()
    rows = [{"time/rollout_s": 3.0, "time/train_s": 1.0}, {"time/rollout_s": 0.5, "time/train_s": 0.3},
            {"time/rollout_s": 0.6, "time/train_s": 0.4}, {"pass@1": 0.9}]  # an evaluation row has no phases
    (tmp_path / "bf16" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert gpu_check.summarize("bf16", tmp_path) == "0.90 s/step over 3 steps"  # median of 0.8 and 1.0
