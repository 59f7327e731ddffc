"""One answer or several: the hedging and answer-spam checks of the math verifier, on strings (no sympy).

Decisions (tests/test_math_attacks.py, tests/test_math_statements.py; the final answer itself is chosen in
rlvr.verifiers.math.extract):
- A hedge is several candidates in one answer statement: alternatives ('or', 'either', 'and/or', `\\lor`,
  `\\vee`), a list of different values when the reference is one value, or statements with only connectives
  between them (`\\boxed{3} \\boxed{4}`). An earlier, separate statement is a correction, not a hedge.
- Values joined by other connectives are several values too, never the last side: a top-level
  `\\\\` line break, numbers side by side ('12 3': math-verify read them as one product or sum), and `\\quad`
  `\\qquad` `\\land` `\\wedge` `\\&` `\\mid` `\\sim` `\\setminus` between plain values or assignments
  (`3 \\quad 4`, `x=3 \\wedge x=4`; `5 \\quad \\text{cm}` is 5 with a unit, and between sets
  `\\mathbb{R} \\setminus \\{0\\}` stays one set). A mixed number ('5 1/2', '2 and
  3/4') is one value (rlvr.verifiers.math.words). Also `\\cr`, `\\newline` always, and
  `\\hspace{..}`, `\\enspace`, `\\>`, `~`, `|`, `\\vert`, `\\parallel`, `\\cup`, `\\cap`, `\\dots` between plain
  values; the rows of a `cases` or `aligned` environment are values (a matrix's rows stay one value). Also
  `∨` always, and `∪` `∩` `∧`, glue of any name (`\\kern1em`, `\\mathstrut`: rlvr.verifiers.math.gaps)
  and bars with nothing between them (`3 || 4`, `| 3 | 4 |`, `3 \\mid\\mid 4`) between plain values. Several
  statements joined by 'or' are a hedge whatever the reference ('\\boxed{1, 2} or \\boxed{1, 3}').
- A bare list answers a tuple reference of its length, in its order: `\\boxed{2, 1}` is the pair `(2, 1)`, and
  wrong for `(1, 2)`.
- Answer spam: more than MAX_DISTINCT_ANSWERS different values among the completion's answer declarations
  ('Answer:', 'the answer is', '####', <answer>, and boxes inside those) and its final statement. A box elsewhere
  is a step's result: a solution may box each step and then the result, and only the last statement
  is ever paid, so boxes before it earn nothing.
"""
from __future__ import annotations

import re
from functools import lru_cache

from rlvr.verifiers.math.gaps import GLUE
from rlvr.verifiers.math.numbers import as_number

MAX_DISTINCT_ANSWERS = 3  # more different declared answers than this is answer spam
# 'and/or' has 'or'; 'alt.', 'vs' offer a second value too ('Answer: 5 (alt. 6)' paid 6)
_HEDGE_WORDS = re.compile(r"\b(?:or|either|alt|alternatively|alternative|vs|versus)\b|\\(?:lor|vee)(?![A-Za-z])",
                          re.IGNORECASE)
_AND = re.compile(r"\\text\{\s*and\s*\}|\band\b", re.IGNORECASE)
_OR = re.compile(r"\\text\{\s*or\s*\}|(?<![A-Za-z])or(?![A-Za-z])")
_SET = re.compile(r"\\left\\\{(.*)\\right\\\}|\\\{(.*)\\\}|\{(.*)\}", re.DOTALL)
# Top-level separators of an answer. Group 1: always a separator; group 2: only between plain values.
_JOINS = re.compile(r"(\\\\|\\(?:lor|vee|cr|newline)(?![A-Za-z])|∨)"
                    r"|(\\(?:land|wedge|mid|sim|setminus|q?quad|enspace|enskip|emsp|thinspace|hfill|cup|cap"
                    r"|[lr]?[vV]ert|parallel|[lcv]?dots[bc]?)(?![A-Za-z])|\\[&>]|\\hspace\*?\{[^{}]*\}"
                    r"|\\phantom\{[^{}]*\}"
                    r"|\\(?:text|mbox|hbox)\{\s*\}|\||(?<!\\)&|[∪∩∧]|(?i:" + GLUE.pattern + "))")
# spacing, bars, unions, dots, and a bare '&' outside a matrix ('\\boxed{3 & 4}' is two values);
# Unicode unions and glue of any name
# an environment whose rows are several values: '\\begin{cases} 3 \\\\ 4 \\end{cases}'
_ROWS = re.compile(r"\s*\\begin\{(cases|aligned|align\*?|gathered|gather\*?|split|eqnarray\*?|multline\*?)\}"
                   r"(.*)\\end\{\1\}\s*", re.DOTALL)
_ENVIRONMENT = re.compile(r"\\(begin|end)\s*\{")
_EDGES = re.compile(r"\A(?:\s|~|\\[,;:! ])+|(?:\s|~|\\[,;:! ])+\Z")  # spacing around a side: '3\\ \\&\\ 4'

_SPACES = re.compile(r"(?:\s|~|\\[,;: ])+")
_TUPLE = re.compile(r"(?:\\left\s*)?\((.*?)(?:\\right\s*)?\)", re.DOTALL)
_ASSIGNED = re.compile(r"\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(.+)", re.DOTALL)
_VALUE_KEY_SPACE = re.compile(r"\s+")


@lru_cache(maxsize=256)  # hedge_problem keys the same answers up to three times; 1 MB of hedges costs 3x without
def _value_key(answer: str) -> str:
    value = as_number(answer)
    return f"={value}" if value is not None else _VALUE_KEY_SPACE.sub("", answer)


def _split_at(answer: str, cuts: list[tuple[int, int]]) -> list[str]:
    parts, start = [], 0
    for begin, end in cuts:
        parts.append(answer[start:begin])
        start = end
    return parts + [answer[start:]]


def _joined_values(item: str) -> list[str]:
    """`item` split at its top-level connectives (see the module docstring); [item] when it has none."""
    rows = _ROWS.fullmatch(item)
    if rows:
        item = rows.group(2).replace("&", "")
    strong, weak, depth, env = [], [], 0, 0
    marks = [(m.start(), m.end(), m) for m in _JOINS.finditer(item)] + \
            [(m.start(), m.end(), m) for m in _ENVIRONMENT.finditer(item)]
    brackets = [(i, ch) for i, ch in enumerate(item) if ch in "([{)]}"]
    events = sorted([(s, e, m) for s, e, m in marks] + [(i, i + 1, ch) for i, ch in brackets], key=lambda x: x[0])
    for start, end, what in events:
        if isinstance(what, str):
            depth += 1 if what in "([{" else -1
        elif what.re is _ENVIRONMENT:
            env += 1 if what.group(1) == "begin" else -1
        elif depth == 0 and env == 0:
            (strong if what.group(1) else weak).append((start, end))
    parts = [p.strip() for p in _split_at(item, strong) if p.strip()] if strong else [item.strip()]
    if weak and not strong:  # empty sides are the bars of '| 3 | 4 |' or '3 || 4'
        sides = [side for side in (_EDGES.sub("", p) for p in _split_at(item, weak)) if side]
        if len(sides) > 1 and all(_plain_side(side) for side in sides):
            parts = sides
    return [piece for part in parts for piece in _side_by_side(part)]


def _plain_side(side: str) -> bool:
    """A plain value ('3') or a variable set to one ('x = 3', 'x_1 = 3'): what a connective cannot join into one."""
    assigned = _ASSIGNED.fullmatch(side)
    return as_number(assigned.group(1) if assigned else side) is not None


def _side_by_side(part: str) -> list[str]:
    """'12 3' -> ['12', '3']: plain numbers separated by spaces only; one number ('1 000', '5 1/2') stays whole."""
    pieces = [p for p in _SPACES.split(part) if p]
    if len(pieces) > 1 and as_number(part) is None and all(as_number(p) is not None for p in pieces):
        return pieces
    return [part]


def top_level_items(answer: str) -> list[str]:
    """`answer` split at commas, semicolons and 'and' outside brackets: '3, 4' -> 2 items, '(0,1]' -> 1; and at the
    connectives of _joined_values."""
    if as_number(answer) is not None:  # '1,234' and '2 and 3/4' are one number
        return [answer]
    items, depth, start, text = [], 0, 0, _AND.sub(",", answer)
    for i, ch in enumerate(text):
        if ch in ",;" and i and text[i - 1] == "\\":  # '\\,' '\\;' are spacing ('12\\,\\text{cm}')
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in ",;" and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [piece for item in items if item.strip() for piece in _joined_values(item)]


def _named_values(items: list[str]) -> bool:
    """'x = 3, y = 4' names one value per variable: a tuple written out, not alternatives."""
    names = [re.match(r"\s*([A-Za-z]\w*)\s*=", item) for item in items]
    return all(names) and len({name.group(1) for name in names}) == len(items)


def gold_items(gold: str) -> list[str]:
    """The values a reference lists: its top-level items, inside one outer set brace ('\\{1, 2\\}' -> 2); a
    reference's alternatives are its values too ('(11,7) or (7,11)' -> 2)."""
    gold = _OR.sub(",", gold)
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


def tuple_length(gold: str) -> int:
    """How many values the reference's one parenthesized tuple holds ('(2, 1)' -> 2); 0 when it is not one."""
    match = _TUPLE.fullmatch(gold.strip())
    if match is None or not brace_free(match.group(1)) or "(" in match.group(1) or ")" in match.group(1):
        return 0
    items = top_level_items(match.group(1))
    return len(items) if len(items) > 1 else 0


def _bare_tuple(answer: str, gold: str) -> bool:
    """Whether `answer` is a bare list ('2, 1') of as many values as the reference's tuple."""
    length = tuple_length(gold)
    return bool(length) and answer.strip()[:1] not in "([{\\" and "=" not in answer \
        and len(top_level_items(answer)) == length and not _HEDGE_WORDS.search(answer)


def _joined(final, gold: str) -> tuple[str, ...]:
    """The answers that are one list answer when the reference lists several values: a listed run, or the boxes of
    the final line joined by a comma or 'and'; () when the final answer stands alone."""
    if len(gold_items(gold)) < 2:
        return ()
    return final.run if final.listed else final.line if len(final.line) > 1 else ()


def answer_text(final, gold: str) -> str:
    """What is compared: the final answer, the answers of a list joined when the reference lists several values,
    or a bare list in brackets when the reference is a tuple of its length ('2, 1' -> '(2, 1)')."""
    joined = _joined(final, gold)
    if joined:
        return ", ".join(joined)
    return f"({final.text})" if _bare_tuple(final.text, gold) else final.text


def hedge_problem(final, gold: str) -> str | None:
    """Why `final` (an rlvr.verifiers.math.extract.FinalAnswer) offers several answers where the reference has
    one; None when it commits to one."""
    several = f"hedged: several answers ({_short(final.text)})"
    if _HEDGE_WORDS.search(final.text) and not _HEDGE_WORDS.search(gold):
        return several
    alternatives = len({_value_key(answer) for answer in final.run}) > 1 and not final.listed  # '\\boxed{1, 2} or
    if alternatives and (len(gold_items(gold)) > 1 or final.kind == "last_number"):  # \\boxed{1, 3}'
        return f"hedged: several answers ({', '.join(_short(a, 20) for a in final.run[-3:])})"
    if len(gold_items(gold)) == 1 and not _bare_tuple(final.text, gold):
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
