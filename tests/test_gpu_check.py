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


def test_the_default_list_is_the_first_gpu_checks_and_extras_run_only_when_named(tmp_path):
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


def test_the_shape_checks_run_as_a_group_ceilings_first(tmp_path):
    every = gpu_check.checks(tmp_path, steps=3, tokenizer="/tok")
    chosen = gpu_check.select(every, "shapes,bf16")
    assert list(chosen) == ["ceilings", "vs_trl_0.5b", "decode_0.5b", "vs_trl_1.5b", "decode_1.5b",
                            "vs_trl_0.5b_fp32", "bf16"]
    command = chosen["vs_trl_1.5b"][0]
    assert command[command.index("--arch") + 1] == "qwen2.5-1.5b" and command[command.index("--model") + 1] == "/tok"
    assert command[command.index("--max-new") + 1] == "256" and "bfloat16" in command
    assert "--only" in chosen["vs_trl_0.5b_fp32"][0] and "bfloat16" not in chosen["vs_trl_0.5b_fp32"][0]
    assert "model.lm_head_fp32=true" in every["bf16_head32"][0]
    assert sum(limit for name, (_, limit) in chosen.items() if name != "bf16") <= 600  # inside one 10-minute call


def test_shape_summaries_hold_the_bounds(tmp_path):
    ceilings = {"device": "NVIDIA H200", "bandwidth_tb_s": 4.0, "bf16_tflops": 800.0, "fp32_tflops": 50.0}
    (tmp_path / "ceilings.json").write_text(json.dumps(ceilings))
    assert gpu_check.summarize("ceilings", tmp_path) == ("NVIDIA H200: copy 4.00 TB/s, matmul bf16 800 / fp32 50.0 "
                                                         "TFLOP/s")
    # the bound: (1.0e9 + 0.2e9 bytes) / 4 TB/s = 0.30 ms; the graph step's 0.6 ms is 2.00x it
    decode = {"dtype": "bfloat16", "rows": 64, "paths": ["eager", "graph"], "eager_ms_per_step": 9.0,
              "graph_ms_per_step": 0.6, "eager_sample_s": 2.0, "graph_sample_s": 0.2, "graph_rows_identical": "64/64",
              "weight_bytes": 1.0e9, "kv_bytes": 0.2e9, "bandwidth_tb_s": 4.0, "hbm_bound_ms": 0.3}
    (tmp_path / "decode_0.5b.json").write_text(json.dumps(decode))
    assert "HBM bound 0.30 ms (1.00 GB weights + 0.20 GB KV at 4.00 TB/s): graph 2.00x the bound" in \
        gpu_check.summarize("decode_0.5b", tmp_path)

    def run(update_s, params=None):
        # 6 x 1e9 parameters x (100 prompt + 900 completion tokens) = 6e12 FLOP a step
        steps = [{"s": 9.0, "tokens": 900, "prompt_tokens": 100, "update": 9.0}] + \
                [{"s": 2.0, "tokens": 900, "prompt_tokens": 100, "update": u} for u in update_s]
        return {"steps": steps, "peak_rss": 20e9, **({"params": params} if params else {})}
    data = {"rlvr": [run([0.02, 0.03], params=1e9)], "trl": [run([1.0, 1.0])]}
    (tmp_path / "vs_trl_0.5b.json").write_text(json.dumps(data))
    line = gpu_check.summarize("vs_trl_0.5b", tmp_path)
    # median update rate of 6e12 / 0.02 = 300 and 6e12 / 0.03 = 200 TFLOP/s: 250, 31 % of 800
    assert "ratio 1.00, memory 1.00" in line and line.endswith("update 250.0 TFLOP/s = 31% of the 800 measured in bf16")
    (tmp_path / "vs_trl_0.5b_fp32.json").write_text(json.dumps({"rlvr": data["rlvr"]}))  # fp32: against fp32's 50
    assert gpu_check.summarize("vs_trl_0.5b_fp32", tmp_path).endswith("250.0 TFLOP/s = 500% of the 50 measured in fp32")


def test_the_next_sessions_group_and_its_profile_line(tmp_path):
    every = gpu_check.checks(tmp_path, steps=3, tokenizer="/tok")
    chosen = gpu_check.select(every, "next")
    assert list(chosen) == ["profile_0.5b", "vs_trl_0.5b_mb16", "profile_0.5b_mb16"]
    assert "optimizer.micro_batch_size=16" in chosen["vs_trl_0.5b_mb16"][0]
    assert sum(limit for _, limit in chosen.values()) <= 400
    # the first step is warm-up: medians of the rest (1.0 and 3.0 -> 2.0), peaks over all steps
    profile = {"phases": {"generate": {"s": [9.0, 1.0, 3.0], "peak_gb": [30.0, 31.5, 31.0], "median_s": 2.0},
                          "sync": {"s": [], "peak_gb": [], "median_s": None}},
               "profile": {"kernels": 12000, "kernel_ms": 2345.6}}
    (tmp_path / "profile_0.5b.json").write_text(json.dumps(profile))
    assert gpu_check.summarize("profile_0.5b", tmp_path) == ("generate 2.00 s (31.5 GB); profiled step: 12000 "
                                                             "kernels, 2346 ms of them")


def test_a_training_summary_holds_the_mismatch_kl(tmp_path):
    (tmp_path / "bf16_head32").mkdir()
    rows = [{"time/rollout_s": 1.0, "correction/mismatch_kl": k} for k in (4e-3, 1e-4, 2e-4)]
    (tmp_path / "bf16_head32" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert gpu_check.summarize("bf16_head32", tmp_path) == ("1.00 s/step over 3 steps; sampler-trainer mismatch KL "
                                                            "median 2.00e-04")


def test_the_decode_step_s_bytes_by_hand():
    """bench/decode_step.py's bound: every weight once plus K and V of every cached position of every row."""
    from types import SimpleNamespace

    import torch

    from decode_step import step_bytes

    config = SimpleNamespace(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=3)
    model = SimpleNamespace(config=config, parameters=lambda: [torch.empty(1000), torch.empty(24)])
    # weights 1024 x 2 bytes; KV 2 (K and V) x 3 layers x 2 KV heads x 16 (= 64 / 4) x 2 bytes x 8 rows x 100 = 307200
    assert step_bytes(model, rows=8, context=100, itemsize=2) == {"weight_bytes": 2048, "kv_bytes": 307200,
                                                                  "context": 100}
