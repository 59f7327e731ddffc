"""Word-problem phrasings of the arithmetic problems (task.phrasing: data that asks for reasoning).

The same problem ("3 + 4 * 5") can be asked as symbols ("What is 3 + 4 * 5?") or as a short story. There are two
sets of stories:

  * TRAIN ("words"): the phrasings a model is trained on;
  * NEW ("words_new"): other names, other counted objects and other sentence shapes, never used in training, so a
    held-out evaluation on them measures whether the skill transfers to wording the model has not seen.

Each template takes the problem's numbers in canonical order, (a, b) or (a, b, c), and they appear in the question in
that order and nowhere else, so the expression is recoverable from the text. `a * b` is always a groups of b things;
`a + b * c` is a things, then b groups of c. A field is `{a}` (the number alone) or `{a|cow|cows}` (the number with
the noun in the form it needs: "1 cow", "0 cows"), so every template reads correctly for every number of the
arithmetic levels, 0 and 1 included.

Which template a problem gets is fixed by sha256(set name + "/" + canonical text): independent of the seed, of
Python's hash salt and of the enumeration order, and different between the two sets.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Protocol

from rlvr.config.run import ConfigError, TaskConfig

PHRASED_TASKS = ("arithmetic",)  # the tasks that read task.phrasing
TRAIN_SET = "words"
NEW_SET = "words_new"
_FIELD = re.compile(r"\{([abc])(?:\|([^{}|]+)\|([^{}|]+))?\}")


class HasCanonical(Protocol):  # arithmetic.Problem, named by its shape: this module does not import arithmetic
    @property
    def canonical(self) -> str: ...  # "3 + 4 * 5"


@dataclass(frozen=True)
class Template:
    text: str  # with {a}, {b}, {c} fields, see the module docstring
    noun: str  # what the answer counts (plural), e.g. "stickers": the sets are checked to share none


# Keyed by `operators(canonical)`: "+", "-", "*" and "+*" (level 3's a + b * c).
TRAIN: dict[str, tuple[Template, ...]] = {
    "+": (
        Template("Mia has {a|sticker|stickers}. She gets {b} more. How many stickers does Mia have now?", "stickers"),
        Template("A farm has {a|cow|cows} in one field and {b} in another. How many cows are there on the farm?",
                 "cows"),
        Template("Tom read {a|page|pages} on Monday and {b|page|pages} on Tuesday. How many pages did he read on the "
                 "two days?", "pages"),
        Template("A jar holds {a|red marble|red marbles} and {b|blue marble|blue marbles}. How many marbles are in "
                 "the jar?", "marbles"),
    ),
    "-": (
        Template("Mia had {a|sticker|stickers} and gave {b|sticker|stickers} away. How many stickers does she have "
                 "left?", "stickers"),
        Template("A farm had {a|cow|cows}, and the farmer sold {b|cow|cows}. How many cows are left on the farm?",
                 "cows"),
        Template("Tom's book has {a|page|pages}, and he has read {b|page|pages}. How many pages does he still have "
                 "to read?", "pages"),
        Template("A jar held {a|marble|marbles}. Lena took {b|marble|marbles} out. How many marbles are in the jar "
                 "now?", "marbles"),
    ),
    "*": (
        Template("Mia buys {a|pack|packs} of stickers with {b|sticker|stickers} in each pack. How many stickers does "
                 "she buy?", "stickers"),
        Template("A farm has {a|field|fields}, and each field has {b|cow|cows}. How many cows are on the farm?",
                 "cows"),
        Template("For {a|day|days}, Tom reads {b|page|pages} a day. How many pages does he read?", "pages"),
        Template("A box holds {a|bag|bags} of marbles with {b|marble|marbles} in every bag. How many marbles are in "
                 "the box?", "marbles"),
    ),
    "+*": (
        Template("Mia has {a|sticker|stickers}. She buys {b|pack|packs} with {c|sticker|stickers} in each pack. How "
                 "many stickers does she have now?", "stickers"),
        Template("A farm has {a|cow|cows} in the barn and {b|field|fields} with {c|cow|cows} in each field. How many "
                 "cows does the farm have?", "cows"),
        Template("Tom read {a|page|pages} on Monday. Then he read {b|chapter|chapters} of {c|page|pages} each. How "
                 "many pages did he read in all?", "pages"),
        Template("A jar holds {a|loose marble|loose marbles} and {b|bag|bags} with {c|marble|marbles} in each bag. "
                 "How many marbles are in the jar?", "marbles"),
    ),
}

NEW: dict[str, tuple[Template, ...]] = {
    "+": (
        Template("Ravi picked up {a|shell|shells} in the morning and {b|shell|shells} in the afternoon. What is the "
                 "total number of shells he picked up?", "shells"),
        Template("A bus left the depot with {a|passenger|passengers}; at the first stop, {b} more got on. How many "
                 "passengers are on the bus now?", "passengers"),
        Template("Noor put {a|coin|coins} into her piggy bank last week and {b|coin|coins} this week. Altogether, "
                 "how many coins did she put in?", "coins"),
    ),
    "-": (
        Template("Ravi gathered {a|shell|shells} at the beach but dropped {b|shell|shells} on the walk home. How many "
                 "shells made it home?", "shells"),
        Template("A bus reached a stop carrying {a|passenger|passengers}, and {b} got off there. How many passengers "
                 "remained on board?", "passengers"),
        Template("Noor's purse held {a|coin|coins}. At the market she spent {b|coin|coins}. What number of coins "
                 "remained in the purse?", "coins"),
    ),
    "*": (
        Template("An orchard is planted in {a|row|rows} with {b|tree|trees} per row. How many trees grow in the "
                 "orchard?", "trees"),
        Template("Kofi fills {a|carton|cartons}, putting {b|egg|eggs} into every carton. How many eggs does he "
                 "pack?", "eggs"),
        Template("A theatre has {a|row|rows} of {b|seat|seats}. What is the number of seats in the theatre?",
                 "seats"),
    ),
    "+*": (
        Template("Ravi owns {a|shell|shells}. He adds {b|bucket|buckets} holding {c|shell|shells} apiece. How many "
                 "shells does he own now?", "shells"),
        Template("A theatre has {a|seat|seats} on its balcony and {b|row|rows} of {c|seat|seats} downstairs. How "
                 "many seats are there altogether?", "seats"),
        Template("Kofi already has {a|egg|eggs}. He is given {b|carton|cartons}, each holding {c|egg|eggs}. What is "
                 "his total number of eggs?", "eggs"),
    ),
}

SETS = {TRAIN_SET: TRAIN, NEW_SET: NEW}


def render(text: str, numbers: tuple[int, ...]) -> str:
    """A template's text with its fields filled from (a, b) or (a, b, c)."""
    values = dict(zip("abc", numbers))

    def field(match: re.Match[str]) -> str:
        n = values[match.group(1)]
        if match.group(2) is None:
            return str(n)
        return f"{n} {match.group(2) if n == 1 else match.group(3)}"

    return _FIELD.sub(field, text)


def operators(canonical: str) -> str:
    """The operators in order: "+", "-", "*", or "+*" for "3 + 4 * 5" (the key of TRAIN and NEW)."""
    return "".join(ch for ch in canonical if ch in "+-*")


def numbers(problem: HasCanonical) -> tuple[int, ...]:
    """The operands in canonical order: "3 + 4 * 5" -> (3, 4, 5)."""
    return tuple(int(part) for part in problem.canonical.split()[::2])


def template_for(problem: HasCanonical, phrasing: str) -> Template:
    """The problem's template in set `phrasing` ("words" or "words_new"), fixed by sha256 (module docstring)."""
    templates = SETS[phrasing][operators(problem.canonical)]
    digest = hashlib.sha256(f"{phrasing}/{problem.canonical}".encode()).hexdigest()
    return templates[int(digest, 16) % len(templates)]


def word_question(problem: HasCanonical, phrasing: str) -> str:
    """The problem as a story from set `phrasing`; the task's instruction is appended later (chat.build_messages)."""
    return render(template_for(problem, phrasing).text, numbers(problem))


def expression_line(problem: HasCanonical) -> str:
    """A cold-start trace's first line for a word problem: the expression the story asks for. Short on purpose
    (two words before the expression): SmolLM2 spends a token per digit and the completion budget is ~64."""
    return f"That is {problem.canonical}."


def check_phrasing(config: TaskConfig) -> None:
    """task.phrasing other than symbols on a task that does not read it is one ConfigError (it would be ignored
    without a word, and a 'words' run would silently train on the task's usual prompts)."""
    if config.phrasing != "symbols" and config.name not in PHRASED_TASKS:
        raise ConfigError(f"task.phrasing={config.phrasing}: only {', '.join(PHRASED_TASKS)} has word phrasings; "
                          f"task {config.name!r} asks its own questions (leave task.phrasing=symbols)")


__all__ = ["NEW", "NEW_SET", "PHRASED_TASKS", "SETS", "TRAIN", "TRAIN_SET", "Template", "check_phrasing",
           "expression_line", "numbers", "operators", "render", "template_for", "word_question"]
