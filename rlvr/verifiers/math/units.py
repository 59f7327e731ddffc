"""Units on both sides of a comparison: strings only, no sympy, no conversions.

Decisions (tests/test_math_statements.py; corpus rows of form 'units'):
- Equal only with the same unit or no unit: a unit on one side only is read as the number, as before ('5 cm'
  answers 5, and 5 answers '5 cm'); two different units of one quantity are WRONG, never converted ('5 m' for
  '5 cm', '120 min' for '2 h'), and so is a currency mismatch ('5 cents' for '\\$5', '€5' for '\\$5'). math-verify
  drops units, so it found '5 m' == '5 cm'.
- Spellings of one unit are the same unit: 'cm', 'centimeters', 'centimetre', '\\text{ cm}'; '\\$', '$', 'dollars',
  'USD'; '^\\circ', '°', 'degrees'; 'cm^2', 'cm²', 'square centimeters', 'sq cm'; 'km/h', 'kilometers per hour'.
- The units in _UNITS are compared by key. The table has the families a
  grade-school to competition dataset uses (mass, area, volume, data, power and energy, ...), and a word used for
  two units ('pound': lb or GBP; 'ounce' of a liquid; 'ton'; a food 'calorie') equals either (_EITHER). Other words
  after a number (a counted noun: '5 apples') are words, not units, read as the number on either side or both
  ('5 different ways' for '5 arrangements' is an honest answer; a wrong noun with the right number gains a policy
  nothing the number did not earn); a known unit against such words is WRONG ('5 kg' for '5 apples'). Words of
  fewer than three letters or written against the number ('6ab') are variables, left to math-verify; 'units'
  alone is no unit.
- The unit is read from the end of the statement as written (rlvr.verifiers.math.extract.FinalAnswer.written):
  the words after its last digit, or a currency sign before its last number. Also: the unit those
  words start with ('5 cm long' is cm, not no unit), a two-letter unit in capitals ('5 KM' is km; 'M' stays no
  unit), and a word that names no unit we know where the reference has one is WRONG ('5 furlongs' for '5 m').
- 'Rs.' and 'INR' before a number are rupees, as '€' before one is euros ('Rs. 5' for '\\$5').
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
        ("USD", "dollar", "usd", "buck"), ("cent", "¢", "cents"), ("EUR", "€", "euro", "eur", "\\euro", "\\texteuro"),
        ("GBP", "£", "gbp", "pound sterling", "quid", "\\pounds", "\\textsterling"),
        ("JPY", "¥", "yen", "\\yen", "\\textyen"), ("deg", "°", "degree"),
        ("rad", "radian"), ("degC", "°C", "celsius"), ("degF", "°F", "fahrenheit"), ("km/h", "kph", "kmh"),
        ("mi/h", "mph"), ("m/s", "mps"),
        # the families a grade-school to competition dataset uses, so that a
        # reference in one of them is compared at all ('5 pounds' for '5 kg', '5 MB' for '5 GB' scored 1.0).
        # Mass; 'pound' alone is mass or money (_EITHER), 'lb' is mass only; a 'ton' may be short or metric.
        ("lb", "lbs"), ("pound",), ("ton",), ("tonne", "metric ton", "metric tonne"), ("μg", "mcg", "microgram"),
        ("carat",),
        # length and time
        ("nm", "nanometer", "nanometre"), ("μm", "micrometer", "micrometre", "micron"), ("dm", "decimeter"),
        ("ly", "light year", "lightyear"), ("nmi", "nautical mile"), ("angstrom", "Å", "ångström"),
        ("fortnight",), ("knot",),
        # area and volume (square and cubic units of a length are read by _named)
        ("acre",), ("hectare", "ha"), ("ft^2", "sqft"), ("cup", "cupful"), ("tbsp", "Tbsp", "tbs", "tablespoon",
        "tablespoonful"), ("tsp", "teaspoon", "teaspoonful"), ("qt", "quart"), ("pint",), ("floz", "fl oz",
        "fluid ounce"), ("cl", "centiliter", "centilitre"), ("dl", "deciliter", "decilitre"),
        ("cm^3", "cc"), ("barrel", "bbl"),
        # data ('kb'/'mb' in lower case are bytes, as people write them; 'Kb'/'Mb'/'Gb' are bits)
        ("bit",), ("byte",), ("KB", "kB", "kb", "kilobyte"), ("MB", "mb", "megabyte"), ("GB", "gb", "gigabyte"),
        ("TB", "terabyte"), ("PB", "petabyte"), ("Kb", "kbit", "kilobit"), ("Mb", "Mbit", "megabit"),
        ("Gb", "Gbit", "gigabit"), ("KiB", "kibibyte"), ("MiB", "mebibyte"), ("GiB", "gibibyte"),
        ("Mbit/s", "Mbps", "mbps"), ("Gbit/s", "Gbps", "gbps"),
        # power, energy, frequency, force, electricity
        ("W", "watt"), ("mW", "milliwatt"), ("kW", "kw", "kilowatt"), ("MW", "megawatt"), ("GW", "gigawatt"),
        ("J", "joule"), ("kJ", "kj", "kilojoule"), ("MJ", "megajoule"), ("Wh", "watt hour"),
        ("kWh", "kwh", "kilowatt hour"), ("MWh", "megawatt hour"),
        ("cal", "small calorie"), ("calorie",), ("kcal", "Cal", "kilocalorie"), ("hp", "horsepower"),
        ("BTU", "btu"), ("Hz", "hz", "hertz"), ("kHz", "khz", "kilohertz"), ("MHz", "mhz", "megahertz"),
        ("GHz", "ghz", "gigahertz"), ("newton", "N"),
        ("N m", "n m", "Nm", "N·m", "n·m", "newton meter", "newton metre"), ("volt",), ("ampere", "amp"), ("kelvin",)):
    _unit(_key, *_forms)

# Pairs of spellings that name one unit, or a word used for either of two (never a conversion): 'pound' is lb or
# GBP (lb and GBP differ), 'ounce' of a liquid is a fluid ounce, 'ton' is often a metric ton, a food 'calorie' is a
# kcal, and a millilitre is a cubic centimetre.
_EITHER = frozenset(frozenset(pair) for pair in (
    ("pound", "lb"), ("pound", "GBP"), ("oz", "floz"), ("ton", "tonne"), ("calorie", "cal"), ("calorie", "kcal"),
    ("ml", "cm^3"), ("l", "dm^3")))

_TEXT_GROUP = re.compile(r"\\(?:text|textrm|textnormal|mathrm|mbox|textit|operatorname)\s*\{([^{}]*)\}")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree")
# A power after a unit, written in superscript ('cm^2' -> 'cm ²', 'cm^{-1}' -> 'cm ⁻¹'): superscripts are no digits
# to \d, so the number stays the last digit; any power but 2 and 3 is a unit of its own
# (before, '\\boxed{5}\\,\\text{cm}^{-1}' was read as 5 cm).
_POWER = re.compile(r"\^\s*(?:\{\s*(-?\s*\d{1,2})\s*\}|(-?\d))")
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_SUPERSCRIPTS = re.compile(r"[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_PLAIN_POWER = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
_MICRO = re.compile(r"\\(?:mu|textmu|micro)(?![A-Za-z])\s*(?:\{\})?\s*")
_SPACING = re.compile(r"\\[,;:! ]|~|\\q?quad(?![A-Za-z])|[{}$]")
_HYPHEN = re.compile(r"(?<=[^\W\d_])-(?=[^\W\d_])")  # 'kilowatt-hours', 'light-years' are two words
_SIGNS = r"€|£|¥|\\(?:euro|texteuro|pounds|textsterling|yen|textyen)"  # '\\pounds 5' is GBP
# 'Rs. 5', 'INR 5': rupees before the number ('Rs. 5' was read as no unit and paid '\\$5')
_CURRENCY_BEFORE = re.compile(rf"(USD|(?<![A-Za-z])(?:Rs\.?|INR)|{_SIGNS}(?:\{{\}})?)\s*[-+]?\s*\d[\d,. ]*$")
_LAST_DIGIT = re.compile(r"\d(?=\D*\Z)")
_WORDS = re.compile(r"[^\W\d_]+\.?|[°¢€£¥/]|[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_DOLLAR_WORDS = re.compile(r"\$\s*[A-Za-z]")
_PER = re.compile(r"\s+per\s+|\s*/\s*")


def _one(word: str) -> str | None:
    """The unit one word names, plurals and case read ('Centimeters' -> cm; 'M' is not 'm'), else None."""
    word = word.rstrip(".")
    lower = word.lower()
    short = [word, lower] if len(word) == 2 and word.isupper() else [word]  # 'KM' is km; 'M' is not 'm'
    forms = short if len(word) <= 2 else [word, lower, word.removesuffix("s"), lower.removesuffix("s"),
                                          lower.removesuffix("es")]
    return next((_UNITS[form] for form in forms if form in _UNITS), None)


def _phrase(tokens: list[str]) -> str | None:
    """The unit several words name as one ('fl oz', 'fluid ounces', 'metric tons', 'kilowatt hours'), else None."""
    lower = " ".join(token.rstrip(".") for token in tokens).lower()
    return next((_UNITS[form] for form in (lower, lower.removesuffix("s"), lower.removesuffix("es"))
                 if form in _UNITS), None) if len(tokens) > 1 else None


def _named(words: str) -> str | None:
    """The unit a run of unit words names ('square centimeters' -> 'cm^2', 'miles per hour' -> 'mi/h')."""
    parts = _PER.split(words.strip())
    if len(parts) == 2:
        top, bottom = _named(parts[0]), _named(parts[1])
        key = top and bottom and f"{top}/{bottom}"
        return _UNITS.get(key, key) if key else None
    tokens = words.split()
    if _phrase(tokens):
        return _phrase(tokens)
    power = ""
    if tokens and tokens[0].lower().rstrip(".") in ("square", "sq", "cubic", "cu"):
        power = "^2" if tokens[0].lower().startswith("s") else "^3"
        tokens = tokens[1:]
    if tokens and (tokens[-1] in ("squared", "cubed") or _SUPERSCRIPTS.fullmatch(tokens[-1])):
        last = {"squared": "²", "cubed": "³"}.get(tokens[-1], tokens[-1])
        power, tokens = "^" + last.translate(_PLAIN_POWER), tokens[:-1]
    if len(tokens) == 2 and tokens[0] == "°" and tokens[1] in ("C", "F"):
        tokens = ["°" + tokens[1]]
    if len(tokens) == 2 and _one(tokens[0]) == "deg" and tokens[1].lower() in ("celsius", "fahrenheit"):
        tokens = tokens[1:]
    unit = (_one(tokens[0]) if len(tokens) == 1 else _phrase(tokens)) if tokens else None
    return unit + power if unit else None


def unit_of(written: str) -> str | None:
    """The unit a statement ends with (see the module docstring), as a canonical key; None without a known one."""
    return _read(written)[0]


def _normal(text: str) -> str:
    """`text` with text groups opened, degrees as '°', powers as superscripts, hyphens between words and LaTeX
    spacing as spaces, single-spaced."""
    text = _MICRO.sub("μ", text)  # '\\mathrm{\\mu m}' is μm, never m
    text = _POWER.sub(lambda m: " " + "".join((m.group(1) or m.group(2)).split()).translate(_SUPERSCRIPT) + " ",
                      _DEGREES.sub(" ° ", _TEXT_GROUP.sub(r" \1 ", text)))
    text = _SUPERSCRIPTS.sub(r" \g<0> ", _HYPHEN.sub(" ", text))
    for sign in "°/":
        text = text.replace(sign, f" {sign} ")
    return " ".join(_SPACING.sub(" ", text).split())


def _read(written: str) -> tuple[str | None, list[str], bool]:
    """(the unit that the words after the last number start with, as a canonical key ('5 cm long' -> cm), or None; the
    words (up to four) that follow that number; whether a space parts them from it, so
    that they are words, not variables multiplied ('6 apples', not '6ab'))."""
    text = written.replace("\\$", " USD ")
    if text.count("$") == 1:  # one '$' is a dollar sign ('5 $'), unless words follow it ('125$ miles'); a pair
        text = text.replace("$", " " if _DOLLAR_WORDS.search(text) else " USD ")  # delimits LaTeX
    text = _normal(text).rstrip(".")
    currency = _CURRENCY_BEFORE.search(text)
    if currency:
        return _one(currency.group(1).removesuffix("{}")), [], False
    last = _LAST_DIGIT.search(text)
    if last is None:
        return None, [], False
    words, spaced = text[last.end():].split()[:4], text.startswith(" ", last.end())
    if not words or not _WORDS.fullmatch(words[0]) or _SUPERSCRIPTS.match(words[0]):  # '2^{99}' is a power
        return None, [], False
    for size in range(len(words), 0, -1):
        named = _named(" ".join(words[:size]).replace("° C", "°C").replace("° F", "°F"))
        if named and all(_WORDS.fullmatch(w) for w in words[:size]):
            return named, words, spaced
    return (None, [], False) if _generic(words) else (None, words, spaced)


_TIMES = frozenset({"s", "min", "h", "day", "week", "month", "year", "ms", "decade", "century", "fortnight"})
_RATE_MARKS = frozenset({"per", "/", "each", "every", "a", "an"})


def rate_of(written: str) -> str | None:
    """What a rate after the last number is per ('5 per hour', '\\$5/hour', '5 km/h', '5 an hour' -> 'h'; '5 per
    person' -> 'person'), as a unit key or a singular noun, or None. 'a' and 'an' mark a rate only before a unit
    of time ('5 and a half' is no rate). Before: '5 per hour' for '5 per minute' was paid (the per-words were
    read as no unit on either side)."""
    text = _normal(written.replace("\\$", " ").replace("$", " ")).rstrip(".")
    last = _LAST_DIGIT.search(text)
    words = text[last.end():].split()[:5] if last else []
    for mark, word in zip(words, words[1:]):
        unit = _named(word) if _WORDS.fullmatch(word) else None
        if mark.lower() in _RATE_MARKS and word.isalpha() and (mark.lower() not in ("a", "an") or unit in _TIMES):
            return unit or _stem(word)
    return None


# The rate's words at the end of an answer, the per-word left alone too (the answer line drops a unit it knows:
# '5 per hour' is read '5 per').
_RATE_TAIL = re.compile(r"(?<=[\d.}])\s*(?:per|each|every|an?|/)(?:\s*[^\W\d_]+\.?)?\s*\Z", re.IGNORECASE)


def without_rate(answer: str, gold: str, written: str) -> tuple[str, str]:
    """The answer and the reference without the rate both end with, when the statement as written is per the same
    thing ('5 per hour' and '5 an hour' are 5 and 5); else both as they are (unit_problem refuses two rates)."""
    rate = rate_of(written)
    if rate is None or rate != rate_of(gold):
        return answer, gold
    return _RATE_TAIL.sub("", answer), _RATE_TAIL.sub("", gold)


def _generic(words: list[str]) -> bool:
    """Whether the words are the placeholder 'units' ('12 square units', '5 units'): no unit, as none is written."""
    first = [_stem(word) for word in words[:2]]
    return first[0] == "unit" or (first[0] in ("square", "sq", "cubic", "cu") and first[1:] == ["unit"])


def _stem(word: str) -> str:
    """A word in lower case, singular ('Apples' -> 'apple', 'boxes' -> 'box', 'glass' stays)."""
    word = word.lower().rstrip(".")
    if word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 3 else word


_SIGN_BEFORE = re.compile(rf"(\\\$|{_SIGNS}\s*(?:\{{\}})?)\s*$")
_FOLLOWING = re.compile(r"\s*((?:[^\W\d_]+\.?|[°¢€£¥/]|[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)"
                        r"(?:\s*(?:[^\W\d_]+\.?|[°¢€£¥/]|[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)){0,3})")


def unit_around(text: str, start: int, end: int) -> tuple[str, str]:
    """The currency sign before and the unit words after a number at text[start:end] in running text ('€5', '5 m
    long' -> ' m'), for the fallbacks that read a number without its statement: a sign other than a bare '$' (a
    LaTeX delimiter too), and the longest run of up to four words naming a unit."""
    sign = _SIGN_BEFORE.search(text, max(0, start - 8), start)
    return (sign.group(1) if sign else ""), _unit_after(text, end)


def _unit_after(text: str, end: int) -> str:
    """The unit words after text[end] (' m', ' cm ⁻¹'), read through LaTeX spacing and a text group as a statement's
    are ('\\boxed{5}\\,\\text{cm}' was read with no unit, so it answered '5 m')."""
    if text[end - 1:end] == "}" and _FACTORIAL_AFTER.match(text, end, end + 40):
        return " !"  # '\\boxed{42} !': a factorial, read by unit_problem
    match = _FOLLOWING.match(_normal(text[end:end + 80]))
    if match is None:
        return ""
    words = match.group(1).split()
    for size in range(len(words), 0, -1):
        if _named(" ".join(words[:size]).replace("° C", "°C").replace("° F", "°F")):
            return " " + " ".join(words[:size])
    return ""


# A '!' after a number or a box, through spacing, is a factorial, not the end of a sentence: after a
# box only these are read as what follows it ('\\boxed{42} !'); '\\!' is a negative thin space. Detached from its
# number, math-verify drops it and reads 42.
_FACTORIAL_AFTER = re.compile(r"(?:\s|~|\\[,;: ]|\\!){0,8}!(?!=)")
_FACTORIAL = re.compile(r"[\d}](?:\s|~|\\[,;: ]|\\!){1,8}!(?!=)")  # glued ('4!') it is read as one: 24
_TRAILING_WORDS = re.compile(r"(?<=[\d.])\s*([^\W\d_][^\d\\{}$]{0,40})\Z")


def without_unit(text: str) -> str:
    """`text` without the unit words that end it ('5 mL' -> '5', '5 KM' -> '5'), when they name a unit we know; the
    units themselves are compared by unit_problem ('5 ml' for '5 mL' was WRONG)."""
    words = _TRAILING_WORDS.search(text, max(0, len(text) - 48))
    return text[:words.start()] if words and _named(words.group(1).strip().rstrip(".")) else text


_NOT_NOUNS = frozenset({"the", "and", "for", "each", "all", "total", "more", "left", "other", "in", "of", "a", "an"})


def _nouns(words: list[str], spaced: bool) -> set[str]:
    """The nouns among words after a number: words of three letters or more, set apart from it by a space (an
    unknown word is compared only then: '6ab' and '6 ba' are products of variables, left to math-verify)."""
    nouns = {_stem(word) for word in words if _WORDS.fullmatch(word) and len(word.rstrip(".")) > 2}
    return nouns - _NOT_NOUNS if spaced and not _changes(words) else set()


def unit_problem(written: str, gold: str) -> str | None:
    """Why the answer's unit differs from the reference's; None otherwise. Known units compare by key ('pound'
    is either lb or GBP: _EITHER); a known unit against the reference's words is WRONG (before,
    '5 kilowatts' for '5 watts' and '5 MB' for '5 GB' were never compared while the reference's unit was
    unknown). Words on either side or both are read as the number; so is a word that changes the value ('percent',
    'dozen': rlvr.verifiers.math.forms decides those)."""
    if _FACTORIAL.search(written) and not _FACTORIAL.search(gold):  # 'Answer: 42 !', '\\boxed{42}\\,!'
        return "a '!' after the number is a factorial"
    (mine, my_words, _), (theirs, their_words, their_space) = _read(written), _read(gold)
    my_rate, their_rate = rate_of(written), rate_of(gold)
    if my_rate and their_rate and my_rate != their_rate:  # '5 per hour' for '5 per minute': units are never converted
        return f"a rate per {my_rate} where the reference's is per {their_rate}"
    if mine and theirs and mine != theirs and frozenset((mine, theirs)) not in _EITHER:
        return f"unit {mine} where the reference has {theirs} (units are compared, never converted)"
    if theirs and not mine and my_words:  # '5 furlongs' for '5 m': a word that is no unit we know
        return f"a word where the reference has the unit {theirs} (not a unit this verifier knows)"
    their_nouns = _nouns(their_words, their_space)
    if mine and not theirs and their_nouns:  # '5 kg' for '5 apples'
        return f"unit {mine} where the reference has the words {' '.join(their_words)!r}"
    return None


def _changes(words: list[str]) -> bool:
    """Whether a word changes, hedges or bounds the number ('percent', 'million'): not compared as a unit here."""
    from rlvr.verifiers.math.forms import changes_count  # forms is imported by numbers, which imports this module
    return changes_count(words[0].rstrip("."))
