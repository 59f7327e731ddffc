"""A completion that is only a number is that answer in mode strict (last_number and latex read it already).

Why: mode strict reads an answer only where the completion states one (\\boxed{}, 'Answer:', '####', <answer>), so
that a number met in the reasoning is never taken for the answer. Plain questions ask the model as a user
would, among them 'What is 7 times 8? Give only the number.', whose honest reply is `56`: with nothing but the
number there is no reasoning to mistake for it, and refusing it would score the model for a format the question
never asked for. So a completion whose whole text outside <think> is one plain number is that number, with at most
whitespace, one final full stop, and one pair of `$` around it (`**56**` is already read as `56`: emphasis.py).

What stays refused (tests/test_math_bare_number.py): anything else beside the number ('56 or 57', 'I think 56',
'7 * 8 = 56', '56?'), a number only inside <think>, an empty completion; and a number with a thousands comma
('1,234' could be a list) or a fraction ('3/4'): 'plain' means digits, an optional sign and decimal part.
Bounded: a text longer than MAX_BARE characters is never one (the match is on a short string, linear).
"""
from __future__ import annotations

import re

MAX_BARE = 64  # characters: a plain number with its dressing; longer text is never read as one
_BARE = re.compile(r"\s*(?:\$\s*(?P<framed>[-−]?\d+(?:\.\d+)?)\s*\$|(?P<plain>[-−]?\d+(?:\.\d+)?))\s*\.?\s*")


def bare_number(text: str) -> str | None:
    """The number a text consists of ('56', ' $56$.', '-3.5') with a '−' read as '-', else None."""
    if len(text) > MAX_BARE:
        return None
    found = _BARE.fullmatch(text)
    if found is None:
        return None
    return (found.group("framed") or found.group("plain")).replace("−", "-")
