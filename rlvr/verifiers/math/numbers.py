"""Plain numbers for the math verifier: exact values, and numbers in running text. Strings only, no sympy.

Decisions (pinned by tests/test_math_forms.py and tests/test_math_latex_mode.py):
- Plain numbers are compared exactly as fractions, never with a tolerance (see rlvr.verifiers.math.extract).
- Written forms read as one number (math-verify's number regex accepts the same ones):
  thousands separators '1,000.99' and '1 000' (also LaTeX spacing '1\\,000' and '1{,}000'), a leading dot
  '.4', a currency sign '$5' / '\\$5' / '€5' / '5 €' / '18\\$', a percent 'X%' / 'X \\%' / 'X percent' (read as
  X/100 or as X; two percents compare as written), trailing units ('\\text{ cm}', '12\\,\\text{cm}^2',
  '^\\circ', '\\text{5 cm}'; rlvr.verifiers.math.forms decides what a unit is), magnitudes as factors
  ('5 million', '3\\text{ dozen}'), a repeating decimal '0.\\overline{3}', a minus sign U+2212 or a leading
  en dash, and a decimal comma '2,74 €' only next to a euro sign or before a dollar sign written after the number
  ('2,74 $'): a bare '2,74' stays a list of two numbers,
  as in '\\boxed{3,5}' (a hedge), never 3.5, except in a reference ('1,22' == 1.22: reference_readings).
- A number in running text is not the answer when it sits inside a larger expression (section 2:
  last_number read '$\\frac{1+\\sqrt{5}}{2}$' as 2 and scored it against gold 2): inside a brace group
  (fraction, root, exponent; '\\text{..}' groups excepted), right after '^', '_', '/', '\\frac', '\\sqrt', a
  binary operator or a relation ('x \\geq 2' bounds x, it is not 2), right before '^', '/', '*', '\\cdot',
  '\\pi', '\\end' or any other command, in a matrix cell ('&', '\\\\'), as the end of an interval, tuple
  or set '[0, 2)' / '\\{1, 2\\}', or as the argument of 'f(2)'; also digits glued to a word ('\\frac12'),
  after a detached minus or dash ('is − 3'), and before words that change it ('5 million', '5k', '5 below
  zero', '7 \\text{ (mod 5)}').
  `last_number` then gives no number at all, rather than an earlier one, which could be a distractor.
"""
from __future__ import annotations

import re
from fractions import Fraction

from rlvr.verifiers.math.forms import REPEATING, expand_repeating, is_unit, machine_rounding, magnitude, repeating_value
from rlvr.verifiers.math.operators import binomials
from rlvr.verifiers.math.units import without_unit
from rlvr.verifiers.math.words import ESTIMATE, denominator, repeating_dots, words_value

_EURO = r"(?:€|\\euro(?:\{\})?|EUR\b|euros?\b)"
_PERCENT_WORD = r"(?:\s*\\?%|\s*\\text\{\s*\\?%\s*\}|\s*(?:percent(?:age)?|pct)\b|\s*\\text\{\s*percent\s*\})"
# A number in running text: thousands commas or spaces (also LaTeX's '1,\\!000', '1{,}000', '1\\,000'), decimals,
# simple fractions, a decimal comma only next to a euro sign, an optional percent. '-', an en dash and the
# minus sign U+2212 ('−3' read as 3) are a sign only when they do not follow a word character (so
# '3-5' yields 5, not -5). Every branch is linear-time.
_SIGN = r"[-\u2212\u2013]"
_DOTS = r"(?:\.\.\.(?!\.)|…)"  # '0.333...' repeats (rlvr.verifiers.math.words)
NUMBER_IN_TEXT = re.compile(
    rf"(?<![\w.,/])\d+\s+(?:and\s+)?\d+/\d+(?![\d/.])"  # a mixed number '5 1/2'
    rf"|(?<![\w.])(?:€\s?\d+,\d{{1,2}}(?![\d,])|\d+,\d{{1,2}}\s*(?:{_EURO}|\\?\$(?![\w\\]))|\d{{4,}},\d{{1,2}}(?![\d,]))"
    rf"|(?:(?<![\w.])(?:(?<![\w)]){_SIGN})?(?:\d{{1,3}}(?:(?:,|,\\!\s*|\{{,\}}|\\,)\d{{3}})+(?!\d)"
    rf"|\d{{1,3}}(?: \d{{3}})+(?![\d,]|\.\d)|\d+)(?:\.\d+{_DOTS}?)?(?:/\d+)?|(?<![\w.]){_SIGN}?\.\d+)"
    rf"{_PERCENT_WORD}?")
# a thousands group never starts with 0: '0,125' is a decimal comma, not 125
_PLAIN_NUMBER = re.compile(
    r"[-+]?(?:(?:[1-9]\d{0,2}(?:,\d{3})+|\d{1,3}(?: \d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:(?:/\d+)|(?:[eE][-+]?\d{1,3}))?")
_REFERENCE_DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d*[1-9]\d*")  # '3,0' stays a list: '3' must not answer {3, 0}
_LEADING_SIGN = re.compile(r"^(?:[-\u2212\u2013]\s*(?=[\d.\\])|\+\s+(?=[\d.]))")
_EN_DASH_SIGN = re.compile(r"^\u2013(?=\s*[\d.\\])")  # a leading en dash is a minus ('–3'); '3–5' is a range
_DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d{1,2}")
# '1000,99': whoever leaves 1000 ungrouped does not group thousands with commas, so its comma is a decimal comma
#. '1,22' stays a list, as '3,5' does.
_UNGROUPED_COMMA = re.compile(r"[-+]?\d{4,},\d{1,2}")
_SIMPLE_FRAC = re.compile(r"([-+]?)\\[dtc]?frac(?:\{\s*(\d+)\s*\}|(\d))(?:\{\s*(\d+)\s*\}|(\d))")
_PERCENT = re.compile(rf"{_PERCENT_WORD}$")
_SPACING = re.compile(r"\\[,;: ]|~|\\q?quad\b|[\u00a0\u2009\u202f]")
_THIN_COMMA = re.compile(r",\\!\s*(?=\d{3})")
# A trailing text group (with a power: '\\text{cm}^2') is a unit only if rlvr.verifiers.math.forms.is_unit says so;
# never a lone e or i (2\\mathrm{i} is a complex number, not 2 of a unit).
_UNIT = re.compile(r"\s*\\(?:text|mbox|mathrm|textrm)\s*\{((?!\s*[eEiI]\s*\})[^{}]*)\}"
                   r"(?:\s*\^\s*(?:\{\s*[23]\s*\}|[23]))?\s*$")
_DEGREES = re.compile(r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|°)\s*$")
_SIGN_WORD = re.compile(r"\s*(?:minus|negative)\s+(?=[\d.a-z])", re.IGNORECASE)
_UNIT_PASSES = 3  # '12\\text{ cm}^2', '30^\\circ' need one
_WHOLE_TEXT = re.compile(r"\\(?:text|textbf|textrm|mbox|mathrm)\s*\{([^{}]*\d[^{}]*)\}")  # '\\text{5 cm}'
_TRAILING_WORDS = re.compile(r"(?<=[\d.])\s*((?:[^\W\d_]|°)[^\d\\{}$]*)$")
_MAGNITUDE = re.compile(r"\s*(?:\\(?:text|mathrm|mbox)\s*\{\s*([A-Za-z]+)\s*\}|([A-Za-z]+))$")
_CURRENCY_PREFIX = re.compile(r"^(?:\\\$|\$|£|¥|(€|\\euro(?:\{\})?))\s*")
# '18\\$'; group 1: a sign written after the number where decimal commas are the custom ('2,74 €', and
# '2,74 $' as French-speaking Canada writes dollars)
_CURRENCY_SUFFIX = re.compile(rf"\s*(?:£|¥|(\\\$|\$|{_EURO}|\\text\{{\s*{_EURO}\s*\}}))$")


def _strip_units(text: str, words: bool = False) -> str:
    """`text` without trailing units; with `words`, also plain unit words ('5 cm' inside '\\text{5 cm}', where
    letters are prose, not variables: '5 ab' outside a text group is not 5). At most _UNIT_PASSES units: each pass
    searches the whole text, so a run of thousands ('3^\\circ^\\circ...') was quadratic (80 s of
    CPU for 180 KB); what is left then is no number."""
    for _ in range(_UNIT_PASSES):
        unit, degrees = _UNIT.search(text), _DEGREES.search(text)
        plain = _TRAILING_WORDS.search(text) if words else None
        if unit and is_unit(unit.group(1)):
            text = text[:unit.start()]
        elif degrees:
            text = text[:degrees.start()]
        elif plain and is_unit(plain.group(1)):
            text = text[:plain.start()]
        else:
            return text
    return text


def _strip_currency(text: str) -> tuple[str, bool]:
    """`text` without a leading or trailing currency sign, and whether that sign allows a decimal comma: the euro's,
    or a dollar sign after the number (_CURRENCY_SUFFIX)."""
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
    signed = _SIGN_WORD.match(text)  # 'minus five', 'negative 5'
    if signed:
        value = _plain_value(text[signed.end():])
        return None if value is None else -value
    whole = _WHOLE_TEXT.fullmatch(text.strip())  # the whole answer written as text: '\\text{5 cm}'
    text = whole.group(1) if whole else text
    if ESTIMATE.match(text):  # '~5' is about 5, not 5 (rlvr.verifiers.math.words)
        return None
    text = _THIN_COMMA.sub(",", text.strip().replace("\u2212", "-").replace("{,}", ","))  # '11,\\! 111'
    text = _SPACING.sub(" ", text.replace("\\!", ""))
    text = _LEADING_SIGN.sub(lambda m: m.group()[0].replace("\u2013", "-"), " ".join(text.split()))
    text, euro = _strip_currency(_strip_units(text, words=bool(whole)))
    text = text.removesuffix(".") if not text.endswith("..") else text
    factor = _magnitude_word(text)
    if factor is not None:
        value = _plain_value(_MAGNITUDE.sub("", text))
        return None if value is None else value * factor
    repeating = REPEATING.fullmatch(text.lstrip("+-"))
    if repeating:
        value = repeating_value(repeating.group(1), repeating.group(2), repeating.group(3) or repeating.group(4))
        return -value if text.startswith("-") else value
    frac = _SIMPLE_FRAC.fullmatch(text)
    if frac:
        sign, num, den = frac.group(1), frac.group(2) or frac.group(3), frac.group(4) or frac.group(5)
        return None if int(den) == 0 else Fraction(int(num), int(den)) * (-1 if sign == "-" else 1)
    if (euro and _DECIMAL_COMMA.fullmatch(text)) or _UNGROUPED_COMMA.fullmatch(text):  # '2,74 €', '1000,99'
        text = text.replace(",", ".")
    dots = repeating_dots(text)
    if dots is not None:
        return dots or None
    if not _PLAIN_NUMBER.fullmatch(text):
        return words_value(text)
    try:
        return Fraction(text.replace(",", "").replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return None


def _magnitude_word(text: str) -> int | None:
    """The factor of a magnitude word right after a number ('5 million', '3\\text{ dozen}'), else None."""
    match = _MAGNITUDE.search(text)
    if match is None or not re.search(r"[\d.]\s*$", text[:match.start()]):
        return None
    return magnitude(match.group(1) or match.group(2))


def number_readings(answer: str) -> frozenset[Fraction]:
    """Every value a plain number may mean: one, or two for a percent (X% is X/100, or X with '%' as a unit)."""
    percent = _percent_value(answer)
    if percent is not None:
        return frozenset({percent, percent * 100})
    value = _plain_value(answer)
    return frozenset() if value is None else frozenset({value})


def reference_readings(reference: str) -> frozenset[Fraction]:
    """number_readings of a reference, where a comma that cannot separate thousands is a decimal comma
    ('1,22' == 1.22, '0,125' == 0.125; '1,234' stays 1234; '3,0' stays the list {3, 0}, which a partial
    '3' must not answer). Only references: a completion's '3,5' is a list (a hedge for one value). The
    reference keeps its list reading for math-verify too ('1, 22' matches)."""
    readings = number_readings(reference)
    if readings or not _REFERENCE_DECIMAL_COMMA.fullmatch(reference.strip()):
        return readings
    return number_readings(reference.replace(",", "."))


_CLOCK = re.compile(r"\s*(\d{1,2}):(\d{2})\s*")


def numbers_match(pred: str, gold: str) -> bool | None:
    """Whether two plain numbers are equal; None unless both are plain numbers. Exact, except that a percent
    on one side only may be read as X or X/100 (50% == 0.5 == 50) while two percents compare as written
    (0.25% != 25%), and a fraction without a finite decimal expansion equals its double-precision
    print (rlvr.verifiers.math.forms.machine_rounding)."""
    clocks = _CLOCK.fullmatch(pred), _CLOCK.fullmatch(gold)
    if all(clocks):  # '12:00' is a time of day, compared as hours and minutes (math-verify reads 12/00)
        return tuple(map(int, clocks[0].groups())) == tuple(map(int, clocks[1].groups()))
    gold_values = reference_readings(gold) or reference_readings(without_unit(gold))  # units: unit_problem
    pred_values = number_readings(pred) or number_readings(without_unit(pred))
    if not gold_values or not pred_values:
        return None
    if _percent_value(gold) is not None and _percent_value(pred) is not None:
        return _percent_value(gold) == _percent_value(pred)
    return bool(gold_values & pred_values) or any(machine_rounding(pred, value) for value in gold_values)


_DECIMAL_IN_TEXT = re.compile(r"(?<![\d.])\d*\.\d+(?![\d.])")
_FRACTION_IN_TEXT = re.compile(r"\\[dtc]?frac(?:\{\s*(\d+)\s*\}|(\d))(?:\{\s*(\d+)\s*\}|(\d))"
                               r"|(?<![\d.])(\d+)/(\d+)(?![\d.])")


def rounded_fractions(pred: str, gold: str) -> str:
    """`pred` with each decimal that is a fraction of `gold` printed at double precision written as that
    fraction (rlvr.verifiers.math.forms.machine_rounding), so tuples and matrices follow the rule numbers do:
    '(0.333333333333333, 1)' answers '(\\frac13, 1)'; '(0.33, 1)' does not."""
    fractions = set()
    for match in _FRACTION_IN_TEXT.finditer(gold):
        numerator, denominator = int(match[1] or match[2] or match[5]), int(match[3] or match[4] or match[6])
        if denominator:
            fractions.add(Fraction(numerator, denominator))
    if not fractions:
        return pred

    def exact(match: re.Match) -> str:
        value = next((f for f in fractions if machine_rounding(match.group(), f)), None)
        return match.group() if value is None else f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
    return _DECIMAL_IN_TEXT.sub(exact, pred)


def canonical(answer: str) -> str:
    """What math-verify is sent: a plain number as an exact fraction (percents as X/100), else the LaTeX with
    `\\mathrm{e}` as e and `\\mathrm{i}` as i (math-verify kept only a truncated string for
    `1 - \\frac{1}{\\mathrm{e}}`), and `a \\choose b` as `\\binom{a}{b}` (it was read as b)."""
    value = as_number(answer)
    if value is not None:
        return str(value)
    answer = binomials(expand_repeating(_EN_DASH_SIGN.sub("-", answer.strip().replace("\u2212", "-"))))
    return " ".join(re.sub(r"\\(?:mathrm|operatorname|text)\{\s*([ei])\s*\}", r"\1", answer).split())


# ---------------------------------------------------------------- numbers inside larger expressions
# '-' after a single letter, a command or a bracket is binary ('\\pi - 2'); after a digit it is a range ('3-5').
# '**' is markdown bold ('**$180**'), not multiplication.
_BEFORE = re.compile(r"(?:[\^_/×÷&<>≤≥≠]|(?<!\*)\*"
                     r"|\\(?:[dtc]?frac|sqrt|binom|cdot|times|div|pm|mp|[gl]eq?|neq?|[gl]t)"
                     r"|(?:[\w})\]]|\\[A-Za-z]+)\s*\+"
                     r"|(?:\\[A-Za-z]+|(?<![A-Za-z])[A-Za-z]|[})\]])\s*-"
                     r"|(?<!\S)[\u2212\u2013]"  # a detached minus or dash: 'is − 3' is not 3
                     r"|(?<!\S)~|[≈∼]|\\(?:approx|sim)(?![A-Za-z]))\s*$")  # an estimate: '~5' is not 5
_AFTER = re.compile(r"\s*(?:\^(?!\s*\{?\s*\\circ)|_|/|[×÷&]|\*(?!\*)|\\\\|\+\s*[\w\\(]"
                    r"|!+\s*(?:\$|\\\)|\\\])"  # '$42!$': in math a '!' is a factorial
                    r"|\\(?!(?:text|mathrm|mbox|textbf|right|circ|degree|q?quad)(?![A-Za-z]))[A-Za-z])")
# what follows a number and changes it: a text group that is not a unit, a magnitude ('5 million', '5k')
_CHANGING_WORDS = frozenset({"below", "squared", "cubed", "factorial", "halves", "thirds", "quarters", "tenths",
                             "hundredths", "thousandths", "millionths", "percentile", "mod", "modulo"})
_NEXT_WORDS = re.compile(r"\s*(?:\\[,;:! ]\s*)*\\(?:text|textrm|mathrm|mbox)\s*\{([^{}]*)\}|(\s*)([A-Za-z]+)")
_GLUED_PREFIXES = frozenset({"k", "K", "M", "B", "bn", "mn"})
_AND_A_PART = re.compile(r"\s+and\s+[a-z]+\s+([a-z]+)")  # '5 and a half', '2 and three quarters'

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
            or bool(_AFTER.match(text, end)) or _in_brackets(text, start, end) or _changed_after(text, end))


def _changed_after(text: str, end: int) -> bool:
    """Whether what follows the number ending at `end` changes its value: '5 million', '5k', '5 below zero',
    '7 \\text{ (mod 5)}'; a unit ('5 cm', '5 \\text{ cm}') does not."""
    match = _NEXT_WORDS.match(text, end)
    if match is None:
        return False
    if match.group(1) is not None:
        return not is_unit(match.group(1))
    word = match.group(3)
    return (magnitude(word) is not None or word.lower() in _CHANGING_WORDS or denominator(word) is not None
            or (not match.group(2) and word in _GLUED_PREFIXES) or _and_a_part(text, end))


def _and_a_part(text: str, end: int) -> bool:
    part = _AND_A_PART.match(text, end)
    return part is not None and denominator(part.group(1)) is not None


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


_SENTENCE_BREAK = re.compile(r"[.!?;](?:\s|$)|\n")


def number_before(text: str, at: int) -> tuple[str, int] | None:
    """The number before position `at` in its sentence, at most 200 characters back, and where it ends; None when
    there is none ('It is 3 or 4' reads two numbers, a hedge)."""
    low = max(0, at - 200)
    breaks = [m.end() for m in _SENTENCE_BREAK.finditer(text, low, at)]
    found = None
    for found in NUMBER_IN_TEXT.finditer(text, breaks[-1] if breaks else low, at):
        pass
    return None if found is None else (found.group().strip(), found.end())


def last_digit(text: str) -> int:
    """Index of the last digit in `text`, -1 if none (linear: each try stops at the next digit)."""
    match = _LAST_DIGIT.search(text)
    return -1 if match is None else match.start()
