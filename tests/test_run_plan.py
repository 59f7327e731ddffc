"""The lines a run prints before its first step (rlvr/grpo/run_plan.py): batch accounting, memory plan, algorithm."""
from __future__ import annotations

from types import SimpleNamespace

from conftest import tiny_llama
from rlvr.config.run import load_config
from rlvr.grpo.run_plan import memory_plan_lines, start_of_run_lines
from rlvr.tasks import build_task


def test_the_plan_sits_between_the_accounting_and_the_algorithm(tiny_model_dir):
    from transformers import AutoTokenizer

    config = load_config(None, [])
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    lines = start_of_run_lines(config, tiny_llama().config, build_task(config.task), tokenizer)
    assert lines[0].startswith("batch: 4 prompts/step x G=8") and lines[-1].startswith("algorithm: advantage grpo")
    assert any(line.startswith("memory plan: ~") for line in lines[1:-1]), lines


def test_a_plan_that_cannot_be_made_is_one_line_not_a_failed_run():
    config = load_config(None, [])
    broken = SimpleNamespace(model_type="not-a-model")  # no sizes to build a model from
    lines = memory_plan_lines(config, broken, build_task(config.task), tokenizer=None)
    assert len(lines) == 1 and lines[0].startswith("memory plan: unavailable (")
