"""The built-in tasks, listed once: each task's name, the class that builds it and whether it
plays multi-turn episodes. A new built-in task is one line here: config validation reads the names
(rlvr.config.rules.TaskName) and the episode tasks (EPISODE_TASKS), and rlvr.tasks makes its TASKS registry from
it. The classes are named as text, so config still imports no registry; rlvr.tasks imports a task's
module only when that task is built, so the arithmetic path never pays for importing `datasets`, and
tests/test_layout.py counts each entry as an import of rlvr.tasks when it looks for import circles.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuiltinTask:
    where: str  # "module:Class"; the class is called with the TaskConfig
    episodes: bool = False  # plays multi-turn episodes: its task has environment(episode_config) (agents/wiring.py)


# In the order messages list the valid names. The environment tasks live in rlvr/tasks/envs/.
BUILTIN_TASKS: dict[str, BuiltinTask] = {
    "arithmetic": BuiltinTask("rlvr.tasks.arithmetic:ArithmeticTask"),
    "qa": BuiltinTask("rlvr.tasks.qa:QATask"),
    # reasoning-gym's procedural datasets, its own scorer; needs the optional extra `gym`
    "reasoning_gym": BuiltinTask("rlvr.tasks.reasoning_gym:ReasoningGymTask"),
    # a single-player TextArena game, played over several turns; needs the extra `textarena`
    "textarena": BuiltinTask("rlvr.tasks.textarena:TextArenaTask", episodes=True),
    # environment tasks: also .environment(episode) and .answer_verifiers
    "code_agent": BuiltinTask("rlvr.tasks.envs.code:CodeAgentTask", episodes=True),
    "calculator": BuiltinTask("rlvr.tasks.envs.calculator:CalculatorTask", episodes=True),
    "filesystem": BuiltinTask("rlvr.tasks.envs.filesystem:FilesystemTask", episodes=True),
    # the 164 HumanEval problems, all held out: evaluation-first; reads the extra `benchmarks`
    "humaneval": BuiltinTask("rlvr.tasks.humaneval:HumanEvalTask"),
}
