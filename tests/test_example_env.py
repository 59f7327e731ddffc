"""docs/agents.md's "A new environment in under 50 lines" is examples/capitals.py, verbatim, and it
trains: run as a user would (its own process), on the tiny model, its episodes are scored by its state check."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "capitals.py"


def test_the_agents_page_shows_the_example_file_as_it_is_and_it_is_under_50_lines():
    text = EXAMPLE.read_text()
    assert len(text.splitlines()) < 50
    assert f"```python\n{text}```" in (ROOT / "docs" / "agents.md").read_text()


def test_the_example_trains_on_its_own_task_and_environment(tiny_model_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    args = [f"model.name_or_path={tiny_model_dir}", f"output_dir={out}", "max_steps=1", "rollout.group_size=2",
            "rollout.prompts_per_step=2", "episode.tokens_per_turn=8", "episode.tokens_per_episode=24",
            "eval.size=2", "eval.samples=1", "reward.workers=0", "threads=1"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    step = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert "reward/environment" in step and step["outcomes/environment/wrong"] + \
        step.get("outcomes/environment/correct", 0) == 4  # 2 prompts x G = 2 episodes, each scored by its state
    sample = json.loads((out / "samples.jsonl").read_text().splitlines()[0])
    assert sample["prompt_id"].startswith("capitals/")
    # `rlvr verify` re-scores the recorded final states as training did: its score_state reads prompt.columns,
    # which samples.jsonl records. The example's task is registered here without its last line.
    from rlvr.cli.verify import verify_file
    from rlvr.config.rules import REGISTERED_TASKS
    from rlvr.config.run import TaskConfig
    from rlvr.tasks import TASKS

    monkeypatch.setitem(TASKS, "capitals", None)  # restored (removed) after the test, as is the next one
    monkeypatch.setitem(REGISTERED_TASKS, "capitals", True)
    exec(compile(EXAMPLE.read_text().rsplit("\nsys.exit(", 1)[0], str(EXAMPLE), "exec"), {})
    assert verify_file("environment", out / "samples.jsonl", TaskConfig(name="capitals"), tmp_path / "v.jsonl") == 0
    rechecked = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert rechecked and all(v["agrees"] for v in rechecked), rechecked
