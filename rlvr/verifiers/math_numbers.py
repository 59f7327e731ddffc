"""Plain numbers for the math verifier: exact values, and numbers in running text. Strings only, no sympy.

Decisions (pinned by tests/test_math_forms.py and tests/test_math_latex_mode.py):
- Plain numbers are compared exactly as fractions, never with a tolerance (see rlvr.verifiers.math_extract).
- Written forms read as one number (issue 8, section 2; math-verify's number regex accepts the same ones):
  thousands separators '1,000.99' and '1 000' (also LaTeX spacing '1\\,000' and '1{,}000'), a leading dot
  '.4', a currency sign '$5' / '\\$5' / '€5' / '5 €', a percent 'X%' / 'X \\%' / 'X percent' (read as X/100 or
  as X), trailing units ('\\text{ cm}', '^\\circ'), and a decimal comma '2,74 €' only next to a euro sign: a
  bare '2,74' stays a list of two numbers, as in '\\boxed{3,5}' (a hedge), never 3.5.
- A number in running text is not the answer when it sits inside a larger expression (issue 8, section 2:
  last_number read '$\\frac{1+\\sqrt{5}}{2}$' as 2 and scored it against gold 2): inside a brace group
  (fraction, root, exponent; '\\text{..}' groups excepted), right after '^', '_', '/', '\\frac', '\\sqrt', a
  binary operator or a relation ('x \\geq 2' bounds x, it is not 2), right before '^', '/', '*', '\\cdot',
  '\\pi', '\\end' or any other command, in a matrix cell ('&', '\\\\'), as the end of an interval, tuple
  or set '[0, 2)' / '\\{1, 2\\}', or as the argument of 'f(2)'; also digits glued to a word ('\\frac12').
  `last_number` then gives no number at all, rather than an earlier one, which could be a distractor.
"""
from __future__ import annotations

import re
from fractions import Fraction

_EURO = r"(?:€|\\euro(?:\{\})?|EUR\b|euros?\b)"
_PERCENT_WORD = r"(?:\s*\\?%|\s*\\text\{\s*\\?%\s*\}|\s*percent\b|\s*\\text\{\s*percent\s*\})"
# A number in running text: thousands commas or spaces, decimals, simple fractions, a decimal comma only next
# to a euro sign, an optional percent; '-' is a sign only when it does not follow a word character (so '3-5'
# yields 5, not -5). Every branch is linear-time.
NUMBER_IN_TEXT = re.compile(
    rf"(?<![\w.])(?:€\s?\d+,\d{{1,2}}(?![\d,])|\d+,\d{{1,2}}\s*{_EURO})"
    rf"|(?:(?<![\w.])(?:(?<![\w)])-)?(?:\d{{1,3}}(?:,\d{{3}})+(?!\d)|\d{{1,3}}(?: \d{{3}})+(?![\d,]|\.\d)|\d+)"
    rf"(?:\.\d+)?(?:/\d+)?|(?<![\w.])-?\.\d+){_PERCENT_WORD}?")
_PLAIN_NUMBER = re.compile(
    r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d{1,3}(?: \d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:(?:/\d+)|(?:[eE][-+]?\d{1,3}))?")
_DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d{1,2}")
_SIMPLE_FRAC = re.compile(r"([-+]?)\\[dtc]?frac(?:\{\s*(\d+)\s*\}|(\d))(?:\{\s*(\d+)\s*\}|(\d))")
_PERCENT = re.compile(rf"{_PERCENT_WORD}$")
_SPACING = re.compile(r"\\[,;: ]|~|\\q?quad\b|[\u00a0\u2009\u202f]")
# trailing units; never a lone e or i (2\mathrm{i} is a complex number, not 2 of a unit)
_UNIT = re.compile(r"\s*(?:\\(?:text|mbox|mathrm)\{(?!\s*[eEiI]\s*\})[^{}]*\}|\^\s*\{?\s*\\circ\s*\}?|°)\s*$")
_CURRENCY_PREFIX = re.compile(rf"^(?:\\\$|\$|£|¥|(€|\\euro(?:\{{\}})?))\s*")
_CURRENCY_SUFFIX = re.compile(rf"\s*(?:£|¥|({_EURO}|\\text\{{\s*{_EURO}\s*\}}))$")


def _strip_units(text: str) -> str:
    previous = None
    while previous != text:
        previous, text = text, _UNIT.sub("", text)
    return text


def _strip_currency(text: str) -> tuple[str, bool]:
    """`text` without a leading or trailing currency sign, and whether that sign was the euro's."""
    euro = False
    for pattern in (_CURRENCY_PREFIX, _CURRENCY_SUFFIX):
        match = pattern.search(text)
        if match:
            euro = euro or bool(match.group(1))
            text = (text[:match.start()] + text[match.end():]).strip()
    return text, euro


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
    text = _SPACING.sub(" ", text.strip().replace("\u2212", "-").replace("{,}", ",").replace("\\!", ""))
    text, euro = _strip_currency(_strip_units(" ".join(text.split())))
    text = text.removesuffix(".") if not text.endswith("..") else text
    frac = _SIMPLE_FRAC.fullmatch(text)
    if frac:
        sign, num, den = frac.group(1), frac.group(2) or frac.group(3), frac.group(4) or frac.group(5)
        return None if int(den) == 0 else Fraction(int(num), int(den)) * (-1 if sign == "-" else 1)
    if euro and _DECIMAL_COMMA.fullmatch(text):  # '2,74 €': the euro area writes decimal commas
        text = text.replace(",", ".")
    if not _PLAIN_NUMBER.fullmatch(text):
        return None
    try:
        return Fraction(text.replace(",", "").replace(" ", ""))
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


# ---------------------------------------------------------------- numbers inside larger expressions
# '-' after a single letter, a command or a bracket is binary ('\\pi - 2'); after a digit it is a range ('3-5').
# '**' is markdown bold ('**$180**'), not multiplication.
_BEFORE = re.compile(r"(?:[\^_/×÷&<>≤≥≠]|(?<!\*)\*"
                     r"|\\(?:[dtc]?frac|sqrt|binom|cdot|times|div|pm|mp|[gl]eq?|neq?|[gl]t)"
                     r"|(?:[\w})\]]|\\[A-Za-z]+)\s*\+"
                     r"|(?:\\[A-Za-z]+|(?<![A-Za-z])[A-Za-z]|[})\]])\s*-)\s*$")
_AFTER = re.compile(r"\s*(?:\^(?!\s*\{?\s*\\circ)|_|/|[×÷&]|\*(?!\*)|\\\\|\+\s*[\w\\(]"
                    r"|\\(?!(?:text|mathrm|mbox|textbf|right|circ|degree|q?quad)(?![A-Za-z]))[A-Za-z])")
_TEXT_GROUP = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|mathbf|emph)\s*$")
_CLOSER = re.compile(r"\s*(?:\)|\]|\\\}|\\right|\\rangle)")
_TOKENS = re.compile(r"\n|(?<!\\)[{}]")
_LAST_DIGIT = re.compile(r"\d\D*\Z")


def brace_depths(text: str, positions: list[int]) -> list[bool]:
    """For each position (ascending), whether it lies inside a brace group of its line that is not a
    `\\text{..}`-like group. One pass over the text; a `}` with nothing open on its line is ignored."""
    inside, stack, i = [], [], 0
    for token in _TOKENS.finditer(text):
        while i < len(positions) and positions[i] < token.start():
            inside.append(any(stack))
            i += 1
        if i == len(positions):
            return inside
        if token.group() == "\n":
            stack.clear()
        elif token.group() == "{":
            stack.append(not _TEXT_GROUP.search(text, max(0, token.start() - 8), token.start()))
        elif stack:
            stack.pop()
    return inside + [any(stack)] * (len(positions) - i)


def _in_brackets(text: str, start: int, end: int) -> bool:
    """Whether the number at text[start:end] ends an interval, tuple or set ('[0, 2)', '\\{1, 2\\}') or is a
    function's argument ('f(2)'): it is followed by a closing bracket whose group holds a comma, or whose
    opening bracket follows a letter. Looks back at most 200 characters on the line."""
    closer = _CLOSER.match(text, end)
    if closer is None:
        return False
    if closer.group().strip() in ("\\}", "\\right", "\\rangle"):
        return True
    depth, floor = 0, max(text.rfind("\n", 0, start) + 1, start - 200)
    for i in range(start - 1, floor - 1, -1):
        ch = text[i]
        if ch in ")]":
            depth += 1
        elif ch in "([" and depth:
            depth -= 1
        elif ch in "([":
            return "," in text[i:start] or (i > 0 and text[i - 1].isalpha())
    return False


def in_expression(text: str, start: int, end: int, in_group: bool) -> bool:
    """Whether the number at text[start:end] is part of a larger expression (see the module docstring);
    `in_group` comes from brace_depths."""
    return (in_group or bool(_BEFORE.search(text, max(0, start - 12), start))
            or bool(_AFTER.match(text, end)) or _in_brackets(text, start, end))


def last_number(text: str) -> str | None:
    """The last number in the text (ints, decimals, negatives, 3/4, 1,234, 50%), or None, also when that
    number sits inside a larger expression."""
    last = None
    for last in NUMBER_IN_TEXT.finditer(text):
        pass
    if last is None or last.end() <= last_digit(text):  # the last digits are glued to a word: '\\frac12', 'x2'
        return None
    if in_expression(text, last.start(), last.end(), brace_depths(text, [last.start()])[0]):
        return None
    return last.group(0).strip()


def last_digit(text: str) -> int:
    """Index of the last digit in `text`, -1 if none (linear: each try stops at the next digit)."""
    match = _LAST_DIGIT.search(text)
    return -1 if match is None else match.start()
