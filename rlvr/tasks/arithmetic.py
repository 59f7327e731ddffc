"""Synthetic arithmetic: every level is a finite, enumerable problem space with a fixed train/held-out split.

Levels (a, b, c are integers; `*` binds tighter than `+`):
  1  times tables: a + b and a * b, a, b in 0..12 (338 problems)
  2  a + b and a - b with a, b in 0..99 (a >= b for -, so results stay natural), a * b with a, b in 2..12
  3  two-digit * one-digit (10..99 * 2..9) and a + b * c with a, b, c in 0..12
  4  two-digit * two-digit (10..99 * 10..99)

Split (rlvr.tasks.base.split_by_hash): a problem's identity is its canonical text ("7 * 8"). Ranking every
problem of a level by the sha256 of that text gives an order that depends on nothing else (not the seed, not
Python's hash salt, not the enumeration order); the first max(200, n // 5) are held out, the rest train. So the
two splits never share a problem, and an evaluation is comparable across runs and seeds. The one-shot example
(chat.EXAMPLE_CANONICAL, "3 + 4") is removed first, so it is in neither split.

Phrasing (task.phrasing; the stories: rlvr/tasks/phrasings.py): symbols asks "What is 7 * 8?" (prompt id
"arithmetic-l1/eval/7 * 8", as before phrasings existed: evaluations are paired by id); words and words_new ask
every problem as a story from the training or the never-trained templates, with the phrasing in the id
("arithmetic-l1/eval/words/7 * 8"), so one problem in two phrasings never shares an id. mixed draws symbols or words
with probability 1/2 per train prompt from a private RNG seeded by the seed (the same stream on resume); its
held-out prompts alternate symbols, words, ... along the fixed held-out order (itself the sha256 ranking), so every
eval.size is half and half and a problem's phrasing never changes. plain (rlvr/tasks/plain.py) asks the
problem as a user would, in one user turn without the system turn, the example or task.instruction (id
"arithmetic-l1/eval/plain/7 * 8"), from the same held-out split. all does for symbols, words and plain what mixed
does for symbols and words (a third each): R1's last RL stage trains over every kind of prompt (Guo et al. 2025,
sec. 2.3.4), so the recipe's model keeps answering outside its template.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from rlvr.config.run import ConfigError, TaskConfig
from rlvr.tasks.base import first, sample_forever, split_by_hash
from rlvr.tasks.chat import EXAMPLE_CANONICAL, build_messages
from rlvr.tasks.phrasings import operators as operators_of
from rlvr.tasks.phrasings import word_question
from rlvr.tasks.plain import PLAIN, plain_messages
from rlvr.types import Prompt

LEVELS = (1, 2, 3, 4)


@dataclass(frozen=True)
class Problem:
    canonical: str  # "7 * 8", "3 + 4 * 5": the identity used for hashing and in Prompt.id
    value: int


def _binary(op: str, left: range, right: range) -> Iterator[Problem]:
    for a in left:
        for b in right:
            if op == "+":
                yield Problem(f"{a} + {b}", a + b)
            elif op == "*":
                yield Problem(f"{a} * {b}", a * b)
            elif a >= b:  # "-": keep results non-negative
                yield Problem(f"{a} - {b}", a - b)


def _enumerate(level: int) -> Iterator[Problem]:
    small, two_digit = range(0, 13), range(10, 100)
    if level == 1:
        yield from _binary("+", small, small)
        yield from _binary("*", small, small)
    elif level == 2:
        yield from _binary("+", range(100), range(100))
        yield from _binary("-", range(100), range(100))
        yield from _binary("*", range(2, 13), range(2, 13))
    elif level == 3:
        yield from _binary("*", two_digit, range(2, 10))
        for a in small:
            for b in small:
                for c in small:
                    yield Problem(f"{a} + {b} * {c}", a + b * c)
    elif level == 4:
        yield from _binary("*", two_digit, two_digit)
    else:
        raise ConfigError(f"task.level: arithmetic has levels {', '.join(map(str, LEVELS))}, got {level}")


@lru_cache(maxsize=None)
def splits(level: int) -> tuple[tuple[Problem, ...], tuple[Problem, ...]]:
    """(train, held_out) for a level; held_out is in its fixed evaluation order."""
    return split_by_hash([p for p in _enumerate(level) if p.canonical != EXAMPLE_CANONICAL], lambda p: p.canonical)


def operators(problem: Problem) -> str:
    """The problem's operators in order: "+", "-", "*", or "+*" for level 3's a + b * c."""
    return operators_of(problem.canonical)


# The phrasings a task.phrasing that draws (mixed, all) chooses among, per train prompt and along the held-out order.
DRAWN = {"mixed": ("symbols", "words"), "all": ("symbols", "words", PLAIN)}


def question_text(problem: Problem) -> str:
    return f"What is {problem.canonical}?"


class ArithmeticTask:
    """Arithmetic problems of one level; see the module docstring for the spaces, the split and the phrasings."""

    def __init__(self, config: TaskConfig) -> None:
        self.config = config
        self.level = config.level
        self.name = f"arithmetic-l{self.level}"
        self.train, self.held_out = splits(self.level)

    def prompt(self, problem: Problem, split: str, phrasing: str | None = None) -> Prompt:
        """The problem asked in `phrasing` (symbols, words, words_new or plain); None = the task's own, which
        task.phrasing=mixed or all does not fix (its callers draw one)."""
        phrasing = phrasing or self.config.phrasing
        key = f"{phrasing}/{problem.canonical}"  # the phrasing in the id: one problem in two never shares one
        if phrasing == "symbols":
            key = problem.canonical  # the id of every run before phrasings
            messages = build_messages(question_text(problem), self.config)
        elif phrasing in ("words", "words_new"):
            messages = build_messages(word_question(problem, phrasing), self.config)
        elif phrasing == PLAIN:  # one user turn of its own: no system turn, example or task.instruction
            messages = plain_messages(problem)
        else:
            raise ValueError(f"prompt phrasing must be symbols, words, words_new or plain, got {phrasing!r}")
        return Prompt(
            id=f"arithmetic-l{self.level}/{split}/{key}",
            messages=messages,
            reference=str(problem.value),
            # per-level / per-op / per-phrasing evaluation breakdown; "set" names one cell, e.g. "L3 words_new"
            columns={"level": self.level, "op": operators(problem), "phrasing": phrasing,
                     "set": f"L{self.level} {phrasing}"},
        )

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        draw = random.Random(f"arithmetic-phrasing/{seed}")  # a str seed hashes with sha512: no hash salt
        choices = DRAWN.get(self.config.phrasing)
        for problem in sample_forever(self.train, seed):  # the problem stream of every phrasing is the same
            phrasing = choices[draw.randrange(len(choices))] if choices else None
            yield self.prompt(problem, "train", phrasing)

    def eval_prompts(self, size: int) -> list[Prompt]:
        choices = DRAWN.get(self.config.phrasing)
        if not choices:
            return [self.prompt(p, "eval") for p in first(self.held_out, size)]
        return [self.prompt(p, "eval", choices[i % len(choices)]) for i, p in enumerate(first(self.held_out, size))]
