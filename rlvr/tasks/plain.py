"""Plain questions (task.phrasing=plain): the arithmetic problems asked as a user would.

Why: every other phrasing asks inside the training template: the system turn (task.system_prompt), the one-shot
example and task.instruction ('End with 'Answer: <number>'.'). Asked the R1 recipe's models 'What is 7
times 8? End with 'Answer: <number>'.' with no system turn or example and found the model trained by the recipe
answering worse than the base model and not stopping; a held-out evaluation inside the template cannot see that.

A plain prompt is ONE user turn: no system turn (even when task.system_prompt is set; the chat template's own
default applies, as for a user who sets none), no one-shot example, no task.instruction. It holds:
  * one of SHAPES ('What is ...?', 'Compute ...', 'How much is ...?', '... = ?');
  * the expression with its operators as symbols ('7 * 8') or as words ('7 times 8', WORDS). Level 3's a + b * c
    reads '3 plus 4 times 5', which the usual order of operations reads as 3 + (4 * 5): the reference's value;
  * one of INSTRUCTIONS, or none: the answer forms a user asks for. The math verifier reads each in mode strict
    ('Answer:', \\boxed{}, and a completion that is only the number: rlvr/verifiers/math/bare.py).

Which ones a problem gets is fixed by sha256("plain/" + canonical text), read as mixed-radix digits (shape, then
symbols or words, then instruction): independent of the seed, of Python's hash salt and of the enumeration order,
and so a problem's plain prompt never changes between runs (evaluations are paired by prompt id).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from rlvr.tasks.chat import user_turn
from rlvr.tasks.phrasings import HasCanonical

PLAIN = "plain"  # the task.phrasing value
SHAPES = ("What is {}?", "Compute {}.", "How much is {}?", "{} = ?")
INSTRUCTIONS = ("End with 'Answer: <number>'.", "Give only the number.", "Put the final answer in \\boxed{}.", "")
WORDS = {"+": "plus", "-": "minus", "*": "times"}


@dataclass(frozen=True)
class PlainStyle:
    shape: str  # one of SHAPES
    words: bool  # operators as words ('times') rather than symbols ('*')
    instruction: str  # one of INSTRUCTIONS ('' = none)


def plain_style(problem: HasCanonical) -> PlainStyle:
    """The problem's shape, operator form and instruction, fixed by sha256 (module docstring)."""
    digest = int(hashlib.sha256(f"{PLAIN}/{problem.canonical}".encode()).hexdigest(), 16)
    rest, shape = divmod(digest, len(SHAPES))
    rest, words = divmod(rest, 2)
    return PlainStyle(SHAPES[shape], bool(words), INSTRUCTIONS[rest % len(INSTRUCTIONS)])


def expression(canonical: str, words: bool) -> str:
    """'3 + 4 * 5' as written, or with its operators as words: '3 plus 4 times 5'."""
    return " ".join(WORDS.get(part, part) for part in canonical.split()) if words else canonical


def plain_question(problem: HasCanonical) -> str:
    """The whole user turn: 'What is 7 times 8? Give only the number.'"""
    style = plain_style(problem)
    return user_turn(style.shape.format(expression(problem.canonical, style.words)), style.instruction)


def plain_messages(problem: HasCanonical) -> tuple[dict[str, str], ...]:
    """One user turn, nothing else (module docstring)."""
    return ({"role": "user", "content": plain_question(problem)},)


__all__ = ["INSTRUCTIONS", "PLAIN", "SHAPES", "WORDS", "PlainStyle", "expression", "plain_messages",
           "plain_question", "plain_style"]
