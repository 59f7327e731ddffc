"""Units on both sides of a comparison (issue 43): strings only, no sympy, no conversions.

Decisions (tests/test_math_statements.py; corpus rows of form 'units'):
- Equal only with the same unit or no unit: a unit on one side only is read as the number, as before ('5 cm'
  answers 5, and 5 answers '5 cm'); two different units of one quantity are WRONG, never converted ('5 m' for
  '5 cm', '120 min' for '2 h'), and so is a currency mismatch ('5 cents' for '\\$5', '€5' for '\\$5'). math-verify
  drops units, so it found '5 m' == '5 cm'.
- Spellings of one unit are the same unit: 'cm', 'centimeters', 'centimetre', '\\text{ cm}'; '\\$', '$', 'dollars',
  'USD'; '^\\circ', '°', 'degrees'; 'cm^2', 'cm²', 'square centimeters', 'sq cm'; 'km/h', 'kilometers per hour'.
- Only the units in _UNITS are compared; other words after a number (a counted noun: '5 apples', '18 dollars' is
  a currency) are not units of a quantity here: 'apples' against 'oranges' is not checked, the numbers are.
  'pounds' is left out (mass or money).
- The unit is read from the end of the statement as written (rlvr.verifiers.math.extract.FinalAnswer.written):
  the words after its last digit, or a currency sign before its last number. Issue 43's red team: the unit those
  words start with ('5 cm long' is cm, not no unit), a two-letter unit in capitals ('5 KM' is km; 'M' stays no
  unit), and a word that names no unit we know where the reference has one is WRONG ('5 furlongs' for '5 m').
"""
from __future__ import annotations

import re

_UNITS: dict[str, str] = {}


def _unit(key: str, *forms: str) -> None:
    for form in (key, *forms):
        _UNITS[form] = key


for _key, *_forms in (
        ("mm", "millimeter", "millimetre"), ("cm", "centimeter", "centimetre"), ("m", "meter", "metre"),
        ("km", "kilometer", "kilometre"), ("in", "inch", "inches"), ("ft", "foot", "feet"), ("yd", "yard"),
        ("mi", "mile"), ("mg", "milligram"), ("g", "gram", "gramme"), ("kg", "kilogram", "kilo"), ("oz", "ounce"),
        ("s", "sec", "second"), ("min", "minute"), ("h", "hr", "hour"), ("day",), ("week", "wk"), ("month",),
        ("year", "yr"), ("ms", "millisecond"), ("μs", "microsecond"), ("ns", "nanosecond"), ("decade",),
        ("century", "centuries"), ("millennium", "millennia"), ("INR", "₹", "rupee", "Rs", "rs", "inr"),
        ("CNY", "yuan", "rmb", "cny"), ("peso",), ("CHF", "franc", "chf"), ("RUB", "ruble", "rouble"),
        ("ml", "mL", "milliliter", "millilitre"), ("l", "L", "liter", "litre"), ("gal", "gallon"),
        ("USD", "dollar", "usd", "buck"), ("cent", "¢", "cents"), ("EUR", "€", "euro", "eur", "\\euro"),
        ("GBP", "£", "gbp"), ("JPY", "¥", "yen"), ("deg", "°", "degree"), ("rad", "radian"),
        ("degC", "°C", "celsius"), ("degF", "°F", "fahrenheit"), ("km/h", "kph", "kmh"), ("mi/h", "mph"),
        ("m/s", "mps")):
    _unit(_key, *_forms)

_TEXT_GROUP = re.compile(r"\\(?:text|textrm|textnormal|mathrm|mbox|textit|operatorname)\s*\{([^{}]*)\}")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree")
_POWER = re.compile(r"\^\s*\{?\s*([23])\s*\}?")  # written as '²' / '³', which are no digits to \d
_SPACING = re.compile(r"\\[,;:! ]|~|\\q?quad(?![A-Za-z])|[{}$]")
_CURRENCY_BEFORE = re.compile(r"(USD|€|£|¥|\\euro(?:\{\})?)\s*[-+]?\s*\d[\d,. ]*$")
_LAST_DIGIT = re.compile(r"\d(?=\D*\Z)")
_WORDS = re.compile(r"[^\W\d_]+\.?|[°¢€£¥/²³]")
_DOLLAR_WORDS = re.compile(r"\$\s*[A-Za-z]")
_PER = re.compile(r"\s+per\s+|\s*/\s*")


def _one(word: str) -> str | None:
    """The unit one word names, plurals and case read ('Centimeters' -> cm; 'M' is not 'm'), else None."""
    word = word.rstrip(".")
    lower = word.lower()
    short = [word, lower] if len(word) == 2 and word.isupper() else [word]  # 'KM' is km; 'M' is not 'm' (issue 43)
    forms = short if len(word) <= 2 else [word, lower, word.removesuffix("s"), lower.removesuffix("s"),
                                          lower.removesuffix("es")]
    return next((_UNITS[form] for form in forms if form in _UNITS), None)


def _named(words: str) -> str | None:
    """The unit a run of unit words names ('square centimeters' -> 'cm^2', 'miles per hour' -> 'mi/h')."""
    parts = _PER.split(words.strip())
    if len(parts) == 2:
        top, bottom = _named(parts[0]), _named(parts[1])
        key = top and bottom and f"{top}/{bottom}"
        return _UNITS.get(key, key) if key else None
    tokens = words.split()
    power = ""
    if tokens and tokens[0].lower().rstrip(".") in ("square", "sq", "cubic", "cu"):
        power = "^2" if tokens[0].lower().startswith("s") else "^3"
        tokens = tokens[1:]
    if tokens and tokens[-1] in ("²", "³", "squared", "cubed"):
        power, tokens = "^2" if tokens[-1] in ("²", "squared") else "^3", tokens[:-1]
    if len(tokens) == 2 and tokens[0] == "°" and tokens[1] in ("C", "F"):
        tokens = ["°" + tokens[1]]
    if len(tokens) == 2 and _one(tokens[0]) == "deg" and tokens[1].lower() in ("celsius", "fahrenheit"):
        tokens = tokens[1:]
    unit = _one(tokens[0]) if len(tokens) == 1 else None
    return unit + power if unit else None


def unit_of(written: str) -> str | None:
    """The unit a statement ends with (see the module docstring), as a canonical key; None without a known one."""
    return _unit_and_words(written)[0]


def _unit_and_words(written: str) -> tuple[str | None, bool]:
    """(the unit that the words after the last number start with, as a canonical key ('5 cm long' -> cm: issue 43's
    red team), or None; whether words follow that number at all)."""
    text = _TEXT_GROUP.sub(r" \1 ", written).replace("\\$", " USD ")
    if text.count("$") == 1:  # one '$' is a dollar sign ('5 $'), unless words follow it ('125$ miles'); a pair
        text = text.replace("$", " " if _DOLLAR_WORDS.search(text) else " USD ")  # delimits LaTeX
    text = _POWER.sub(lambda m: " ² " if m.group(1) == "2" else " ³ ", _DEGREES.sub(" ° ", text))
    for sign in "²³°/":
        text = text.replace(sign, f" {sign} ")
    text = " ".join(_SPACING.sub(" ", text).split()).rstrip(".")
    currency = _CURRENCY_BEFORE.search(text)
    if currency:
        return _one(currency.group(1).removesuffix("{}")), True
    last = _LAST_DIGIT.search(text)
    if last is None:
        return None, False
    words = text[last.end():].split()
    if not words or not _WORDS.fullmatch(words[0]):
        return None, False
    for size in range(min(len(words), 4), 0, -1):
        named = _named(" ".join(words[:size]).replace("° C", "°C").replace("° F", "°F"))
        if named and all(_WORDS.fullmatch(w) for w in words[:size]):
            return named, True
    return None, True


_SIGN_BEFORE = re.compile(r"(\\\$|€|£|¥)\s*$")
_FOLLOWING = re.compile(r"\s*(?:\$\s*)?((?:[^\W\d_]+\.?|[°¢€£¥/])(?:\s*(?:[^\W\d_]+\.?|[°¢€£¥/])){0,3})")


def unit_around(text: str, start: int, end: int) -> tuple[str, str]:
    """The currency sign before and the unit words after a number at text[start:end] in running text ('€5', '5 m
    long' -> ' m'), for the fallbacks that read a number without its statement: a sign other than a bare '$' (a
    LaTeX delimiter too), and the longest run of up to four words naming a unit."""
    sign = _SIGN_BEFORE.search(text, max(0, start - 8), start)
    return (sign.group(1) if sign else ""), _unit_after(text, end)


def _unit_after(text: str, end: int) -> str:
    match = _FOLLOWING.match(text, end, min(len(text), end + 80))
    if match is None:
        return ""
    words = match.group(1).split()
    for size in range(len(words), 0, -1):
        if _named(" ".join(words[:size]).replace("° C", "°C").replace("° F", "°F")):
            return " " + " ".join(words[:size])
    return ""


_TRAILING_WORDS = re.compile(r"(?<=[\d.])\s*([^\W\d_][^\d\\{}$]{0,40})\Z")


def without_unit(text: str) -> str:
    """`text` without the unit words that end it ('5 mL' -> '5', '5 KM' -> '5'), when they name a unit we know; the
    units themselves are compared by unit_problem (issue 43's red team: '5 ml' for '5 mL' was WRONG)."""
    words = _TRAILING_WORDS.search(text, max(0, len(text) - 48))
    return text[:words.start()] if words and _named(words.group(1).strip().rstrip(".")) else text


def unit_problem(written: str, gold: str) -> str | None:
    """Why the answer's unit differs from the reference's (both known and not the same); None otherwise."""
    (mine, worded), theirs = _unit_and_words(written), unit_of(gold)
    if mine and theirs and mine != theirs:
        return f"unit {mine} where the reference has {theirs} (units are compared, never converted)"
    if theirs and not mine and worded:  # '5 furlongs' for '5 m': a word that is no unit we know (issue 43)
        return f"a word where the reference has the unit {theirs} (not a unit this verifier knows)"
    return None
