"""Numbers written in words, mixed numbers, fractions named in words and repeating decimals written with dots
. Strings and Fractions only: this runs in the trainer's process, never sympy.

Decisions (tests/test_math_statements.py; corpus rows of forms 'number_words', 'mixed_number', 'fraction_words',
'repeating_dots'); before these rules each of these was read as a bare number or as two answers:
- A whole number in words is its value: 'five' == 5, 'twenty-one' == 21, 'one hundred and five' == 105, 'two
  thousand three hundred' == 2300, 'twelve hundred' == 1200. Words out of order ('five three', 'one thousand two
  thousand') are no number. Hyphens join words ('three-fifths'), and '½', '2¾' are fractions.
- A mixed number is one value: '5 1/2' == 11/2, '2 and 3/4' == 11/4, '5 and a half' == 11/2, 'five and three
  quarters' == 23/4, '-5 1/2' == -11/2. Only with a proper fraction: '3 4/3' stays two numbers (a hedge), and
  '5 1/2' never reads as 5 or as 1/2. 'A and B/C' reads as the mixed number against a list reference too.
- A count of a fraction word is that fraction: '3 fifths' == 3/5, '5 tenths' == 1/2, 'a half' == 1/2, 'three
  quarters' == 3/4 ('second' is a unit of time, not a denominator). A plural magnitude is its factor: '3 dozens'
  == 36 (rlvr.verifiers.math.forms.magnitude), so neither is trimmed to the bare count (rlvr.verifiers.math.latex).
- A leading 'ca.', 'circa' or 'approx.' marks an estimate, as '~' does: 'ca. 4' is not 4.
- A decimal followed by '...' (or '\\ldots', '\\dots', '…') repeats its shortest tail written at least twice in a
  row: '0.333...' == 1/3, '0.1666...' == 1/6, '0.142857142857...' == 1/7. Without such a tail ('3.14159...',
  '0.12...') it is a cut-off decimal with no exact value: WRONG (rlvr.verifiers.math.forms.value_problem), never
  the digits before the dots.
"""
from __future__ import annotations

import re
from fractions import Fraction

from rlvr.verifiers.math.forms import changes_count, magnitude
from rlvr.verifiers.math.numerals import _ONES, _SCALES, _TENS, cardinal, denominator

_HYPHEN = re.compile(r"(?<=[a-z])-(?=[a-z])")  # 'three-fifths', 'one-half'
# '½', '2¾': vulgar fractions as the fractions they are
_VULGAR = str.maketrans({"½": " 1/2", "⅓": " 1/3", "⅔": " 2/3", "¼": " 1/4", "¾": " 3/4", "⅕": " 1/5", "⅖": " 2/5",
                         "⅗": " 3/5", "⅘": " 4/5", "⅙": " 1/6", "⅚": " 5/6", "⅛": " 1/8", "⅜": " 3/8", "⅝": " 5/8",
                         "⅞": " 7/8"})
_FRACTION = re.compile(r"\d+/\d+")
_MIXED = re.compile(r"([-+\u2212]?)\s*(\d+)\s+(?:and\s+)?(\d+)\s*/\s*(\d+)")
_WHOLE_AND = re.compile(r"([-+\u2212]?)\s*(.+?)\s+and\s+(.+)")
_DOZENS = re.compile(r"(half\s+an?|an?|[a-z\s]+?|\d+)\s+dozens?")
_DOZENS_OF = re.compile(r"\s*((?:half\s+an?|an?|[a-z]+|\d+)\s+dozen)\s+([^\W\d_]{2,}(?:\s+[^\W\d_]{2,}){0,3})"
                        r"\s*[.!]?\s*", re.IGNORECASE)
_COUNT_OF = re.compile(r"(.+?)\s+([a-z]+)")
DOTS = re.compile(r"([-+]?)(\d*)\.(\d+)\s*(?:\.\.\.|\\[lc]?dots\b|…)")
# A leading '~', '\sim', '\approx' or '≈' marks an estimate: '~5' is about 5, never 5. Inside LaTeX a
# '~' is a space, but no answer starts with one.
# So do 'ca.', 'circa' and 'approx.' ('Answer: ca. 4' was paid 4).
ESTIMATE = re.compile(r"\s*(?:~|\\sim(?![A-Za-z])|\\approx(?![A-Za-z])|[≈∼]|(?:ca|circa|approx)(?![A-Za-z])\.?)"
                      r"\s*[-+]?[\d.]", re.IGNORECASE)


def value_word(word: str) -> bool:
    """Whether `word` names a number, a denominator or a magnitude ('five', 'fifths', 'dozens'): never prose to trim
    from around an answer (rlvr.verifiers.math.latex.trim_prose)."""
    word = word.lower().strip(".,:;!?")
    return word in _ONES or word in _TENS or word in _SCALES or word == "hundred" \
        or denominator(word) is not None or magnitude(word) is not None


def _count(text: str) -> int | None:
    text = text.strip()
    if text.isdigit():
        return int(text)
    return 1 if text in ("a", "an", "one") else cardinal(text)


def _fraction_words(text: str) -> Fraction | None:
    """'3 fifths', 'three quarters', 'a half' -> the fraction; None for anything else."""
    match = _COUNT_OF.fullmatch(text)
    below = match and denominator(match.group(2))
    count = _count(match.group(1)) if below else None
    return None if count is None else Fraction(count, below)


def words_value(text: str) -> Fraction | None:
    """The value of a mixed number, a fraction in words or a whole number in words (see the module docstring)."""
    text = _HYPHEN.sub(" ", " ".join(text.lower().translate(_VULGAR).split()).removesuffix("."))
    if _FRACTION.fullmatch(text):  # '½'
        numerator, below = map(int, text.split("/"))  # '1/00' is over zero too (it raised)
        return Fraction(numerator, below) if below else None
    mixed = _MIXED.fullmatch(text)
    if mixed:
        whole, numerator, denominator = (int(g) for g in mixed.group(2, 3, 4))
        if not 0 < numerator < denominator:
            return None
        return (whole + Fraction(numerator, denominator)) * (-1 if mixed.group(1) in ("-", "\u2212") else 1)
    parts = _WHOLE_AND.fullmatch(text)
    whole, part = (_count(parts.group(2)), _fraction_words(parts.group(3))) if parts else (None, None)
    if whole is not None and part is not None and 0 < part < 1 and parts.group(2) not in ("a", "an"):
        return (whole + part) * (-1 if parts.group(1) in ("-", "\u2212") else 1)
    dozens = _DOZENS.fullmatch(text)  # 'a dozen', 'two dozen', 'half a dozen'
    if dozens:
        count = Fraction(1, 2) if dozens.group(1).startswith("half") else _count(dozens.group(1))
        return None if count is None else count * 12
    return _fraction_words(text) or (Fraction(number) if (number := cardinal(text)) is not None else None)


def dozens_counted(answer: str) -> str | None:
    """'a dozen eggs' -> 'a dozen', '3 dozen eggs' -> '3 dozen': a count of dozens before plain
    nouns (none that changes the value: rlvr.verifiers.math.forms.changes_count); None for anything else."""
    match = _DOZENS_OF.fullmatch(answer.replace("**", ""))
    if match is None or any(changes_count(word) for word in match.group(2).split()):
        return None
    return match.group(1) if words_value(match.group(1)) is not None else None


def repeating_dots(text: str) -> Fraction | None | bool:
    """'0.333...' -> 1/3 (see the module docstring); False for a cut-off decimal with no repeating tail; None when
    `text` is no decimal followed by dots."""
    match = DOTS.fullmatch(text.strip())
    if match is None:
        return None
    digits = match.group(3)
    for size in range(1, len(digits) // 2 + 1):
        period = digits[-size:]
        if digits.endswith(period * 2):
            fixed = digits[:len(digits) - 2 * size]
            value = int(match.group(2) or 0) + Fraction(int(fixed or 0), 10 ** len(fixed)) \
                + Fraction(int(period), (10 ** size - 1) * 10 ** len(fixed))
            return -value if match.group(1) == "-" else value
    return False


_INSIDE = re.compile(r"\\approx(?![A-Za-z])|≈|\\(?:neg|lnot)(?![A-Za-z])|¬")  # 'x \\approx 4', '\\neg 4'
_APPROXIMATELY = re.compile(r"\\approx(?![A-Za-z])|≈")


def exact_part(answer: str) -> str:
    """An exact value stated before its approximation: 'x = 1/3 \\approx 0.33' -> 'x = 1/3'; `answer` itself
    otherwise ('x \\approx 4' states no exact value: approximation_problem)."""
    approx = _APPROXIMATELY.search(answer)
    return answer[:approx.start()].rstrip() if approx and "=" in answer[:approx.start()] else answer


def approximation_problem(answer: str) -> str | None:
    """Why `answer` states no exact value: an estimate ('~5', 'x \\approx 4'), a negation ('\\neg 4') or a cut-off
    decimal ('3.14159...'); None otherwise."""
    if ESTIMATE.match(answer) or _INSIDE.search(answer):
        return "an estimate ('~', '\\approx') or a negation is not an exact value"
    if repeating_dots(answer) is False:
        return "a decimal cut off with '...' and no repeating digits is not an exact value"
    if _CUT_WHOLE.search(answer) and repeating_dots(answer) is None:  # math-verify drops '\\ldots': '5\\ldots' read 5
        return "a number followed by '\\ldots' is cut off or a sequence, not an exact value"
    return None


# '5\\ldots', '5 \\cdots', '5…' at the end of an answer: cut off or the start of a sequence, as '3.14159...' is (red
# team). Plain '5...' is left to the prose rules: clean() drops it as a trailing ellipsis.
_CUT_WHOLE = re.compile(r"\d\s*(?:\\[lc]?dots(?![A-Za-z])|…)\s*\Z")
