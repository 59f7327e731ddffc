"""Named sets of code for `bench/mutate_change.py --scope NAME`: a run others can repeat exactly.

Each entry is a file, a folder (its .py files) or FILE::NAME (one function, class or Class.method).
"""
from __future__ import annotations

SCOPES = {
    # agents and their wiring into rollouts, levels, prefill,
    # the recipe's re-check, checkpoints, the row skip, the rank exit, determinism and decode attention
    "systems-and-agents": [
        "rlvr/agents",
        "rlvr/tasks/levels.py", "rlvr/tasks/__init__.py::build_task", "rlvr/tasks/__init__.py::_with_levels",
        "rlvr/rollout/prefill.py", "rlvr/rollout/hf.py::HFRolloutEngine.continue_tokens",
        "rlvr/pipeline/recheck.py",
        "rlvr/checkpoint",
        "rlvr/training/update.py::_accumulate_and_step", "rlvr/training/update.py::_rows_to_run",
        "rlvr/training/update.py::_probe_entropy",
        "rlvr/grpo/estimators.py",
        "rlvr/distributed/exit.py",
        "rlvr/model/logprobs.py::_packed_states",
        "rlvr/rollout/graph_step.py::sdpa_attention", "rlvr/rollout/graph_step.py::matmul_attention",
        "rlvr/rollout/graph_step.py::default_attention",
    ],
}
