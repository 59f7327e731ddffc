"""A value framed or displayed after the final statement. Strings
only, linear: a bounded number of anchored matches in the window after the statement.

Decision (tests/test_math_r5_statements.py; corpus rows of form 'r5_statement'):
- A box of another name ('\\framebox{3}', '\\colorbox{yellow}{3}', '\\fcolorbox{red}{white}{3}', '\\bbox{3}') or a
  display alone on its line ('\\[3\\]', '$$3$$') after the final statement frames or displays a value, as a box
  does: it is one more answer statement, so the answer ('\\boxed{4}\\n\\n\\[3\\]' pays 3, never 4). It is read
  alone: the blank line before it joins nothing (unlike a bare '3' below the box, a hedge). A display holding a
  relation ('\\[2 + 2 = 4\\]') checks work and states nothing; one restating the answer changes nothing. Two that
  state different values offer both: a hedge, as two boxes are (a mutation sample).
"""
from __future__ import annotations

import re
from itertools import islice

from rlvr.verifiers.math.around import HEDGED
from rlvr.verifiers.math.latex import clean
from rlvr.verifiers.math.lines import Candidate
from rlvr.verifiers.math.numbers import as_number

KIND = "correction"  # read as a correction after the final statement (rlvr.verifiers.math.corrections)
_ARG = r"\{[^{}\n]{0,30}\}\s*"
_FRAMED = re.compile(rf"\\(?:framebox|bbox|colorbox\s*{_ARG}|fcolorbox\s*{_ARG}{_ARG})\s*(?:\[[^\]\n]{{0,20}}\]\s*)*"
                     r"\{(?P<framed>[^{}\n]{1,200})\}"
                     r"|(?<![^\n])[ \t]*(?:\\\[|\$\$)(?P<shown>[^\n$]{1,200}?)(?:\\\]|\$\$)[ \t]*(?=\n|\Z)")
_RELATION = re.compile(r"[=<>≤≥≠≈]|\\(?:[lg]eq?|neq?|approx|sim|[lg]t|text)(?![A-Za-z])")


def later(text: str, start: int, limit: int, latest: str) -> Candidate | None:
    """The last framed box or display alone on its line in text[start:limit] when it states a value other than
    `latest` (the answer so far); None otherwise (see the module docstring). At most 8 are read."""
    last, values = None, []
    for match in islice(_FRAMED.finditer(text, start, limit), 8):
        group = "framed" if match.group("framed") is not None else "shown"
        value = clean(match.group(group))
        if not value or _RELATION.search(match.group(group)):
            continue
        values += [] if any(same(value, seen) for seen in values) else [value]
        # two different framed values after the answer offer both, as two boxes do ('\\framebox{3} or
        # \\framebox{5}' paid 5: a mutation sample found it)
        hedge = f"{HEDGED} ({', '.join(values)})" if len(values) > 1 else ""
        last = Candidate(value, match.start(group), match.end(), match.group(group), kind=KIND, alone=True,
                         problem=hedge)
    return None if last is None or (same(last.text, latest) and not last.problem) else last


def same(one: str, other: str) -> bool:
    """Whether two stated values are one: the same text or the same number."""
    number = as_number(one)
    return one == other or (number is not None and number == as_number(other))
