"""Verifiers: `verify(completion, reference) -> Verdict`, never raising (docs/design.md principle 7).

`VERIFIERS` is the one place a verifier is chosen by name (docs/design.md principle 5): name -> factory taking
the TaskConfig. Factories import their module lazily: `rlvr verify` and the reward workers import this package and
pay only for the verifiers they build (sympy, the code sandbox). Config validation checks `task.verifiers` names
against rlvr.config.rules.VerifierName instead, a list tests/test_config.py keeps equal to VERIFIERS.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from rlvr.verifiers.base import Verifier, safe_verify, verify_many

if TYPE_CHECKING:
    from rlvr.config.run import TaskConfig


def math_answer_mode(task: TaskConfig) -> str:
    """The math verifier's answer mode: task.answer_mode when set, else the task's default, decided here only.
    Datasets (qa) write answers as models and MATH do, in LaTeX: mode latex; the
    arithmetic task asks for 'Answer: <number>' and keeps strict."""
    if task.answer_mode is not None:
        return task.answer_mode
    return "latex" if task.name == "qa" else "strict"


def _math(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.math.verifier import MathVerifier

    return MathVerifier(mode=math_answer_mode(task), timeout_s=task.verifier_timeout_s)


def _format(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.format import FormatVerifier

    # think_prefilled: chat templates that open <think> in the prompt (trl#6966)
    return FormatVerifier(think_prefilled=task.think_prefilled)


def _think_format(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.format import ThinkFormatVerifier

    return ThinkFormatVerifier(think_prefilled=task.think_prefilled)


def _tag_count(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.format import TagCountVerifier

    return TagCountVerifier(think_prefilled=task.think_prefilled)


def _language(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.format import LanguageVerifier

    return LanguageVerifier(script=task.language_script)


def _tool_call(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.tools import ToolCallVerifier

    return ToolCallVerifier()


def _answer_format(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.format import AnswerLineVerifier

    return AnswerLineVerifier()


def _code(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.code.sandbox import SandboxConfig
    from rlvr.verifiers.code.verifier import CodeVerifier

    sandbox = SandboxConfig(time_limit_s=task.code_time_limit_s, memory_mb=task.code_memory_mb,
                            allow_unsandboxed=task.code_unsandboxed)
    return CodeVerifier(mode=task.code_reward_mode, sandbox=sandbox)


def _steps(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.steps import StepsVerifier

    return StepsVerifier()


def _reasoning_gym(task: TaskConfig) -> Verifier:
    from rlvr.verifiers.reasoning_gym import ReasoningGymVerifier

    return ReasoningGymVerifier()


# A new verifier also goes into rlvr.config.rules.VerifierName, the names config validation accepts (a test checks).
VERIFIERS: dict[str, Callable[[TaskConfig], Verifier]] = {
    "math": _math,  # final answer vs reference: exact numbers, else math-verify with a time budget
    "format": _format,  # R1 layout: <think>...</think><answer>...</answer>
    "answer_format": _answer_format,  # last line is 'Answer: <number>'
    "think_format": _think_format,  # one non-empty <think>...</think> block, then an answer
    "tag_count": _tag_count,  # 0.25 per think/answer tag present exactly once (open-r1's tag_count_reward)
    "language": _language,  # share of the completion's letters in the expected script; correct >= 0.95
    "tool_call": _tool_call,  # JSON matching the reference's JSON Schema or function signature
    "code": _code,  # unit tests (asserts / stdin-stdout) run in the bubblewrap sandbox; fraction passed
    "reasoning_gym": _reasoning_gym,  # reasoning-gym's own scorer on the last <answer> block (task reasoning_gym)
    "steps": _steps,  # the arithmetic steps stated in the reasoning all hold (a process reward)
}


def build_verifiers(task: TaskConfig) -> dict[str, Verifier]:
    """One verifier per name in `task.verifiers` (weights are applied by rlvr.rewards.rewarder.Rewarder)."""
    unknown = sorted(set(task.verifiers) - set(VERIFIERS))
    if unknown:
        raise ValueError(f"unknown verifier(s) {unknown}; allowed: {sorted(VERIFIERS)}")
    return {name: VERIFIERS[name](task) for name in task.verifiers}


__all__ = ["VERIFIERS", "Verifier", "build_verifiers", "math_answer_mode", "safe_verify", "verify_many"]
