"""Score an answer a reader types into the dashboard's explainer ("score your own answer") with the run's own
verifiers: the task, verifiers and weights of RUN_DIR/config.yaml, as training scored its completions.

Model-written code is never run outside the sandbox here, whatever the run allowed (task.code_unsandboxed is
forced off): the text comes from a web page. Episode tasks (agents) are refused: their reward comes from playing
an episode, not from one typed text.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from rlvr.config.rules import EPISODE_TASKS, REGISTERED_TASKS
from rlvr.config.run import load_config
from rlvr.errors import UserFacingError
from rlvr.types import Prompt

# (question, reference, completion) -> {"reward": float, "verdicts": {verifier: {outcome, score, detail}}}
AnswerScorer = Callable[[str, str, str], dict[str, Any]]


def answer_scorer(run_dir: Path) -> tuple[AnswerScorer | None, str | None]:
    """(the scorer, None), or (None, why the run's answers cannot be scored here) for the page to say."""
    from rlvr.rewards.rewarder import build_rewarder

    config_path = Path(run_dir) / "config.yaml"
    if not config_path.is_file():
        return None, f"{run_dir} holds no config.yaml to build its verifiers from"
    try:
        config = load_config(config_path, ["task.code_unsandboxed=false"])
        if config.task.name in EPISODE_TASKS or REGISTERED_TASKS.get(config.task.name, False):
            return None, f"task {config.task.name!r} plays multi-turn episodes: an episode, not a typed answer, " \
                         "earns its reward"
        rewarder = build_rewarder(config)
    except (UserFacingError, ValueError, TypeError, ImportError) as err:
        return None, f"the run's verifiers could not be built here: {err}"
    lock = threading.Lock()  # one answer at a time: a verifier may hold a worker process or a sandbox

    def score(question: str, reference: str, completion: str) -> dict[str, Any]:
        prompt = Prompt("typed", ({"role": "user", "content": question},), reference)
        with lock:
            scored = rewarder.score([prompt], [completion], truncated=[False])
        return {"reward": float(scored.rewards[0]),
                "verdicts": {name: verdicts[0].as_json() for name, verdicts in scored.verdicts.items()}}
    return score, None
