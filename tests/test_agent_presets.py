"""The shipped agent presets: the agent commands of docs/agents.md are
`rlvr train configs/agents/NAME.yaml`, typed as written; what makes the small model work lives in the preset, and each
bounds its own time."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from rlvr.config.run import load_config
from rlvr.grpo.loop import train
from rlvr.tasks import build_task

ROOT = Path(__file__).resolve().parent.parent
PRESETS = sorted((ROOT / "configs" / "agents").glob("*.yaml"))


def _bench():
    spec = importlib.util.spec_from_file_location("agents_as_shipped", ROOT / "bench" / "agents_as_shipped.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_agents_page_gives_one_command_per_shipped_preset_and_the_bench_finds_them():
    """The bench parses docs/agents.md: a preset missing from it (or a command the parser cannot read) would leave
    that environment unmeasured. Catches a _COMMAND pattern that misses a line and a preset left out of the page."""
    commands = _bench().shipped_commands((ROOT / "docs" / "agents.md").read_text(encoding="utf-8"))
    assert [preset for _, preset in commands] == [f"configs/agents/{p.name}" for p in
                                                 sorted(PRESETS, key=lambda p: ["calculator", "filesystem",
                                                                                "code_agent"].index(p.stem))]
    assert all(command == f"rlvr train {preset}" for command, preset in commands)


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_each_preset_names_an_environment_task_and_bounds_its_own_time(preset):
    """A preset that trains an environment task within the ~15 minutes its docs/agents.md line promises on a 2-core CPU:
    max_minutes set and below 15 (the step in flight when it runs out still finishes), observations in the user role
    (SmolLM2 was never trained on a tool role), and a task whose environment builds."""
    config = load_config(preset)
    task = build_task(config.task)
    assert hasattr(task, "environment") and task.environment(config.episode).tools
    assert config.max_minutes is not None and config.max_minutes < 15
    assert config.episode.observation_role == "user"


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_each_preset_trains_a_step_on_the_tiny_model(preset, tiny_model_dir, tmp_path):
    """The preset as loaded runs the whole loop (episodes, rewards, update) for one step; only the model and the
    scale are overridden."""
    out = tmp_path / preset.stem
    train(load_config(preset, [f"model.name_or_path={tiny_model_dir}", f"output_dir={out}", "max_steps=1",
                               "rollout.group_size=2", "rollout.prompts_per_step=2", "optimizer.micro_batch_size=4",
                               "eval.at_end=false", "samples_per_step=0"]))
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1]


def test_the_bench_reads_the_commands_own_final_evaluation_and_refuses_one_without_per_problem_rates(tmp_path):
    """The bench's "after" is the run's own end-of-run evaluation (the last eval.jsonl row, which the shipped
    command writes): the last row, not the first (a resumed run appends), copied whole; a row without per-problem
    pass rates (nothing to pair with the base) or no eval.jsonl at all means the bench evaluates the run itself.
    Catches rows[0] for rows[-1] and a missing per-problem check."""
    bench, run, after = _bench(), tmp_path / "run", tmp_path / "after.json"
    run.mkdir()
    assert not bench._own_evaluation(run, after) and not after.exists()
    (run / "eval.jsonl").write_text(json.dumps({"step": 3, "pass@1": 0.1, "per_problem_pass@1": [0.0, 0.25]}) + "\n"
                                    + json.dumps({"step": 9, "pass@1": 0.5, "per_problem_pass@1": [0.5, 0.5]}) + "\n")
    assert bench._own_evaluation(run, after)
    assert json.loads(after.read_text()) == {"step": 9, "pass@1": 0.5, "per_problem_pass@1": [0.5, 0.5]}
    after.unlink()
    (run / "eval.jsonl").write_text(json.dumps({"step": 9, "pass@1": 0.5}) + "\n")
    assert not bench._own_evaluation(run, after) and not after.exists()


def test_the_bench_shows_each_components_correct_share_where_success_needs_several():
    """The code agent's success needs its hidden tests and a tested answer: the table says how much of each
    changed. 450 of 800 code verdicts CORRECT = 0.5625; 100 of 800 state verdicts = 0.125; a component the base
    evaluation did not have (an older run) reads '-'. Catches a share over the wrong total and a swapped pair."""
    bench = _bench()
    base = {"outcomes": {"code/correct": 450, "code/wrong": 349, "code/unparseable": 1}}
    after = {"outcomes": {"code/correct": 600, "code/wrong": 200, "environment/correct": 100,
                          "environment/wrong": 700}}
    assert bench.components(after) == ["code", "environment"]
    assert bench.correct_share(base, "code") == 0.5625 and bench.correct_share(after, "environment") == 0.125
    assert bench.correct_share(base, "environment") is None
    row = {"command": "rlvr train configs/agents/code_agent.yaml", "pass@1": [0.1, 0.2], "change": 0.1, "se": 0.01,
           "beyond_2se": True, "greedy": [0.1, 0.2], "valid_call_share": [0.3, 0.6], "steps": 3, "minutes": 9.0,
           "components": {name: [bench.correct_share(base, name), bench.correct_share(after, name)]
                          for name in bench.components(after)}}
    assert bench.table([row]).endswith("CORRECT share: code 0.562 -> 0.750; environment - -> 0.125")
