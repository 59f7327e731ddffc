"""Bounded scans of a long completion for the math verifier: strings only, linear, and capped in Python work.

A 1 MB completion took 1-2 s of the trainer's CPU to extract, because every marker and
every number of the whole text went through Python (a match object each, 100k+ of them). The final answer
sits at the end of a completion, so the scans here work from the end and stop early:
- Markers ('\\boxed', 'Answer:', '####', '<answer>') are located with str.rfind (C speed) on the literal a
  marker starts with; only the last MAX_MARKS occurrences of that literal are matched in Python. An honest
  completion does not write thousands of 'answer' words after its final 'Answer:' line. Found from the end,
  markers cannot overlap those after them: in a run of '#' the last four are the '####' marker.
- The fallbacks without a marker (the last number; mode latex's last environment or number) read only the
  last FALLBACK_CHARS of the text, from a paragraph or line start: what they look for is the last thing
  written, and their per-character regexes and per-number Python work are what cost seconds on 1 MB.
  A LaTeX math environment cannot span a blank line, so a cut at a paragraph start opens none halfway.
"""
from __future__ import annotations

import re

MAX_MARKS = 4096  # occurrences of a marker's literal examined, from the last one back
FALLBACK_CHARS = 16_384  # the tail read by the fallbacks; a final sentence or paragraph is far shorter
_SPACE = re.compile(r"\s")


def ascii_lower(text: str) -> bytes:
    """`text` with ASCII letters lowered, one byte per character (others become '?'), so that positions are
    the text's own: what case-insensitive literals are searched in (str.lower can change the length)."""
    return text.encode("latin-1", "replace").lower()


def last_marks(text: str, patterns: tuple[re.Pattern, ...], anchors: tuple[str, ...],
               lowered: bytes | None = None) -> list[re.Match]:
    """Matches of `patterns` (each tried in order, the first that matches wins) at the last MAX_MARKS
    occurrences of `anchors` (the literals a match starts with), in text order. With `lowered`
    (ascii_lower(text)) the anchors, given in lower case, are searched there: case-insensitive."""
    hay = text if lowered is None else lowered
    keys = anchors if lowered is None else tuple(a.encode() for a in anchors)
    following = {key: hay.rfind(key) for key in keys}  # each anchor's last occurrence not yet examined
    found = []
    for _ in range(MAX_MARKS):
        key = max(following, key=following.__getitem__)
        at = following[key]
        if at < 0:
            break
        match = next((m for m in (p.match(text, at) for p in patterns) if m), None)
        if match is not None:
            found.append(match)
        following[key] = hay.rfind(key, 0, at)  # ends at or before `at`: no overlap with what follows
    return found[::-1]


def nth_last(text: str, literal: str, n: int = MAX_MARKS) -> int:
    """Position of the n-th last occurrence of `literal` (0 when there are fewer): where a forward scan
    that needs only the last n occurrences can start."""
    at = len(text)
    for _ in range(n):
        previous = text.rfind(literal, 0, at)
        if previous < 0:
            return 0
        at = previous
    return at


def tail(text: str, size: int = FALLBACK_CHARS) -> str:
    """The last `size` characters of `text`, from the first paragraph start in that window (else line start,
    else word start within its first half); '' for a window without any of them (no prose: no answer)."""
    if len(text) <= size:
        return text
    cut = len(text) - size
    for boundary in ("\n\n", "\n"):  # a boundary ending right at the cut counts: the window starts after it
        at = text.find(boundary, cut - len(boundary), cut + size // 2)
        if at >= 0:
            return text[at + len(boundary):]
    space = _SPACE.search(text, cut - 1, cut + size // 2)
    return "" if space is None else text[space.end():]
