"""The `latex` answer mode: the final answer found the way math-verify finds it, on strings, in linear time.

math-verify's `parse` (LatexExtractionConfig + ExprExtractionConfig) takes a boxed answer first, then a
LaTeX environment after 'answer' / 'final answer is', then the last of: a LaTeX environment ($..$, $$..$$,
\\(..\\), \\[..\\]), a bare \\frac of numbers, or a plain number (one priority level, rightmost wins). It is not
called here, only mirrored: it imports sympy (the trainer process must not: tests/test_verifiers.py
test_package_import_is_cheap), and its lazy DOTALL patterns backtrack (parse("\\\\(" * 20000) took 63 s in
our probe of math-verify 0.9). The scanners below are single passes; the worker still uses math-verify's
parser and normalization for the comparison (rlvr.verifiers.math.worker).

Decisions (tests/test_math_latex_mode.py; precedence in rlvr.verifiers.math.extract):
- An 'Answer:' / 'answer is' / '####' line is read as math-verify reads it: its first LaTeX environment and
  the environments chained to it by ',', 'and', 'or' (kept in the text, so 'or' still reads as a hedge);
  without one, its text minus leading and trailing prose words ('42 apples.' -> '42'), except words that
  change the value or hedge ('minus', 'thousand', 'or', 'at least', ...: _KEEP); before the number only fillers
  and a subject with a copula go (rlvr.verifiers.math.prose). A digit after the first
  environments makes the whole line the answer, never its first value. A line whose environments
  only name the asked variable reads the value stated after them: 'the largest $n$ is 34.' -> '34'
  (stated_value), unless a later environment may overrule it.
- `$` pairs only on one line; a `$` right before a digit whose partner follows a space or precedes a digit is
  a currency sign ('$5 and $10'), not a delimiter; `\\$` is a dollar sign. A percent right after an
  environment belongs to it ('$28$\\%').
- The last level reads a function's value at numbers ('$f(f(2)) = 26$') as that value (last_side), as
  math-verify does, and so a formula set to a number right after 'is' ('the sum of the roots is
  $-\\frac{b}{a} = -5$'); equations in unknowns ('So $2x + 3 = 7$' is not 7, in mode last_number too:
  solves_nothing) and identities go to the worker's guard 3.
- Numbers and bare fractions outside environments are guarded as in last_number (rlvr.verifiers.math.numbers):
  when the rightmost thing is a number inside a larger expression, there is no answer.
"""
from __future__ import annotations

import bisect
import re
from collections import deque
from typing import NamedTuple

from rlvr.verifiers.math.gaps import joined, spaced
from rlvr.verifiers.math.numbers import NUMBER_IN_TEXT, as_number, brace_depths, in_expression, last_digit
from rlvr.verifiers.math.prose import keeps_value, lead_end
from rlvr.verifiers.math.words import DOTS, value_word

RECENT = 64  # candidates kept from the end of the text (enough to see a run of alternatives)
_DELIMITERS = re.compile(r"\\\\|\\\$|\$\$|\$|\\\[|\\\]|\\\(|\\\)")
_CLOSE = {"$$": "$$", "$": "$", "\\[": "\\]", "\\(": "\\)"}
_ONE_LINE = ("$", "\\(")  # math-verify's inline environments do not span lines
_PERCENT_AFTER = re.compile(r"\s*(?:\\%|%|percent\b)")
_BARE = re.compile(  # a fraction or root written outside $..$: '\\frac{1}{3}', '2\\sqrt3' (one brace level)
    r"(?<![\\\w])-?(?:\d+\s*)?\\(?:[dtc]?frac(?:\{[^{}$\n]{1,200}\}|\d){2}|sqrt(?:\{[^{}$\n]{1,200}\}|\d+))")
# between two answers: spacing, punctuation, and a variable named again ('$x = \\boxed{3}$ or $x = \\boxed{4}$'); line
# breaks, a bar and an empty box ('\\boxed{4}|\\boxed{5}', '\\boxed{4} \\boxed{} \\boxed{5}')
_GAP_NOISE = re.compile(r"\\(?:[hv]space\*?|[hv]?phantom)\s*\{[^{}]*\}|\\(?:[hv]fill?|enspace|enskip|[smb][a-z]+skip"
                        r"|noindent|par)(?![A-Za-z])"  # spacing between two boxes joins them
                        r"|\\(?:quad|qquad|text|mathrm|mbox|[,;! ]|(?:newline|linebreak|hline|cr)(?![A-Za-z]))"
                        r"|\\(?:boxed|fbox)\s*\{\s*\}|\||(?<![\w\\])[A-Za-z](?:_\{?\w+\}?)?\s*="
                        r"|[\s$,;.:!?()\[\]{}*&/\\-]")  # 'y_2 =' names a variable too
_CONNECTIVES = frozenset({"or", "and", "either", "maybe", "perhaps", "possibly", "also", "alternatively",
                          "to", "but", "vs", "versus", "otherwise", "though", "although", "else",
                          "between", "respectively"})
_EQUALS_OR_BRACE = re.compile(r"[{}=]")
_DIGIT = re.compile(r"\d")
_APPLICATION = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?\s*\(.*\)")  # f(2), g_1(f(3))
_COMMAND = re.compile(r"\\[A-Za-z]+")
_FREE = re.compile(r"[A-Za-z](?!\s*\()")
_PROSE = re.compile(r"(?:[A-Z]?[a-z]{2,}|[A-Z][a-z]|I)[.,:;!?]*")  # a word, never a variable like 'x'
_NAMED = re.compile(r"\b(?:is|are|was|equals|becomes)\s*$")  # 'the number of diagonals is $..$'
_EQUATION_WORD = re.compile(r"\b(?:equations?|inequalit(?:y|ies)|system|conditions?|constraints?|identity)\b[^.$]*$",
                            re.IGNORECASE)
_SUBJECT = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?\s*=?")  # what a question asks for: $n$, $a_5$, $x =$
# also a named object or a function's value: 'the volume of $ABCDEFGH$ is 120', 'the domain of $f(x)$ is 19'
_NAMED_SUBJECT = re.compile(r"(?:[A-Za-z]+(?:_\{?\w+\}?)?|[A-Za-z]\s*\(\s*\w+\s*\))\s*=?")
_STATED = re.compile(r"\s*(?:(?:is|was|equals)(?![\w'])|=|:)\s*")
_KEEP = frozenset({  # prose words that change the value or hedge: never trimmed from an answer
    "or", "and", "either", "neither", "nor", "maybe", "perhaps", "possibly", "not", "no", "minus", "negative",
    "plus", "times", "over", "under", "above", "below", "less", "more", "fewer", "least", "most", "than", "at",
    "almost", "between", "from", "to", "hundred", "thousand", "million", "billion", "trillion", "dozen", "half",
    "halves", "third", "thirds", "quarter", "quarters", "squared", "cubed", "factorial", "percent", "pct", "pi",
    "root", "roots", "power", "ago", "before", "after", "except", "all", "both", "each",
    "about", "approximately", "approx", "around", "roughly", "nearly", "circa"})  # an estimate is no exact answer


class Span(NamedTuple):
    start: int  # the whole environment or number, delimiters included
    end: int
    text: str  # the content, cleaned


def clean(answer: str) -> str:
    """Strip the wrapping models put around a final answer: spaces, **bold**, $..$, \\(..\\), final '.'. Runs of
    wrappers other than '$' go at once, and after MAX_PASSES passes what is left stays as it is (one
    wrapper per pass, searching the whole answer again each time, was quadratic: 64 answers of 2000 characters of
    '**' took 7 s)."""
    if _PRICE.fullmatch(answer):  # a reference '$5' keeps its currency: '£5' does not answer it
        return "\\$" + answer.strip()[1:].strip().rstrip(".")
    start, end = 0, len(answer)
    dollars = answer.count("$")
    dots = DOTS.search(answer) is not None  # '0.333...': its dots are no full stop (they make it 1/3)
    for _ in range(MAX_PASSES):
        before = start, end
        start, end = _runs(answer, start, end)
        for wrapper in _WRAPPERS:
            sign = _dollar_sign(answer, start, end, dollars)  # '18\\$', '2,74 $': after the number, no delimiter
            start += len(wrapper) if answer.startswith(wrapper, start, end) else 0
            end -= len(wrapper) if not sign and answer.endswith(wrapper, start, end) else 0
            start, end = _runs(answer, start, end, wrappers=False)
        if not answer.endswith("\\right.", start, end) and not dots and answer.endswith(".", start, end):
            end -= 1  # '\\right.' is no full stop either
        if end - start > 2 and answer[start] == answer[end - 1] and answer[start] in _EMPHASIS:
            start, end = start + 1, end - 1  # markdown '*42*', '_42_', '`42`'
        if (start, end) == before:
            break
    return answer[start:end].strip()


_PRICE = re.compile(r"\s*\$\s*\d{1,12}(?:,\d{3}){0,4}(?:\.\d{1,6})?\.?\s*")  # one '$' before a number: a price
MAX_PASSES = 16  # layers of '$' unwrapped at most (no honest answer has 3)
_WRAPPERS = ("**", "__", "$", "\\(", "\\)", "\\[", "\\]")  # '__' is bold too: '__Answer:__ 42'
_PAIRS = ("**", "__", "\\(", "\\)", "\\[", "\\]")  # the wrappers of two characters without a '$'
_EMPHASIS = "*_`"  # one on each end: italic or code, never a value's own ('z^*' has none before it)


def _runs(text: str, start: int, end: int, wrappers: bool = True) -> tuple[int, int]:
    """text[start:end] without spaces and (`wrappers`) runs of the '$'-free wrappers at its ends (no '$' count changes:
    _dollar_sign). Matched in C, the tail reversed: a loop per pair cost 0.1 s on 64 x 2000 '**'."""
    lead, trail = (_LEAD_RUN, _TRAIL_RUN) if wrappers else (_SPACES, _SPACES)
    start = lead.match(text, start, end).end()
    if end > start and not text[end - 1].isspace() and not (wrappers and text.endswith(_PAIRS, start, end)):
        return start, end  # nothing trails: no reversed copy
    return start, end - trail.match(text[start:end][::-1]).end()


_LEAD_RUN = re.compile(r"(?:\s|\*\*|__|\\\(|\\\)|\\\[|\\\])*")  # whitespace and _PAIRS, first choice first
_TRAIL_RUN = re.compile(r"(?:\s|\*\*|__|\(\\|\)\\|\[\\|\]\\)*")  # the same, each pair reversed
_SPACES = re.compile(r"\s*")


def _dollar_sign(text: str, start: int, end: int, dollars: int) -> bool:
    """Whether text[start:end] ends with a dollar sign written after its number: '18\\$', or its only '$' right after
    a digit and spaces ('2,74 $'). `dollars`: the number of '$' in `text`, so that only the cut
    ends are counted again (clean cuts a few characters a pass: counting the middle each time was quadratic)."""
    if text.endswith("\\$", start, end):
        return True
    if end <= start or text[end - 1] != "$":
        return False
    if dollars - text.count("$", 0, start) - text.count("$", end) != 1:  # one '$' in text[start:end]
        return False
    before = text[max(start, end - 200):end - 1].rstrip()  # '5 $': spaces between; 200 bound the work per pass
    return before[-1:].isdigit()


def connective(gap: str, statements: bool = False) -> bool:
    """True when two answers are separated by nothing but punctuation, spacing (any glue)
    and words like 'or'; between two `statements`, relations, operators and case labels join them too
    (rlvr.verifiers.math.gaps), which between two numbers in running text make arithmetic ('2 + 3 = 5'), and so does
    any gap without a word of prose (markup_only)."""
    if statements and len(gap) <= 200 and markup_only(joined(gap)):
        return True
    gap = joined(gap) if statements else spaced(gap)
    return len(gap) <= 200 and all(w.lower() in _CONNECTIVES for w in _GAP_NOISE.sub(" ", gap).split())


# Between two statements, markup of any name joins them as a space does, since no list of it is
# complete ('\\color{red}', '\\label{x}', '\\tag{1}', a '%' comment, a zero-width space, '…', ' — ', an emoji,
# '\\sqcup'). What is left after dropping commands with their arguments (the words of a text group stay: they are
# prose), symbols, punctuation and lone letters ('a.k.a.', 'i.e.') must be connectives or words that restate. A mark
# that strikes out the first ('✗', '❌') is a correction, never glue.
_COMMENT = re.compile(r"(?<!\\)%[^\n]{0,200}(?:\n|\Z)")
_MARKUP = re.compile(r"\\([A-Za-z]+)\*?((?:\s*(?:\{[^{}]{0,80}\}|\[[^\[\]]{0,40}\])){0,3})")
_TEXTUAL = frozenset({"text", "textrm", "textbf", "textit", "textsf", "texttt", "textnormal", "textup", "mbox", "hbox",
                      "emph", "mathrm", "mathbf", "mathit", "mathsf", "operatorname", "textsc", "underline"})
_ARGUMENT_TEXT = re.compile(r"[{}\[\]]")
_WORD_RUN = re.compile(r"[^\W_]+")
_STRIKES = re.compile(r"[✗✘❌✖❎🚫]|~~")
_RESTATING = frozenset({"aka", "ie", "equivalently", "namely", "viz"})
_RESTATING_PHRASE = re.compile(r"\b(?:that\s+is|also\s+known\s+as|known\s+as|in\s+other\s+words)\b", re.IGNORECASE)


def _argument(match: re.Match) -> str:
    return f" {_ARGUMENT_TEXT.sub(' ', match.group(2))} " if match.group(1) in _TEXTUAL else " "


def markup_only(gap: str) -> bool:
    """Whether `gap` between two statements holds no word of prose (see above): markup, symbols, punctuation, lone
    letters, connectives and restating words only."""
    if _STRIKES.search(gap):
        return False
    words = _WORD_RUN.findall(_RESTATING_PHRASE.sub(" ", _MARKUP.sub(_argument, _COMMENT.sub(" ", gap))))
    return all(len(w) == 1 and w.isalpha() or w.lower() in _CONNECTIVES or w.lower() in _RESTATING for w in words)


def list_gap(gap: str) -> bool:
    """True when two answers are items of one list: only punctuation, spacing and 'and' between them."""
    return len(gap) <= 200 and all(w.lower() == "and" for w in _GAP_NOISE.sub(" ", spaced(gap)).split())


def last_side(answer: str, before: str = "") -> str:
    """'f(f(2)) = 26' -> '26': a function's value at numbers, stated in running text, names that value as
    'x = 26' does (math-verify reads the last side too: get_last_eq). The worker cannot check it (f is
    unknown) and guard 3 of rlvr.verifiers.math.worker would refuse it, so it is cut here. So is a formula
    set equal to a number right after 'is' (`before`, the text before the environment): 'the sum of the
    roots is $-\\frac{b}{a} = -5$' states -5 (the formula names the quantity), unless that text calls it
    an equation. Nothing else is: 'So $2x + 3 = 7$' stays an equation (not 7), '5 = 7' a false identity,
    '2 \\cdot 81 = 162' a true one that the worker checks; boxes and 'Answer:' lines are never cut."""
    sides = split_equals(answer)
    if len(sides) == 2 and _free_variable(sides[0]) and as_number(sides[1]) is not None \
            and _NAMED.search(before) and not _EQUATION_WORD.search(before):
        return sides[1].strip()
    if len(sides) < 2 or not _APPLICATION.fullmatch(sides[0].strip()) or _free_variable(sides[0]):
        return answer
    return answer if _free_variable(sides[-1]) else sides[-1].strip()


def split_equals(answer: str) -> list[str]:
    """`answer` split at its top-level '=' (not '<=', '\\neq', nor one whose next brace closes a group). One pass
    from the end (a lookahead per '=' was quadratic, 16,000 '=' took 0.7 s)."""
    cuts, closing = [], False  # closing: the next brace to the right is a '}'
    for token in reversed(list(_EQUALS_OR_BRACE.finditer(answer))):
        at = token.start()
        if token.group() != "=":
            closing = token.group() == "}"
        elif not closing and (at == 0 or answer[at - 1] not in "<>!\\"):
            cuts.append(at)
    sides, start = [], 0
    for at in reversed(cuts):
        sides.append(answer[start:at])
        start = at + 1
    return sides + [answer[start:]]


def solves_nothing(text: str) -> bool:
    """Whether the last number of `text` is the side of an equation in unknowns in its last environment
    ('So $2x + 3 = 7$.'): mode last_number then has no answer, as mode latex refuses it (guard 3 of
    rlvr.verifiers.math.worker). Assignments, identities and what last_side cuts stay values."""
    envs = latex_envs(text)
    if not envs or not envs[-1].start <= last_digit(text) < envs[-1].end:
        return False
    env = envs[-1]
    sides = split_equals(env.text)
    return (len(sides) >= 2 and last_side(env.text, text[max(0, env.start - 80):env.start]) == env.text
            and not _SUBJECT.fullmatch(sides[0].strip()) and any(_free_variable(side) for side in sides[:-1]))


def _free_variable(side: str) -> bool:
    """Whether `side` has a letter outside commands that is not a function name ('f(2)')."""
    return _FREE.search(_COMMAND.sub(" ", side)) is not None


def _currency(text: str, opened: int, closing: int) -> bool:
    """'$5 and $10': the first `$` is a price, not an opening delimiter (see the module docstring). '$12 $ and $13 $'
    delimits two numbers: what the `$` pair holds is one number, and no digit follows."""
    price = text[opened + 1:opened + 2].isdigit()
    if text[closing + 1:closing + 2].isdigit():
        return price
    return price and text[closing - 1].isspace() and as_number(text[opened + 1:closing]) is None


def latex_envs(text: str) -> list[Span]:
    """The last RECENT LaTeX environments, in order; one pass over the delimiters."""
    found: deque[Span] = deque(maxlen=RECENT)
    opened, kind, line_end = -1, "", -1  # line_end: the newline after `opened`; found once per line
    for token in _DELIMITERS.finditer(text):
        delimiter, at = token.group(), token.start()
        if delimiter in ("\\\\", "\\$"):
            continue
        if kind in _ONE_LINE and at > line_end:
            kind = ""  # an inline environment never closes on a later line
        if not kind:
            if delimiter in _CLOSE:
                opened, kind = at, delimiter
                if at > line_end:
                    newline = text.find("\n", at)
                    line_end = newline if newline >= 0 else len(text)
            continue
        if delimiter == "$" == kind and _currency(text, opened, at):
            opened = at
        elif delimiter == _CLOSE[kind]:
            content, end = text[opened + len(kind):at], token.end()
            percent = _PERCENT_AFTER.match(text, end)
            if percent:
                content, end = content + "\\%", percent.end()
            found.append(Span(opened, end, content))
            kind = ""
    return [Span(start, end, clean(content)) for start, end, content in found]


def _chain(text: str, envs: list[Span]) -> tuple[str, int]:
    """The first environment and those chained to it by connectives, as one answer: '$3$ or $4$' -> '3 or 4';
    a list joined only by commas and 'and' reads as a list ('1, 2'). With where the chain ends."""
    parts, end = [envs[0].text], envs[0].end
    for previous, env in zip(envs, envs[1:]):
        gap = text[previous.end:env.start]
        if not connective(gap):
            break
        words = [w for w in _GAP_NOISE.sub(" ", gap).split() if w.lower() != "and"]
        parts.append(f"{', ' if not words else ' ' + ' '.join(words) + ' '}{env.text}")
        end = env.end
    return "".join(parts), end


def trim_prose(answer: str) -> str:
    """`answer` without the prose words before and after its number ('The total is 1,234 dollars.' -> '1,234'): before
    it only fillers and a subject ended by a copula, after it no word that changes or hedges it
    (rlvr.verifiers.math.prose); unchanged when what would remain has no digit."""
    words = answer[lead_end(answer):].split()
    end = len(words)
    while end > 0 and _PROSE.fullmatch(words[end - 1]) and not _kept(words[end - 1]):
        end -= 1
    kept = clean(_EXCLAIMED.sub("", " ".join(words[:end]).rstrip(",:;?")).rstrip(",:;?"))
    return kept if re.search(r"\d", kept) else answer


# A '!' right after a number, ')' or '}' is a factorial, as after a box ('\\boxed{3}!'): 'Answer: 42!' reads
# 42! as in modes strict and last_number, never 42. After a word it ends the sentence.
_EXCLAIMED = re.compile(r"(?<![\d)}\]!])!+\Z")


def _kept(word: str) -> bool:
    """A word trim_prose leaves: it changes or hedges the value (_KEEP, plurals too; rlvr.verifiers.math.prose), or
    names a number, a denominator or a magnitude ('five', 'fifths', 'dozens': rlvr.verifiers.math.words)."""
    word = word.lower().strip(".,:;!?")
    return word in _KEEP or word.removesuffix("s") in _KEEP or value_word(word) or not keeps_value(word)


def refine(region: str) -> str:
    """The answer in an 'Answer:' line or an <answer> block (see the module docstring). When a digit follows the first
    environments ('$3$ is what I first got, but really it's 4'), the whole region is the answer."""
    envs = latex_envs(region)
    stated = stated_value(region, envs)
    if stated or not envs:
        return stated or trim_prose(clean(region))
    chained, end = _chain(region, envs)
    return clean(region) if _DIGIT.search(region, end) else chained


def stated_value(region: str, envs: list[Span] | None = None) -> str | None:
    """The value stated after what the question asks for, when the environments before it only name that:
    'the largest $n$ is 34.' -> '34', 'so $x$ = $5$' -> '5' (the answer stated in words after the
    last LaTeX expression; math-verify reads the first environment, $n$). None for any other line."""
    envs = latex_envs(region) if envs is None else envs
    subjects = 1 if envs and _NAMED_SUBJECT.fullmatch(envs[0].text) else 0  # one: 'the largest $n$ is 34 when $k$ =
    if not subjects:  # 5' is not 5
        return None
    last = envs[subjects - 1]
    stated = _STATED.match(region, last.end)
    if stated is None and not last.text.endswith("="):
        return None
    start = stated.end() if stated else last.end
    if subjects < len(envs) and not region[start:envs[subjects].start].strip():  # 'is $34$'
        return _chain(region, envs[subjects:])[0]
    if subjects < len(envs):  # '$n$ is 34. Wait, $n$ is 35': what comes later may overrule it
        return None
    value = trim_prose(clean(region[start:]))
    return value if as_number(value) is not None else None


def latex_level(text: str) -> list[Span]:
    """Candidates of math-verify's last priority level, in order: environments, and outside them bare
    fractions/roots and plain numbers. Empty when the rightmost thing is a number inside a larger expression
    or digits glued to a word: that final answer cannot be read, and an earlier number may be a distractor."""
    envs = latex_envs(text)
    bare = _outside(_BARE, text, envs, [])
    numbers = _outside(NUMBER_IN_TEXT, text, envs, bare)
    outside = sorted(bare + numbers, key=lambda m: m.start())
    spans, blocked = list(envs), -1  # blocked: end of the rightmost guarded-out number or fraction
    for match, in_group in zip(outside, brace_depths(text, [m.start() for m in outside])):
        if in_group or (match.re is NUMBER_IN_TEXT and in_expression(text, match.start(), match.end(), False)):
            blocked = max(blocked, match.end())
        else:
            spans.append(Span(match.start(), match.end(), _number_text(match.group())))
    spans = [Span(s.start, s.end, last_side(s.text, text[max(0, s.start - 80):s.start])) for s in spans]
    spans.sort(key=lambda s: s.start)
    end = spans[-1].end if spans else -1
    if blocked > end or last_digit(text) >= end:  # every environment is a span: these digits are outside
        return []
    return spans[-RECENT:]


def _number_text(found: str) -> str:
    """A number found in running text, cleaned, unless cleaning drops the sign that reads it ('2,74 $')."""
    cleaned = clean(found)
    return found.strip() if as_number(cleaned) is None and as_number(found) is not None else cleaned


def _outside(pattern: re.Pattern, text: str, envs: list[Span], bare: list[re.Match]) -> list[re.Match]:
    """The last RECENT matches of `pattern` that lie outside every environment and bare fraction found."""
    kept: deque[re.Match] = deque(maxlen=RECENT)
    covers = sorted([(e.start, e.end) for e in envs] + [(m.start(), m.end()) for m in bare])
    starts = [start for start, _ in covers]
    for match in pattern.finditer(text):
        if not _covered(match.start(), covers, starts):
            kept.append(match)
    return list(kept)


def _covered(position: int, covers: list[tuple[int, int]], starts: list[int]) -> bool:
    """Whether a (start, end) span of `covers` (sorted, disjoint; `starts` their starts) holds `position`. With
    RECENT or more covers (the scanners keep the last RECENT), earlier positions count as held: too far back."""
    i = bisect.bisect_right(starts, position) - 1
    if i >= 0 and position < covers[i][1]:
        return True
    return len(covers) >= RECENT and position < starts[0]
