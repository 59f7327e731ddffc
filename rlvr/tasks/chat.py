"""Chat turns for one problem: optional system turn, optional solved example, then the question.

The chat template itself is applied later by the rollout engine; here we only decide which turns exist.
"""
from __future__ import annotations

from rlvr.config.run import TaskConfig

# The one-shot example teaches the answer *format* only. Its problem is excluded from every arithmetic
# split (arithmetic.py imports EXAMPLE_CANONICAL), so the model is never rewarded for copying it.
EXAMPLE_CANONICAL = "3 + 4"
EXAMPLE_QUESTION = f"What is {EXAMPLE_CANONICAL}?"
EXAMPLE_SOLUTION = "3 + 4 = 7\nAnswer: 7"


def user_turn(question: str, instruction: str) -> str:
    """`question instruction`, stripped, with no doubled space when either part is empty."""
    return " ".join(part for part in (question.strip(), instruction.strip()) if part)


def build_messages(question: str, config: TaskConfig) -> tuple[dict[str, str], ...]:
    """System turn (only if config.system_prompt is set), the one-shot pair (if config.one_shot), the question.

    system_prompt=None adds no system turn, so the chat template's own default system text applies.
    """
    messages: list[dict[str, str]] = []
    if config.system_prompt is not None:
        messages.append({"role": "system", "content": config.system_prompt})
    if config.one_shot:
        messages.append({"role": "user", "content": user_turn(EXAMPLE_QUESTION, config.instruction)})
        messages.append({"role": "assistant", "content": EXAMPLE_SOLUTION})
    messages.append({"role": "user", "content": user_turn(question, config.instruction)})
    return tuple(messages)
