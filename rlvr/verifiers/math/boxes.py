"""Boxed answers and the cut of an answer's span, for rlvr.verifiers.math.extract (split from it).

Strings only, linear in the completion: a box whose braces never close is not an answer (`\\boxed{\\frac{1}{2}` never
reads as 1/2); one still open MAX_ANSWER_CHARS into its content is an over-long answer (unparseable), which keeps
the brace scan bounded on 1 MB of braces.
"""
from __future__ import annotations

import re

from rlvr.verifiers.math.latex import clean, refine
from rlvr.verifiers.math.scan import last_marks

MAX_ANSWER_CHARS = 2000  # longer extracted answers are not sent to sympy (parse time grows with length)
RECENT = 64  # candidates materialized per kind: enough to see spam, bounded work on 1 MB inputs

_BOX_START = re.compile(r"\\(?:boxed|fbox)[ \t]*\{")
_BRACES = re.compile(r"(?<!\\)[{}]")  # \{ and \} are set delimiters, not groups
_BOXED_BARE = re.compile(r"\\(?:boxed|fbox) +([^\s{}$]+)")  # MATH also writes "\boxed 5"


def cut(text: str, start: int, end: int, refined: bool = False) -> str:
    """The cleaned answer in text[start:end] (refined as in mode latex when asked); a longer span than
    MAX_ANSWER_CHARS comes back uncleaned and cut at MAX_ANSWER_CHARS + 1, so it is reported as too long
    instead of read as a truncated number."""
    if end - start > MAX_ANSWER_CHARS:
        return text[start:start + MAX_ANSWER_CHARS + 1]
    return refine(text[start:end]) if refined else clean(text[start:end])


def box_spans(text: str) -> list[tuple[int, int, int, int, str]]:
    """(start, content start, content end, end, kind) of the last RECENT boxes, last box last; kind is
    "braced", "bare" (`\\boxed 5`) or "open" (cut at MAX_ANSWER_CHARS).

    Walks the box starts backwards (the last MAX_MARKS, rlvr.verifiers.math.scan). A box cannot close after a
    later box start unless that later box closes first (it would take the closing brace), so each scan stops
    at the next start: linear in all. It also stops MAX_ANSWER_CHARS into the content; such a box is returned
    cut there (an over-long answer, never checked), so a 1 MB run of braces costs one bounded scan.
    """
    spans: list[tuple[int, int, int, int, str]] = []
    limit = len(text)
    marks = last_marks(text, (_BOX_START, _BOXED_BARE), ("\\boxed", "\\fbox"))
    bare = [(m.start(), m.start(1), m.end(1), m.end(), "bare") for m in marks if m.re is _BOXED_BARE]
    for match in reversed([m for m in marks if m.re is _BOX_START]):
        start, content = match.span()
        while bare and bare[-1][0] > start:
            spans.append(bare.pop())
        window = min(limit, content + MAX_ANSWER_CHARS + 1)
        depth, end = 1, None
        for brace in _BRACES.finditer(text, content, window):
            depth += 1 if brace.group() == "{" else -1
            if depth == 0:
                end = brace.start()
                break
        if end is not None:
            spans.append((start, content, end, end + 1, "braced"))
        elif window < limit:  # still open MAX_ANSWER_CHARS in: over-long, reported as such
            spans.append((start, content, window, window, "open"))
        limit = start
        if len(spans) >= RECENT:
            break
    spans += bare[::-1]
    spans.sort()
    return spans[-RECENT:]


def last_boxed(text: str) -> str | None:
    """Content of the last complete \\boxed{...} or \\fbox{...} (or brace-less \\boxed 5); None if none."""
    for _, start, end, _, kind in reversed(box_spans(text)):
        if kind != "open":
            return text[start:end] if kind == "braced" else text[start:end].rstrip(".")
    return None
