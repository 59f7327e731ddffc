"""Final-answer extraction, exact numbers and the hedging check of the math verifier: strings only, no sympy.

Everything here runs in the trainer's process on every completion, so it is linear in the completion's
length (1 MB adversarial inputs take milliseconds) and never parses LaTeX; rlvr.verifiers.math_worker does
that in a separate process with a time budget.

Decisions (each one a line; the tests in tests/test_math_attacks.py and tests/test_verifiers.py pin them):
- Thinking does not count: text before the last `</think>` is reasoning (this also covers chat templates
  that prefill `<think>`, trl#6966), and an unclosed `<think>` makes everything after it reasoning.
- The final answer, by precedence: the last complete `<answer>...</answer>` (inside it: its last box, else its
  'Answer:' line, else its whole text) > the last complete `\\boxed{}`/`\\fbox{}` > the last 'Answer:' /
  'answer is' > the last '####' > (mode last_number) the last number. A box whose braces never close is not
  an answer: `\\boxed{\\frac{1}{2}` never reads as 1/2; one still open MAX_ANSWER_CHARS into its content
  is an over-long answer (unparseable), which keeps the brace scan bounded on 1 MB of braces.
- One answer only ("hedged: several answers"): the final answer may not offer alternatives ('or', 'either',
  'and/or'), may not be a list of different values when the reference is one value, may not follow another
  different answer of its kind with only connectives between them (`\\boxed{3} \\boxed{4}`, 'Answer: 3' on
  one line and 'Answer: 4' on the next), and the completion may not state more than MAX_DISTINCT_ANSWERS
  different answers of that kind in all (answer spam; one or two self-corrections stay allowed).
- Malformed LaTeX (checked in rlvr.verifiers.math.brace_problem): an answer whose `{` `}` do not balance
  (`\\frac12}`, `\\frac{1}{2`) is unparseable, though math-verify reads both as 1/2: a reward for it would
  teach the model broken LaTeX. `\\frac12` itself is valid LaTeX and reads as 1/2.
- Plain numbers are compared exactly as fractions, never with a tolerance: 0.333 != 1/3, 1e-10 != 0,
  0.0001 != 0.0002, 3.1416 != 3.14. Scientific notation (1e-10) is a plain number here (math-verify reads
  '1e-10' as e - 10). A percent 'X%' reads as X/100 or as X (50% == 0.5 == 1/2 and 50% == 50, but 50 != 0.5).
  Trailing units (`\\text{ cm}`, `^\\circ`, `\\$`) are dropped from a number. A decimal reference is matched
  exactly too: 3.1416 and \\pi are both wrong for 3.14 (a question that wants rounding states the precision,
  and its reference is the rounded value); a decimal answer to an exact reference (3.14 for \\pi, 0.333 for
  1/3) is wrong (tolerance bait).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

MAX_ANSWER_CHARS = 2000  # longer extracted answers are not sent to sympy (parse time grows with length)
MAX_DISTINCT_ANSWERS = 3  # more different final answers of one kind than this is answer spam
_MAX_MARKS = 4096  # 'Answer:' / '####' markers examined, from the last one back
_RECENT = 64  # candidates materialized per kind: enough to see spam, bounded work on 1 MB inputs
NO_ANSWER = "no final answer found (expected \\boxed{}, 'Answer:' or '####')"
NO_ANSWER_OR_NUMBER = "no final answer found (no \\boxed{}, 'Answer:', '####' or number)"
ONLY_IN_THINK = "final answer only inside <think>...</think>; reasoning does not count"

_BOX_START = re.compile(r"\\(?:boxed|fbox)[ \t]*\{")
_BRACES = re.compile(r"(?<!\\)[{}]")  # \{ and \} are set delimiters, not groups
_BOXED_BARE = re.compile(r"\\(?:boxed|fbox) +([^\s{}$]+)")  # MATH also writes "\boxed 5"
_ANSWER_MARK = re.compile(r"\banswer(?:[ \t]*:|[ \t]+is\b[ \t]*:?)", re.IGNORECASE)
_HASH_MARK = re.compile(r"####")
_MARKER = re.compile(r"####|\\boxed|\\fbox|<answer>")
_MEANINGFUL = re.compile(r"[^\s*$.]")  # a segment without one of these cleans to ""
_NEXT_LINE = re.compile(r"\s*([^\n]*)")  # first non-blank line from a position, without copying the text
# A number in running text: thousands commas, decimals, simple fractions; '-' is a sign only when it
# does not follow a word character (so '3-5' yields 5, not -5). Every branch is linear-time.
_NUMBER_IN_TEXT = re.compile(
    r"(?<![\w.])(?:(?<![\w)])-)?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?|(?<![\w.])-?\.\d+")
_PLAIN_NUMBER = re.compile(
    r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:(?:/\d+)|(?:[eE][-+]?\d{1,3}))?")
_SIMPLE_FRAC = re.compile(r"([-+]?)\\[dt]?frac(?:\{\s*(\d+)\s*\}|(\d))(?:\{\s*(\d+)\s*\}|(\d))")
_PERCENT = re.compile(r"\s*(?:\\%|%|\\text\{\s*\\?%\s*\})$")
# trailing units; never a lone e or i (2\mathrm{i} is a complex number, not 2 of a unit)
_UNIT = re.compile(r"\s*(?:\\(?:text|mbox|mathrm)\{(?!\s*[eEiI]\s*\})[^{}]*\}|\^\s*\{?\s*\\circ\s*\}?|°)\s*$")
_HEDGE_WORDS = re.compile(r"\b(?:or|either)\b", re.IGNORECASE)  # 'and/or' contains 'or'
_AND = re.compile(r"\\text\{\s*and\s*\}|\band\b", re.IGNORECASE)
_GAP_NOISE = re.compile(r"\\(?:quad|qquad|text|mathrm|mbox|[,;! ])|[\s$,;.:!?()\[\]{}*&/\\-]")
_CONNECTIVES = frozenset({"or", "and", "either", "maybe", "perhaps", "possibly", "also", "alternatively"})


@dataclass(frozen=True)
class Candidate:
    text: str  # the answer as written, cleaned of wrappers; capped at MAX_ANSWER_CHARS + 1 characters
    start: int  # span of the whole marked answer in the searched text (marker included)
    end: int


@dataclass(frozen=True)
class FinalAnswer:
    text: str  # the final answer
    kind: str  # "answer_tag" | "boxed" | "answer_line" | "hashes" | "last_number"
    recent: tuple[str, ...]  # the last answers of that kind, final one last (spam check)
    run: tuple[str, ...]  # the final answer and the ones right before it with only connectives between


# ---------------------------------------------------------------- thinking
def strip_thinking(text: str) -> str:
    """The text outside reasoning: after the last `</think>`, before an unclosed `<think>`."""
    close = text.rfind("</think>")
    if close >= 0:
        text = text[close + len("</think>"):]
    open_ = text.find("<think>")
    return text if open_ < 0 else text[:open_]


# ---------------------------------------------------------------- candidates of each kind
def _clean(answer: str) -> str:
    """Strip the wrapping models put around a final answer: spaces, **bold**, $..$, \\(..\\), final '.'."""
    previous = None
    answer = answer.strip()
    while answer != previous:
        previous = answer
        for wrapper in ("**", "$", "\\(", "\\)", "\\[", "\\]"):
            answer = answer.removeprefix(wrapper).removesuffix(wrapper).strip()
        if not answer.endswith("\\right."):  # '\\right.' is an invisible delimiter, not a full stop
            answer = answer.removesuffix(".").strip()
    return answer


def _cut(text: str, start: int, end: int) -> str:
    """The cleaned answer in text[start:end]; a longer span than MAX_ANSWER_CHARS comes back uncleaned and
    cut at MAX_ANSWER_CHARS + 1, so it is reported as too long instead of read as a truncated number."""
    if end - start > MAX_ANSWER_CHARS:
        return text[start:start + MAX_ANSWER_CHARS + 1]
    return _clean(text[start:end])


def _box_spans(text: str) -> list[tuple[int, int, int, int, str]]:
    """(start, content start, content end, end, kind) of the last _RECENT boxes, last box last; kind is
    "braced", "bare" (`\\boxed 5`) or "open" (cut at MAX_ANSWER_CHARS).

    Walks the box starts backwards. A box cannot close after a later box start unless that later box closes
    first (it would take the closing brace), so each scan stops at the next start: linear in all. It also
    stops MAX_ANSWER_CHARS into the content; such a box is returned cut there (an over-long answer, never
    checked), so a 1 MB run of braces costs one bounded scan.
    """
    spans: list[tuple[int, int, int, int, str]] = []
    limit = len(text)
    bare = [(m.start(), m.start(1), m.end(1), m.end(), "bare") for m in _BOXED_BARE.finditer(text)]
    for match in reversed(list(_BOX_START.finditer(text))[-_MAX_MARKS:]):
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


def _marked_lines(text: str, mark: re.Pattern) -> list[Candidate]:
    """Answers after a marker: the rest of the line up to the next marker (or, when that is empty, the next
    non-empty line). Walks backwards and stops after _RECENT answers or _MAX_MARKS markers, so 1 MB of
    markers stays cheap (no honest solution writes thousands of empty 'Answer:' markers)."""
    marks = [m.span() for m in mark.finditer(text)][-_MAX_MARKS:]
    found: list[Candidate] = []
    for i in range(len(marks) - 1, -1, -1):
        start, value = marks[i]
        limit = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        newline = text.find("\n", value, limit)  # bounded by the next marker: linear in all
        end = newline if newline >= 0 else limit
        answer = _cut(text, value, end) if _MEANINGFUL.search(text, value, end) else ""
        if not answer and end < limit:
            nxt = _NEXT_LINE.match(text, end, limit)
            answer, end = _cut(text, nxt.start(1), nxt.end(1)), nxt.end(1)
        if answer:
            found.append(Candidate(answer, start, end))
            if len(found) == _RECENT:
                break
    return found[::-1]


def _answer_tags(text: str) -> list[Candidate]:
    found, pos = [], 0
    while (start := text.find("<answer>", pos)) >= 0:
        close = text.find("</answer>", start + len("<answer>"))
        if close < 0:
            break
        found.append((start, close))
        pos = close + len("</answer>")
    candidates = []
    for start, close in found[-_RECENT:]:
        inner = text[start + len("<answer>"):close]
        final = _final(inner, "strict", tags=False)
        answer = final.text if final is not None else _cut(inner, 0, len(inner))
        if answer:
            candidates.append(Candidate(answer, start, close + len("</answer>")))
    return candidates


def last_number(text: str) -> str | None:
    """The last number in the text (ints, decimals, negatives, 3/4, 1,234), or None."""
    last = None
    for last in _NUMBER_IN_TEXT.finditer(text):
        pass
    return last.group(0) if last else None


# ---------------------------------------------------------------- the final answer
def _connective(gap: str) -> bool:
    """True when two answers are separated by nothing but punctuation, spacing and words like 'or'."""
    return len(gap) <= 200 and all(w.lower() in _CONNECTIVES for w in _GAP_NOISE.sub(" ", gap).split())


def _adjacent(text: str, first: Candidate, second: Candidate, delimited: bool) -> bool:
    """Whether `second` directly follows `first` as an alternative. An 'Answer:' value runs to the end of its
    line, so it must itself be one chunk plus connectives ('3', '3 or'), not '5. Hmm, 3 + 4 is 7'."""
    if first.end > second.start or not _connective(text[first.end:second.start]):
        return False
    return delimited or _connective(" ".join(first.text.split()[1:]))


def _final(text: str, mode: str, tags: bool = True) -> FinalAnswer | None:
    kinds = [("answer_tag", _answer_tags)] if tags else []
    kinds += [("boxed", _boxed), ("answer_line", lambda t: _marked_lines(t, _ANSWER_MARK)),
              ("hashes", lambda t: _marked_lines(t, _HASH_MARK))]
    for kind, find in kinds:
        candidates = find(text)
        if candidates:
            run = [candidates[-1]]
            for previous in reversed(candidates[:-1]):
                if not _adjacent(text, previous, run[-1], delimited=kind in ("answer_tag", "boxed")):
                    break
                run.append(previous)
            return FinalAnswer(candidates[-1].text, kind, tuple(c.text for c in candidates),
                               tuple(c.text for c in reversed(run)))
    number = last_number(text) if mode == "last_number" else None
    return None if number is None else FinalAnswer(number, "last_number", (number,), (number,))


def final_answer(completion: str, mode: Literal["strict", "last_number"] = "strict") -> FinalAnswer | None:
    """The final answer of a completion, reasoning excluded (see the module docstring for precedence)."""
    return _final(strip_thinking(completion), mode)


def extract_answer(text: str, mode: Literal["strict", "last_number"] = "strict") -> str | None:
    found = final_answer(text, mode)
    return None if found is None else found.text


def extract_reference(reference: str) -> str | None:
    """The gold answer: marked the same way as completions, else the whole (plain) reference text."""
    found = _final(reference, "strict")
    if found is None and _MARKER.search(reference):  # '#### ' or '\\boxed{' with nothing readable after it
        return None
    answer = found.text if found is not None else _clean(reference)
    return answer or None


# ---------------------------------------------------------------- numbers
def _strip_units(text: str) -> str:
    previous = None
    while previous != text:
        previous, text = text, _UNIT.sub("", text)
    return text


def as_number(answer: str) -> Fraction | None:
    """Exact value of a plain number ('1,234', '-7.0', '.5', '3/4', '1e-10', '\\frac{1}{2}', '\\$5', '50%'
    as 1/2), or None for anything else. Exponents are capped at 3 digits, so '1e999999' is no number."""
    readings = number_readings(answer)
    return min(readings) if len(readings) == 1 else (_percent_value(answer) if readings else None)


def _percent_value(answer: str) -> Fraction | None:
    body = _PERCENT.sub("", answer.strip())
    value = _plain_value(body) if body != answer.strip() else None
    return None if value is None else value / 100


def _plain_value(text: str) -> Fraction | None:
    text = _strip_units(text.strip().replace("\u2212", "-").replace("{,}", ","))
    text = text.removeprefix("\\$").removeprefix("$").strip()
    text = text.removesuffix(".") if not text.endswith("..") else text
    frac = _SIMPLE_FRAC.fullmatch(text)
    if frac:
        sign, num, den = frac.group(1), frac.group(2) or frac.group(3), frac.group(4) or frac.group(5)
        return None if int(den) == 0 else Fraction(int(num), int(den)) * (-1 if sign == "-" else 1)
    if not _PLAIN_NUMBER.fullmatch(text):
        return None
    try:
        return Fraction(text.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


def number_readings(answer: str) -> frozenset[Fraction]:
    """Every value a plain number may mean: one, or two for a percent (X% is X/100, or X with '%' as a unit)."""
    percent = _percent_value(answer)
    if percent is not None:
        return frozenset({percent, percent * 100})
    value = _plain_value(answer)
    return frozenset() if value is None else frozenset({value})


def canonical(answer: str) -> str:
    """What math-verify is sent: a plain number as an exact fraction (percents as X/100), else the LaTeX with
    `\\mathrm{e}` as e and `\\mathrm{i}` as i (math-verify kept only a truncated string for
    `1 - \\frac{1}{\\mathrm{e}}`)."""
    value = as_number(answer)
    if value is not None:
        return str(value)
    return " ".join(re.sub(r"\\(?:mathrm|operatorname|text)\{\s*([ei])\s*\}", r"\1", answer).split())


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


def hedge_problem(final: FinalAnswer, gold: str) -> str | None:
    """Why `final` offers several answers where the reference has one; None when it commits to one."""
    several = f"hedged: several answers ({_short(final.text)})"
    if final.kind == "last_number":
        return None
    if _HEDGE_WORDS.search(final.text) and not _HEDGE_WORDS.search(gold):
        return several
    if len(top_level_items(gold)) == 1:
        items = top_level_items(final.text)
        if len({_value_key(item) for item in items}) > 1 and not _named_values(items):
            return several
        if len({_value_key(answer) for answer in final.run}) > 1:
            return f"hedged: several answers ({', '.join(_short(a, 20) for a in final.run[-3:])})"
    distinct = len({_value_key(answer) for answer in final.recent})
    if distinct > MAX_DISTINCT_ANSWERS:
        return f"hedged: several answers ({distinct} different final answers; answer spam)"
    return None


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
