"""Score an answer a reader types into the dashboard's explainer ("score your own answer") with the run's own
verifiers: the task's verifiers and weights of RUN_DIR/config.yaml, as training scored its completions.

Only the built-in verifiers: the reward functions and the reward model a config.yaml names are not loaded, because
opening a run directory (perhaps one someone sent) must run no code it names; a run that had them says so with
each score. Model-written code is never run outside the sandbox here, whatever the run allowed
(task.code_unsandboxed is forced off): the text comes from a web page. Episode tasks (agents) are refused: their
reward comes from playing an episode, not from one typed text.
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
    from rlvr.rewards.rewarder import Rewarder

    config_path = Path(run_dir) / "config.yaml"
    if not config_path.is_file():
        return None, f"{run_dir} holds no config.yaml to build its verifiers from"
    try:
        config = load_config(config_path, ["task.code_unsandboxed=false"])
        if config.task.name in EPISODE_TASKS or REGISTERED_TASKS.get(config.task.name, False):
            return None, f"task {config.task.name!r} plays multi-turn episodes: an episode, not a typed answer, " \
                         "earns its reward"
        rewarder = Rewarder.from_task(config.task)  # the built-in verifiers alone: no code the run names
    except (UserFacingError, ValueError, TypeError, ImportError) as err:
        return None, f"the run's verifiers could not be built here: {err}"
    lock = threading.Lock()  # one answer at a time: a verifier may hold a worker process or a sandbox
    left_out = [what for what, named in (("reward functions", config.reward.functions),
                                         ("reward model", config.reward.model_path)) if named]
    note = f"the run's {' and '.join(left_out)} are not run here (opening a run runs no code it names): the " \
           "reward is its verifiers' part alone" if left_out else ""

    def score(question: str, reference: str, completion: str) -> dict[str, Any]:
        prompt = Prompt("typed", ({"role": "user", "content": question},), reference)
        with lock:
            scored = rewarder.score([prompt], [completion], truncated=[False])
        return {"reward": float(scored.rewards[0]), "note": note,
                "verdicts": {name: verdicts[0].as_json() for name, verdicts in scored.verdicts.items()}}
    return score, None
