"""The code agent's prompt: two worked run_tests exchanges, the second fixing a FAIL, each a sentence then
the call, its result and the fenced answer. What the tools really answer is checked in tests/test_env_code.py."""
from __future__ import annotations

import json

from rlvr.agents.tool_calls import parse_turn
from rlvr.config.run import TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks import build_task
from rlvr.tasks.envs import code as code_env
from rlvr.tasks.envs.code import EXAMPLE_CODE
from rlvr.tasks.envs.code_tasks import second_example
from rlvr.verifiers.code.verifier import extract_code


def task(**overrides):
    return build_task(TaskConfig(name="code_agent", **overrides))


def test_prompt_has_two_worked_examples_whose_calls_parse():
    """Two exchanges, each a sentence then a run_tests call, its result, the fenced answer: the second's first try
    fails a visible test and its answer is the fixed code (what makes SmolLM2-135M call, code.py's comments)."""
    t = task()
    prompt = t.eval_prompts(1)[0]
    roles = [m["role"] for m in prompt.messages]
    assert roles == ["user", "assistant", "tool", "assistant"] * 2 + ["user"]
    tools = t.environment(EpisodeConfig()).tools
    shots = [parse_turn(0, prompt.messages[i]["content"], tools) for i in (1, 5)]
    assert all(not s.errors and [c.name for c in s.calls] == ["run_tests"] for s in shots)
    assert all(prompt.messages[i]["content"].startswith(code_env.EXAMPLE_LEAD + "\n<tool_call>") for i in (1, 5))
    assert extract_code(prompt.messages[3]["content"]) == EXAMPLE_CODE == shots[0].calls[0].arguments["code"]
    assert shots[1].calls[0].arguments["code"] == code_env.SECOND_FIRST_TRY
    assert prompt.messages[6]["content"] == code_env.SECOND_TOOL_TEXT and "FAIL" in code_env.SECOND_TOOL_TEXT
    assert extract_code(prompt.messages[7]["content"]) == code_env.SECOND_CODE
    assert all("\n" not in c for c in (EXAMPLE_CODE, code_env.SECOND_FIRST_TRY, code_env.SECOND_CODE))  # one line
    assert prompt.messages[4]["content"].startswith(second_example().question)
    question = prompt.messages[-1]["content"]
    assert all(test in question for test in prompt.columns["visible_tests"]) and "run_tests" in question
    assert not any(test in question for test in json.loads(prompt.reference)["asserts"])
    assert "Answer: <number>" not in question  # the math default instruction is replaced
    alone = task(one_shot=False, system_prompt="Be brief.", instruction="Go.").eval_prompts(1)[0]
    assert [m["role"] for m in alone.messages] == ["system", "user"] and alone.messages[1]["content"].endswith("Go.")
