"""'Answer:' and '####' lines: where their value is, and whether they state one (split from
rlvr.verifiers.math.extract). Strings only, linear: markers are walked from the end (math.scan).

Decisions (tests/test_math_statements.py, tests/test_math_around.py):
- A line's value is the rest of its line after the marker (up to the next marker), or the next non-empty line when
  that is empty; it ends with its first clause (rlvr.verifiers.math.around.value_end: 'The final answer is 18. She
  has 20 dollars left.' states 18, '34 because 12 + 22 = 34' states 34).
- A line holding only 'Final Answer' (bold or not, no '#') is a heading over the next line's
  value, as '### Final Answer' is.
- What it states: the value after a named subject ('the largest $n$ is 34', rlvr.verifiers.math.latex.stated_value),
  a count ('17 birds': rlvr.verifiers.math.forms.counted_value), a number after fillers or a subject and a copula
  ('the total is 4', 'there are 4 apples', "It's 4": rlvr.verifiers.math.prose), else the clause itself; mode latex
  refines it as math-verify reads it (rlvr.verifiers.math.latex.refine).
- A line states a value (states_value) when it starts like one, is a one-word answer ('Evelyn', 'yes'), or holds a
  digit or LaTeX ('The answer is therefore 4' overrules an earlier box); not when it judges an
  answer ('this answer is correct because ...') or states nothing ('I hope this answer is helpful!'). 'the answer
  is not 5' is no statement (a retraction: rlvr.verifiers.math.around).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.verifiers.math.around import value_end
from rlvr.verifiers.math.boxes import MAX_ANSWER_CHARS, RECENT, cut
from rlvr.verifiers.math.forms import counted_value
from rlvr.verifiers.math.latex import stated_value
from rlvr.verifiers.math.numbers import as_number
from rlvr.verifiers.math.prose import lead_end
from rlvr.verifiers.math.scan import ascii_lower, last_marks
from rlvr.verifiers.math.words import dozens_counted

# Markdown around the marker reads as without it: '__Answer:__ 42', '*Answer*:
# 42', and a heading alone on its line ('### Final Answer', then the value on the next line: _heading)
ANSWER_MARK = re.compile(r"(?:\b|(?<=_))answer(?:(?:\*\*|__|[*_])?[ \t]*:|[ \t]+is\b(?![ \t]+not\b)[ \t]*:?"
                         r"|(?=(?:\*\*|__|[*_])?[ \t]*(?:\r?\n|\Z)))", re.IGNORECASE)
# '**Final Answer**' alone on its line is a heading too (its '**' are dropped first: emphasis.py)
_HEADING = re.compile(r"(?:#{1,6}[ \t]+)?(?:\*\*|__|[*_])?(?:final[ \t]+)?", re.IGNORECASE)
HASH_MARK = re.compile(r"####")
# mode latex: '####' only before an answer (GSM8K '#### 72'), not as a markdown heading ('#### Step 1: ...')
HASH_ANSWER = re.compile(r"####(?=[ \t]*[-+$\\\d.(\[{])")
LINE_KINDS = ("answer_line", "hashes")
_MEANINGFUL = re.compile(r"[^\s*$.]")  # a segment without one of these cleans to ""
_NEXT_LINE = re.compile(r"\s*([^\n]*)")  # first non-blank line from a position, without copying the text
_ANY_VALUE = re.compile(r"[\d$\\]")
_WORD_ANSWER = re.compile(r"(?:[A-Z][\w'-]*|yes|no|none|true|false|undefined|impossible)[.!]?")  # one-word answers
_JUDGEMENT = re.compile(r"(?:correct|right|consistent|reasonable|plausible|valid|verified|confirmed|helpful|clear"
                        r"|sensible|accurate|checked|wrong|incorrect|independent|dependent|in\s+(?:units|terms)|expressed|written"
                        r"|unique|the\s+same|rounded)\b", re.IGNORECASE)  # 'answer is correct'; '... is independent of
# the 2 chosen points', '... is in units of 10 m' describe the answer, they state none

# What an 'Answer:' / '####' line that states a value starts with: a number, LaTeX, a bracket, a currency
# sign, a variable set to a value, or a number word ('five apples'); anything else is prose (states_value).
_VALUE_START = re.compile(r"[-+\u2212\u2013~]?\s*[\d.$\\({\[<\u20ac\u00a3\u00a5]|[A-Za-z](?:_\{?\w+\}?)?\s*(?:=|$)"
                          r"|(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|[a-z]+teen|twenty"
                          r"|thirty|forty|fifty|sixty|seventy|eighty|ninety|a\s+half|half)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Candidate:
    text: str  # the answer as written, cleaned of wrappers; capped at MAX_ANSWER_CHARS + 1 characters
    start: int  # span of the whole marked answer in the searched text (marker included); a line's ends with its value
    end: int
    raw: str = ""  # an 'Answer:' line as written when `text` was read from it (stated value, refined, counted)
    kind: str = ""  # set when the statements of all kinds are merged (rlvr.verifiers.math.extract)
    declared: bool = True  # an answer declaration, or a box inside one; other boxes are steps (hedges.py)
    line_end: int = -1  # where a line's line ends (its value may end before: around.value_end)
    problem: str = ""  # why this statement, if final, is no answer (an <answer> block's own: around.py)
    alone: bool = False  # a framed box or display after the answer: no connective joins it to one before


def marked_lines(text: str, mark: re.Pattern, refined: bool = False) -> list[Candidate]:
    """Answers after a marker (see the module docstring), refined as in mode latex when asked. Walks backwards and
    stops after RECENT answers or MAX_MARKS markers, so 1 MB of markers stays cheap (no honest solution writes
    thousands of empty 'Answer:' markers)."""
    if mark is ANSWER_MARK:  # case-insensitive: its literal is searched in a lowered copy
        marks = [m.span() for m in last_marks(text, (mark,), ("answer",), ascii_lower(text)) if _heading(text, m)]
    else:
        marks = [m.span() for m in last_marks(text, (mark,), ("####",))]
    found: list[Candidate] = []
    skipped = 0  # headings over work (below)
    for i in range(len(marks) - 1, -1, -1):
        start, value = marks[i]
        limit = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        newline = text.find("\n", value, limit)  # bounded by the next marker: linear in all
        end = newline if newline >= 0 else limit
        answer = cut(text, value, end) if _MEANINGFUL.search(text, value, end) else ""
        if not answer and end < limit:
            nxt = _NEXT_LINE.match(text, end, limit)
            value, end = nxt.start(1), nxt.end(1)
        line_end, end = end, value_end(text, value, end)
        answer = cut(text, value, end)
        heading = marks[i][1] - start == len("answer")  # '### Final Answer\n\n42' states 42; a heading
        if heading and not _states_itself(answer):  # over work ('## Answer\n\nFirst, 3 + 4 = 7 ...') states nothing
            skipped += 1  # and counts towards RECENT: 4096 of them cost 0.17 s
            if skipped + len(found) >= RECENT:
                break
            continue
        if answer:
            found.append(Candidate(_stated(text, value, end, answer, refined), start, end, answer, line_end=line_end))
            if len(found) + skipped >= RECENT:
                break
    return found[::-1]


def _heading(text: str, mark: re.Match) -> bool:
    """Whether an 'answer' marker ending its line is a markdown heading ('### Final Answer'); markers ending in ':' or
    'is' always count. Only the heading's own line is read (bounded: a heading is short)."""
    if mark.end() > mark.start() + len("answer"):
        return True
    low = max(0, mark.start() - 40)
    line = text.rfind("\n", low, mark.start()) + 1 or (low if low == 0 else mark.start())
    return _HEADING.fullmatch(text, line, mark.start()) is not None


def _states_itself(answer: str) -> bool:
    """Whether the line under a heading is a value: it starts like one, or states one after a subject and a copula."""
    return bool(_VALUE_START.match(answer)) or lead_value(answer) is not None or counted_value(answer) is not None


def _stated(text: str, value: int, end: int, answer: str, refined: bool) -> str:
    """What the line's value clause text[value:end] (cleaned: `answer`) states (see the module docstring)."""
    if refined:
        return dozens_counted(answer) or cut(text, value, end, True) or answer
    raw = text[value:end] if end - value <= MAX_ANSWER_CHARS and text.count("$", value, end) <= 16 else ""  # a
    # subject and its value: a few environments, not 2000 '$' to pair on each of 64 lines
    counted = counted_value(answer) or dozens_counted(answer)
    return (raw and stated_value(raw)) or counted or lead_value(answer) or answer


def lead_value(answer: str) -> str | None:
    """The number after fillers or a subject and a copula ('the total is 4', 'there are 4 apples'), else None."""
    at = lead_end(answer)
    rest = answer[at:].strip()
    if not at:
        return None
    return rest if as_number(rest) is not None else counted_value(rest)


def states_value(candidate: Candidate) -> bool:
    """Whether a statement states a value (see the module docstring): boxes and <answer> blocks always."""
    if candidate.kind not in LINE_KINDS:
        return True
    written = candidate.raw or candidate.text
    if _VALUE_START.match(written):
        return True
    if candidate.kind != "answer_line" or _JUDGEMENT.match(written):
        return False
    return _WORD_ANSWER.fullmatch(written) is not None or _ANY_VALUE.search(written) is not None \
        or stated_value(written) is not None
