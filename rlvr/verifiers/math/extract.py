"""Final-answer extraction and the hedging check of the math verifier: strings only, no sympy.

Everything here runs in the trainer's process on every completion, so it is linear in the completion's
length (1 MB adversarial inputs take milliseconds) and never parses LaTeX; rlvr.verifiers.math.worker does
that in a separate process with a time budget.

Decisions (each one a line; the tests in tests/test_math_attacks.py and tests/test_verifiers.py pin them):
- Thinking does not count: text before the last `</think>` is reasoning (this also covers chat templates
  that prefill `<think>`, trl#6966), and an unclosed `<think>` makes everything after it reasoning.
- The final answer, by precedence: the last complete `<answer>...</answer>` (inside it: its last box, else its
  'Answer:' line, else its whole text) > the last complete `\\boxed{}`/`\\fbox{}` > the last 'Answer:' /
  'answer is' > the last '####' > (mode last_number) the last number, or (mode latex) the last LaTeX
  environment, bare fraction or plain number (rlvr.verifiers.math.latex). In mode latex, 'Answer:' lines and
  <answer> blocks are read as math-verify reads them (their first LaTeX environment, else their text without
  prose words). A box whose braces never close is not an answer: `\\boxed{\\frac{1}{2}` never reads as 1/2
  (nor does the latex fallback read its inside, or after an unclosed <answer>); one still open
  MAX_ANSWER_CHARS into its content is an over-long answer (unparseable), which keeps the brace scan bounded
  on 1 MB of braces.
- One answer only ("hedged: several answers"): the final answer may not offer alternatives ('or', 'either',
  'and/or'), may not be a list of different values when the reference is one value, may not follow another
  different answer of its kind with only connectives between them (`\\boxed{3} \\boxed{4}`, 'Answer: 3' on
  one line and 'Answer: 4' on the next), and the completion may not state more than MAX_DISTINCT_ANSWERS
  different answers of that kind in all (answer spam; one or two self-corrections stay allowed). LaTeX
  environments and numbers (mode latex) are mostly reasoning, so only their final run counts for spam.
- Several answers where the reference lists several (issue 8, section 2): a run of boxes (or environments,
  'Answer:' lines) joined only by commas and 'and' is one list answer when the reference is a list or a set
  with several items: `\\boxed{1}, \\boxed{2}` answers `\\{1, 2\\}`. Joined by 'or', it stays a hedge.
- Malformed LaTeX (checked in rlvr.verifiers.math.verifier.brace_problem): an answer whose `{` `}` do not balance
  (`\\frac12}`, `\\frac{1}{2`) is unparseable, though math-verify reads both as 1/2: a reward for it would
  teach the model broken LaTeX. `\\frac12` itself is valid LaTeX and reads as 1/2.
- Plain numbers (read in rlvr.verifiers.math.numbers) are compared exactly as fractions, never with a
  tolerance: 0.333 != 1/3, 1e-10 != 0, 0.0001 != 0.0002, 3.1416 != 3.14. Scientific notation (1e-10) is a
  plain number here (math-verify reads '1e-10' as e - 10). A percent 'X%' on one side reads as X/100 or as
  X (50% == 0.5 == 1/2 and 50% == 50, but 50 != 0.5); two percents compare as written (0.25% != 25%).
  Trailing units (`\\text{ cm}`, `^\\circ`, `\\$`) are dropped from a number, text that changes it is not
  (`5 \\text{ million}`; rlvr.verifiers.math.forms). A decimal reference is matched exactly too: 3.1416 and
  \\pi are both wrong for 3.14 (a question that wants rounding states the precision, and its reference is
  the rounded value); a decimal answer to an exact reference (3.14 for \\pi, 0.333 for 1/3) is wrong
  (tolerance bait), unless it is a fraction printed at double precision (0.0833333333333333 for 1/12:
  rlvr.verifiers.math.forms.machine_rounding).
- Issue 24: a reference in several boxes joined by commas is one list, as a completion's is; an 'Answer:'
  line or <answer> block that names the asked variable and then states the value ('the largest $n$ is
  34') reads that value (rlvr.verifiers.math.latex.stated_value). Long completions: math_scan.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal, get_args

from rlvr.verifiers.math.forms import counted_value
from rlvr.verifiers.math.latex import clean as _clean
from rlvr.verifiers.math.latex import connective as _connective
from rlvr.verifiers.math.latex import latex_level, list_gap, refine, solves_nothing, stated_value
from rlvr.verifiers.math.numbers import as_number, canonical, last_number, number_readings  # noqa: F401  (re-exported: rlvr.verifiers.math.verifier and the tests use them)
from rlvr.verifiers.math.scan import ascii_lower, last_marks, nth_last, tail

Mode = Literal["strict", "last_number", "latex"]
MODES: tuple[str, ...] = get_args(Mode)

MAX_ANSWER_CHARS = 2000  # longer extracted answers are not sent to sympy (parse time grows with length)
MAX_DISTINCT_ANSWERS = 3  # more different final answers of one kind than this is answer spam
_RECENT = 64  # candidates materialized per kind: enough to see spam, bounded work on 1 MB inputs
NO_ANSWER = "no final answer found (expected \\boxed{}, 'Answer:' or '####')"
NO_ANSWER_OR_NUMBER = "no final answer found (no \\boxed{}, 'Answer:', '####' or number)"
NO_ANSWER_LATEX = "no final answer found (no \\boxed{}, 'Answer:', '####', LaTeX or readable last number)"
ONLY_IN_THINK = "final answer only inside <think>...</think>; reasoning does not count"

_BOX_START = re.compile(r"\\(?:boxed|fbox)[ \t]*\{")
_BRACES = re.compile(r"(?<!\\)[{}]")  # \{ and \} are set delimiters, not groups
_BOXED_BARE = re.compile(r"\\(?:boxed|fbox) +([^\s{}$]+)")  # MATH also writes "\boxed 5"
_ANSWER_MARK = re.compile(r"\banswer(?:[ \t]*:|[ \t]+is\b[ \t]*:?)", re.IGNORECASE)
_HASH_MARK = re.compile(r"####")
# mode latex: '####' only before an answer (GSM8K '#### 72'), not as a markdown heading ('#### Step 1: ...')
_HASH_ANSWER = re.compile(r"####(?=[ \t]*[-+$\\\d.(\[{])")
_MARKER = re.compile(r"####|\\boxed|\\fbox|<answer>")
_BOX_OR_TAG = re.compile(r"\\boxed|\\fbox|<answer>")
_MEANINGFUL = re.compile(r"[^\s*$.]")  # a segment without one of these cleans to ""
_NEXT_LINE = re.compile(r"\s*([^\n]*)")  # first non-blank line from a position, without copying the text
_HEDGE_WORDS = re.compile(r"\b(?:or|either)\b", re.IGNORECASE)  # 'and/or' contains 'or'
_AND = re.compile(r"\\text\{\s*and\s*\}|\band\b", re.IGNORECASE)
_SET = re.compile(r"\\left\\\{(.*)\\right\\\}|\\\{(.*)\\\}|\{(.*)\}", re.DOTALL)


@dataclass(frozen=True)
class Candidate:
    text: str  # the answer as written, cleaned of wrappers; capped at MAX_ANSWER_CHARS + 1 characters
    start: int  # span of the whole marked answer in the searched text (marker included)
    end: int
    raw: str = ""  # an 'Answer:' line as written when `text` was refined from it (mode latex)


@dataclass(frozen=True)
class FinalAnswer:
    text: str  # the final answer
    kind: str  # "answer_tag" | "boxed" | "answer_line" | "hashes" | "last_number" | "latex"
    recent: tuple[str, ...]  # the last answers of that kind, final one last (spam check)
    run: tuple[str, ...]  # the final answer and the ones right before it with only connectives between
    listed: bool = False  # a run of several joined only by commas and 'and' (a list, not alternatives)


# ---------------------------------------------------------------- thinking
def strip_thinking(text: str) -> str:
    """The text outside reasoning: after the last `</think>`, before an unclosed `<think>`."""
    close = text.rfind("</think>")
    if close >= 0:
        text = text[close + len("</think>"):]
    open_ = text.find("<think>")
    return text if open_ < 0 else text[:open_]


# ---------------------------------------------------------------- candidates of each kind
def _cut(text: str, start: int, end: int, refined: bool = False) -> str:
    """The cleaned answer in text[start:end] (refined as in mode latex when asked); a longer span than
    MAX_ANSWER_CHARS comes back uncleaned and cut at MAX_ANSWER_CHARS + 1, so it is reported as too long
    instead of read as a truncated number."""
    if end - start > MAX_ANSWER_CHARS:
        return text[start:start + MAX_ANSWER_CHARS + 1]
    return refine(text[start:end]) if refined else _clean(text[start:end])


def _box_spans(text: str) -> list[tuple[int, int, int, int, str]]:
    """(start, content start, content end, end, kind) of the last _RECENT boxes, last box last; kind is
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
        if len(spans) >= _RECENT:
            break
    spans += bare[::-1]
    spans.sort()
    return spans[-_RECENT:]


def last_boxed(text: str) -> str | None:
    """Content of the last complete \\boxed{...} or \\fbox{...} (or brace-less \\boxed 5); None if none."""
    for _, start, end, _, kind in reversed(_box_spans(text)):
        if kind != "open":
            return text[start:end] if kind == "braced" else text[start:end].rstrip(".")
    return None


def _boxed(text: str) -> list[Candidate]:
    found = [Candidate(_cut(text, a, b), s, e) for s, a, b, e, _ in _box_spans(text)]
    return [c for c in found if c.text]


def _marked_lines(text: str, mark: re.Pattern, refined: bool = False) -> list[Candidate]:
    """Answers after a marker: the rest of the line up to the next marker (or, when that is empty, the next
    non-empty line), refined as in mode latex when asked. Walks backwards and stops after _RECENT answers or
    MAX_MARKS markers, so 1 MB of markers stays cheap (no honest solution writes thousands of empty
    'Answer:' markers)."""
    if mark is _ANSWER_MARK:  # case-insensitive: its literal is searched in a lowered copy
        marks = [m.span() for m in last_marks(text, (mark,), ("answer",), ascii_lower(text))]
    else:
        marks = [m.span() for m in last_marks(text, (mark,), ("####",))]
    found: list[Candidate] = []
    for i in range(len(marks) - 1, -1, -1):
        start, value = marks[i]
        limit = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        newline = text.find("\n", value, limit)  # bounded by the next marker: linear in all
        end = newline if newline >= 0 else limit
        answer = _cut(text, value, end) if _MEANINGFUL.search(text, value, end) else ""
        if not answer and end < limit:
            nxt = _NEXT_LINE.match(text, end, limit)
            value, end = nxt.start(1), nxt.end(1)
            answer = _cut(text, value, end)
        if answer:
            stated = (refined and _cut(text, value, end, True)) or stated_value(answer) or counted_value(answer) \
                or answer
            found.append(Candidate(stated, start, end, answer))
            if len(found) == _RECENT:
                break
    return found[::-1]


def _answer_tags(text: str, mode: Mode) -> list[Candidate]:
    found, pos = [], nth_last(text, "<answer>")  # tags are paired from the last MAX_MARKS openers
    while (start := text.find("<answer>", pos)) >= 0:
        close = text.find("</answer>", start + len("<answer>"))
        if close < 0:
            break
        found.append((start, close))
        pos = close + len("</answer>")
    candidates = []
    for start, close in found[-_RECENT:]:
        inner = text[start + len("<answer>"):close]
        final = _final(inner, mode, tags=False, fallback=False)
        answer = final.text if final is not None else _cut(inner, 0, len(inner), mode == "latex")
        answer = (final is None and mode != "latex" and (stated_value(answer) or counted_value(answer))) or answer
        if answer:
            candidates.append(Candidate(answer, start, close + len("</answer>")))
    return candidates


# ---------------------------------------------------------------- the final answer
def _adjacent(text: str, first: Candidate, second: Candidate, delimited: bool) -> bool:
    """Whether `second` directly follows `first` as an alternative. An 'Answer:' value runs to the end of its
    line, so it must itself be one chunk plus connectives ('3', '3 or'), not '5. Hmm, 3 + 4 is 7'."""
    if first.end > second.start or not _connective(text[first.end:second.start]):
        return False
    return delimited or _connective(" ".join((first.raw or first.text).split()[1:]))


def _kinds(mode: Mode, tags: bool) -> list:
    refined = mode == "latex"
    kinds = [("answer_tag", lambda t: _answer_tags(t, mode))] if tags else []
    return kinds + [("boxed", _boxed), ("answer_line", lambda t: _marked_lines(t, _ANSWER_MARK, refined)),
                    ("hashes", lambda t: _marked_lines(t, _HASH_ANSWER if refined else _HASH_MARK, refined))]


def _with_run(text: str, kind: str, candidates: list[Candidate]) -> FinalAnswer:
    """The last candidate, with the run of those right before it that only connectives separate."""
    run, listed = [candidates[-1]], True
    for previous in reversed(candidates[:-1]):
        if not _adjacent(text, previous, run[-1], delimited=kind in ("answer_tag", "boxed", "latex")):
            break
        listed = listed and list_gap(text[previous.end:run[-1].start])
        run.append(previous)
    return FinalAnswer(candidates[-1].text, kind, tuple(c.text for c in candidates),
                       tuple(c.text for c in reversed(run)), listed and len(run) > 1)


def _final(text: str, mode: Mode, tags: bool = True, fallback: bool = True) -> FinalAnswer | None:
    for kind, find in _kinds(mode, tags):
        candidates = find(text)
        if candidates:
            return _with_run(text, kind, candidates)
    if not fallback:
        return None
    if mode == "latex" and not _BOX_OR_TAG.search(text):  # a box or tag that never closed is no answer
        text = tail(text)  # the last environment or number is in the last paragraphs (math_scan)
        candidates = [Candidate(span.text, span.start, span.end) for span in latex_level(text) if span.text]
        # Environments are mostly reasoning ('$x = 3$'): only the final run counts as answers (spam check).
        final = _with_run(text, "latex", candidates) if candidates else None
        return None if final is None else replace(final, recent=final.run)
    window = tail(text)
    number = last_number(window) if mode == "last_number" and not solves_nothing(window) else None
    return None if number is None else FinalAnswer(number, "last_number", (number,), (number,))


def final_answer(completion: str, mode: Mode = "strict") -> FinalAnswer | None:
    """The final answer of a completion, reasoning excluded (see the module docstring for precedence)."""
    return _final(strip_thinking(completion), mode)


def extract_answer(text: str, mode: Mode = "strict") -> str | None:
    found = final_answer(text, mode)
    return None if found is None else found.text


def extract_reference(reference: str) -> str | None:
    """The gold answer: marked the same way as completions, else the whole (plain) reference text. Several boxes
    joined by commas or 'and' are one list ('\\boxed{1}, \\boxed{2}' -> '1, 2', issue 24), as in completions."""
    found = _final(reference, "strict")
    if found is None and _MARKER.search(reference):  # '#### ' or '\\boxed{' with nothing readable after it
        return None
    answer = _clean(reference) if found is None else ", ".join(found.run) if found.listed else found.text
    return answer or None


# ---------------------------------------------------------------- checks before any parsing
def _value_key(answer: str) -> str:
    value = as_number(answer)
    return f"={value}" if value is not None else "".join(answer.split())


def top_level_items(answer: str) -> list[str]:
    """`answer` split at commas, semicolons and 'and' outside brackets: '3, 4' -> 2 items, '(0,1]' -> 1."""
    if as_number(answer) is not None:  # '1,234' is one number
        return [answer]
    items, depth, start, text = [], 0, 0, _AND.sub(",", answer)
    for i, ch in enumerate(text):
        if ch in ",;" and i and text[i - 1] == "\\":  # '\\,' '\\;' are spacing ('12\\,\\text{cm}', issue 24)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in ",;" and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _named_values(items: list[str]) -> bool:
    """'x = 3, y = 4' names one value per variable: a tuple written out, not alternatives."""
    names = [re.match(r"\s*([A-Za-z]\w*)\s*=", item) for item in items]
    return all(names) and len({name.group(1) for name in names}) == len(items)


def gold_items(gold: str) -> list[str]:
    """The values a reference lists: its top-level items, inside one outer set brace ('\\{1, 2\\}' -> 2)."""
    match = _SET.fullmatch(gold.strip())
    inner = next((g for g in match.groups() if g is not None), gold) if match else gold
    return top_level_items(inner) if match and brace_free(inner) else top_level_items(gold)


def brace_free(text: str) -> bool:
    """Whether `text` opens no group it leaves (the outer braces of '{1} {2}' are two groups, not a set)."""
    depth = 0
    for ch in text:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            return False
    return True


def _joined(final: FinalAnswer, gold: str) -> bool:
    """Whether the final run is one list answer: listed, and the reference lists several values."""
    return final.listed and len(gold_items(gold)) > 1


def answer_text(final: FinalAnswer, gold: str) -> str:
    """What is compared: the final answer, or a listed run joined when the reference lists several values."""
    return ", ".join(final.run) if _joined(final, gold) else final.text


def hedge_problem(final: FinalAnswer, gold: str) -> str | None:
    """Why `final` offers several answers where the reference has one; None when it commits to one."""
    several = f"hedged: several answers ({_short(final.text)})"
    if final.kind == "last_number":
        return None
    if _HEDGE_WORDS.search(final.text) and not _HEDGE_WORDS.search(gold):
        return several
    if len(gold_items(gold)) == 1:
        items = top_level_items(final.text)
        if len({_value_key(item) for item in items}) > 1 and not _named_values(items):
            return several
        if len({_value_key(answer) for answer in final.run}) > 1:
            return f"hedged: several answers ({', '.join(_short(a, 20) for a in final.run[-3:])})"
    answers = final.recent
    if _joined(final, gold):  # a listed run is one answer
        answers = final.recent[:len(final.recent) - len(final.run)] + (answer_text(final, gold),)
    distinct = len({_value_key(answer) for answer in answers})
    if distinct > MAX_DISTINCT_ANSWERS:
        return f"hedged: several answers ({distinct} different final answers; answer spam)"
    return None


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
