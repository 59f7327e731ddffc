"""Written forms around a value that keep it or change it. Strings and Fractions only: this
runs in the trainer's process, never sympy.

Decisions (pinned by tests/test_math_forms.py, corpus rows in bench/data/math_corpus.jsonl):
- A trailing text group is a unit, dropped from a number, only when it is words of letters none of which
  changes the value: `5 \\text{ cm}`, `12\\,\\text{cm}^2`, `3 \\text{ km/h}` are 5, 12, 3. Magnitudes
  (`5 \\text{ million}`, `3\\text{ dozen}`; `5\\mathrm{k}` and other lone SI prefixes, ambiguous with units
  such as K for kelvin), signs and bounds (`5 \\text{ below zero}`, `5 \\text{ or more}`), estimates, and
  anything with a digit or bracket (`7 \\text{ (mod 5)}`) are not units. math-verify drops every such
  group (`5 \\text{ million}` == 5 there), so an answer with one that the reference lacks is WRONG before it
  reaches math-verify (value_problem). 'more', 'fewer', 'less', 'higher' stay units: '5 more apples' answers
  'how many more'. A magnitude word reads as its factor: `5 \\text{ million}` == 5000000 (MAGNITUDES).
- A plain noun after a number in an answer line or <answer> block (mode strict): 'Answer: 17 birds'
  is 17. The words must be letters (two or more per word, 'a' after the first) none of which, singular or
  plural, is a VALUE_WORDS word, a hedge, a bound, a multiplier or a number word, so '17 million', '17
  thousands', '17 or more', '17 maybe', '17 point five' are not 17, and a lone letter stays a variable
  ('5 x'). Without it, strict mode read the agent tasks' honest answers ('17 pens') as WRONG on 7 of the
  calculator's 8 story nouns (math-verify read 'apples' alone as a unit). '17 red and yellow flowers' stays
  WRONG ('and' may join a second value); '17 percent' and '17 per cent' follow the percent rule (X% is X or
  X/100 against a plain number: rlvr.verifiers.math.extract).
- An arrow (`3 \\to 4`, `3 \\Rightarrow 4`, '3 -> 4', `3 \\xrightarrow{} 4`) is not a value: math-verify
  reads the side after it.
- A set is not a tuple or an interval. A set of two or more items against a bracketed tuple
  or interval of two or more, either way round, is WRONG ('\\{3, 4\\}' for '(3, 4)'; math-verify compared the
  items only). A bare list ('3, 4') answers either, and a set of one tuple is that tuple ('\\{(1, 2)\\}').
  Words that scale or bound a value ('doubled', 'halved', 'max', plural magnitudes 'hundreds') are no unit, and an
  accent on a number ('\\hat 4', '\\tilde{4}') is not the number (math-verify dropped both).
- A repeating decimal `0.\\overline{3}` is the fraction it denotes, 1/3 (also inside tuples and matrices).
- A rounded decimal against an exact fraction (judgment call). A fraction without a finite decimal expansion
  (1/12, 1/3) equals a decimal only when the decimal is that fraction printed at double precision: at
  least MACHINE_DIGITS (15, DBL_DIG) significant digits, within one unit of its last digit (rounded or
  truncated). So `0.0833333333333333` == 1/12: it is what float(1/12) prints, and at that precision no
  grader can tell it from the fraction. `0.33`, `0.333` and `0.3333333333` stay wrong for 1/3, in a matrix
  too: the reference is exact and the question did not ask for rounding, so a short decimal is tolerance
  bait (tests/test_math_attacks.py; math-verify itself would take 0.333333 == 1/3 at its 6 places). Where a
  question wants a rounded answer its reference is the rounded decimal, matched exactly. Irrational
  references (pi, sqrt 2) are not fractions: 3.14159265358979 stays wrong for pi (Math-Verify issue #14).
"""
from __future__ import annotations

import re
from fractions import Fraction

from rlvr.verifiers.math.numerals import denominator
from rlvr.verifiers.math.operators import operator_problem

MACHINE_DIGITS = 15  # significant digits a double always prints correctly (DBL_DIG)
# 'permille' is a thousandth, read like a percent is read as X/100 ('5 permille' was read as
# the count 5 of a noun); unlike a percent it is never also read as X: no reference states a per-mille figure bare.
MAGNITUDES: dict[str, int | Fraction] = {
    "hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12, "dozen": 12,
    "permille": Fraction(1, 1000), "promille": Fraction(1, 1000), "permil": Fraction(1, 1000),
    # the larger scales, and parts per million/billion and basis points, change it too
    "quadrillion": 10**15, "quintillion": 10**18, "sextillion": 10**21, "googol": 10**100,
    "ppm": Fraction(1, 10**6), "ppb": Fraction(1, 10**9), "bps": Fraction(1, 10**4)}
# Words after a number that change its value or make it a bound or an estimate: never a unit.
VALUE_WORDS = frozenset({
    *MAGNITUDES, "lakh", "crore", "gross", "bn", "mn", "mil", "k", "percent", "percentage", "pct", "percentile",
    "below", "under", "beneath", "minus", "negative", "plus", "not", "no", "or", "and", "to", "than", "least",
    "most", "mod", "modulo", "half", "halves", "third", "thirds", "quarter", "quarters", "tenth", "tenths",
    "hundredth", "hundredths", "thousandth", "thousandths", "millionth", "millionths", "power", "root", "roots",
    "factorial", "about", "approximately", "approx", "around", "roughly", "nearly", "almost", "circa", "ca",
    "deficit", "short", "loss", "thou", "ppt", "basis", "bp", "pp",
    # a scaled value or a bound ('4 \\text{ doubled}', '4 \\text{ max}') is not 4
    "doubled", "halved", "tripled", "quadrupled", "twice", "thrice", "max", "min", "maximum", "minimum"})
_FIRST_ONLY = frozenset({"squared", "cubed"})  # '5 squared' is 25, '5 m squared' is 5 m²
_PREFIXES = frozenset({"k", "K", "M", "B", "G", "T"})  # alone: thousand/million/... or kelvin/molar/tesla
_CONSTANTS = frozenset({"e", "E", "i", "I"})  # 2\\mathrm{i} is a complex number; rlvr.verifiers.math.numbers.canonical
_UNIT_TEXT = re.compile(r"(?:[^\W\d_]|°|')+(?:[\s./·-]+(?:[^\W\d_]|°|')+)*\.?")  # cm, km/h, sq. ft., °C
_WORD = re.compile(r"[^\W\d_]+")
# A text group that ends a value: at the end of the answer or of an item (',', ')', '&', '\\}', '\\\\').
_TRAILING_TEXT = re.compile(
    r"(?<=[\d}.)\]])\s*(?:\\[,;:! ]\s*)*\\(?:text|textrm|mathrm|mbox)\s*\{([^{}]*)\}"
    r"(?=\s*(?:\^\s*(?:\{\s*[23]\s*\}|[23]))?\s*(?:$|[,;)\]&]|\\\}|\\\\|\\right|\\end))")
_ARROW = re.compile(r"\\x?(?:to|rightarrow|Rightarrow|longrightarrow|Longrightarrow|implies|mapsto|longmapsto|"
                    r"iff|leftrightarrow|Leftrightarrow|gets|leftarrow|Leftarrow)(?![A-Za-z])|->|=>|[→⇒⟶↦⟹]")
REPEATING = re.compile(r"(\d*)\.(\d*)\s*\\overline\s*(?:\{\s*(\d+)\s*\}|(\d))")
_DECIMAL = re.compile(r"[-+]?(\d*)\.(\d+)")


def is_unit(text: str) -> bool:
    """Whether the words of a trailing text group name a unit, so dropping them keeps the value."""
    text = text.strip()
    if not text or text in _PREFIXES or text in _CONSTANTS or not _UNIT_TEXT.fullmatch(text):
        return False
    words = [w.lower() for w in _WORD.findall(text)]
    if MAGNITUDES.keys() & {w.removesuffix("s") for w in words}:  # '4 \\text{ hundreds}'
        return False
    return not (VALUE_WORDS.intersection(words) or words[0] in _FIRST_ONLY)


# A count's words: letters, two or more to a word ('a' and 'an' allowed after the first), joined by spaces, commas,
# hyphens or apostrophes; a final '.' or '!'.
_COUNTED = re.compile(r"\s*([-+]?(?:\d+\s+\d+/\d+|\d[\d,]*(?:\.\d+)?|\.\d+)(?:/\d+)?)"  # '5 1/2 miles'
                      r"\s+([^\W\d_]{2,}(?:(?:\s*,\s*|\s+|[-'])"
                      r"(?:[^\W\d_]{2,}|a))*)\s*[.!]?\s*")
# Words after a count that VALUE_WORDS lets through as units yet change the value, hedge it or bound it
# ('17 thousands', '17 maybe', '17 point five', '17 per cent'); also any number word. Plurals are
# read as their singular. 'more', 'fewer', 'less', 'times' stay: '17 more birds', '17 times' answer 'how many'.
_NOT_A_COUNT = VALUE_WORDS - {"to"} | frozenset({
    "maybe", "probably", "perhaps", "possibly", "likely", "ish", "something", "somewhat", "estimated", "estimate",
    "guess", "odd", "give", "take", "maximum", "minimum", "max", "min", "over", "above", "upward", "upwards", "top",
    "tops", "up", "except", "excluding", "including", "without", "twice", "thrice", "double", "doubled", "triple",
    "tripled", "halved", "fold", "per", "cent", "mille", "point", "grand", "score", "myriad", "zillion", "gazillion",
    "reciprocal", "inverse", "negated", "squared", "cubed", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
    "eleventh", "twelfth", "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
    "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred", "thousand", "million", "billion",
    "trillion",
    "pi", "sqrt", "log", "ln", "sin", "cos", "tan", "exp", "choose",  # boxes read counts ('2 pi')
    "itself", "themselves", "tens", "lakhs", "crores"})  # '5 times itself', '5 tens'
_TO_THE = re.compile(r"\bto(?:\s+the\b|\s*$)", re.IGNORECASE)  # '5 to the second' is a power


def changes_count(word: str) -> bool:
    """Whether a word after a number changes, hedges or bounds it (_NOT_A_COUNT, plurals read as their singular)."""
    word = word.lower()  # 'miles' is no 'mil': '-es' only after a sibilant ('boxes')
    sibilant = word.endswith(("ses", "xes", "zes", "ches", "shes"))
    forms = (word, word.removesuffix("s"), word[:-2] if sibilant else word)  # '5 sixteenths'
    return any(form in _NOT_A_COUNT for form in forms) or denominator(word) is not None


def counted_value(answer: str) -> str | None:
    """The number of 'NUMBER NOUN...' ('17 birds', '1,234 dollars', '3 apples left', '17 cookies in a jar'), when
    none of the words changes, hedges or bounds the value (_NOT_A_COUNT, VALUE_WORDS); None for anything else (see
    the module docstring)."""
    match = _COUNTED.fullmatch(answer.replace("**", ""))
    if not match or _TO_THE.search(match.group(2)):
        return None
    if any(changes_count(word) for word in _WORD.findall(match.group(2))):
        return None
    return match.group(1)


def magnitude(word: str) -> int | Fraction | None:
    """The factor a magnitude word stands for ('million', 'millions', 'Dozen'), else None."""
    word = word.lower()
    return MAGNITUDES.get(word, MAGNITUDES.get(word.removesuffix("s")))


def value_problem(pred: str, gold: str) -> str | None:
    """Why `pred` does not state the value math-verify would read from it (a trailing text group that is not a
    unit, an arrow), unless the reference has the same; None when nothing is in the way."""
    gold_texts = {" ".join(m.group(1).split()) for m in _TRAILING_TEXT.finditer(gold)}
    for match in _TRAILING_TEXT.finditer(pred):
        words = " ".join(match.group(1).split())
        if not is_unit(words) and words not in gold_texts and words not in _CONSTANTS:
            return f"{words!r} after a number changes its value; it is not a unit"
    arrow = _ARROW.search(pred)
    if arrow and not _ARROW.search(gold):
        return f"an arrow ({arrow.group()!r}) is not a value"
    kinds = {bracket_kind(pred), bracket_kind(gold)}
    if kinds == {"set", "ordered"}:  # '\\{3, 4\\}' for '(3, 4)'
        return "a set is not a tuple or an interval"
    return _marks_problem(pred, gold) or operator_problem(pred, gold)  # '3 \\slash 4' (rlvr...operators)


# A relation with nothing on its left ('\\neq 5', '\\geq 5', '≠ 5', '\\in 5') says
# how the answer relates to 5, not that it is 5; math-verify drops it and reads 5. '=' (and ':=', '\\equiv', which
# assert the value) stays: '\\boxed{= 5}' states 5. Compared as written with a reference that opens the same way.
_RELATION = re.compile(r"\s*(?:\$\s*)?(?:[<>≠≥≤≦≧⩽⩾≪≫∈∉∋∝⊂⊆⊃⊇⊊⊋∣∤∥⊥≲≳≺≻≼≽≮≯≰≱]|\\(?:n?(?:[lg]eq?q?|[lg]eqslant|[lg]t"
                       r"|less\w*|gtr\w*|su[bp]set\w*|mid|parallel|prec\w*|succ\w*)|neq?|not(?:in)?|ll|gg|lll|ggg|in|ni"
                       r"|owns|(?:var)?propto|perp)(?![A-Za-z]))")
# '5\'', '5′': feet, minutes or a derivative, never the bare 5 (a "'" after a box is WRONG already)
_PRIME = re.compile(r"\d(?:\s|~|\\[,;:! ]|\\q?quad(?![A-Za-z])){0,8}['’′″‴]")  # '5\\,\''
# '6_{5}', '12_8': a numeral in base 5 or 8; math-verify drops the subscript and reads 6 and 12. A
# subscript 10 is the plain number; any other base must be the reference's.
# The subscript is read through braces, parentheses, spacing and text groups ('6_{(5)}', '6_{\\,5}',
# '6_{{5}}'), and an explicit base 10 is a base too: '12_{10}' is not '12_8'.
_BASE = re.compile(r"(?<=\d)\s*_\s*(\{(?:[^{}]|\{[^{}]{0,40}\}){0,40}\}|\w)")
_BASE_NOISE = re.compile(r"\\(?:text|mathrm|textrm|mbox|mathbf|rm)(?![A-Za-z])|\\[,;:! ]|\\q?quad(?![A-Za-z])|[{}()\s~]"
                         r"|\bbase\b", re.IGNORECASE)


def _marks_problem(pred: str, gold: str) -> str | None:
    """Why a relation before `pred`, a prime after its number or a base subscript on it
    makes it another value than the number math-verify reads; None when the reference has the same."""
    relation, same = _RELATION.match(pred), _RELATION.match(gold)
    if relation and (same is None or relation.group().strip(" $") != same.group().strip(" $")):
        return f"a relation ({relation.group().strip()!r}) before it bounds or excludes the value; it states none"
    accent = _ACCENT.search(pred)
    if accent and not _ACCENT.search(gold):
        return f"an accent ({accent.group(1)!r}) on a number is not the number"
    if _PRIME.search(pred) and not _PRIME.search(gold):
        return "a prime after a number (feet, minutes) is not the number"
    mine, theirs = _bases(pred), _bases(gold)
    if mine and _other(mine) != _other(theirs):  # '12_{10}' answers 12, never '12_8'
        return f"a base subscript ({', '.join(mine)}) is not the reference's base"
    return None


# An accent on a number ('\\hat 4', '\\tilde{4}'): math-verify drops it and reads 4. After a
# digit or a decimal point it is a repeating decimal's mark ('0.\\dot{3}', '0.\\bar{3}'), left to the other rules.
_ACCENT = re.compile(r"(?<![\d.])(?<![\d.]\s)\\(hat|widehat|tilde|widetilde|vec|check|breve|acute|grave|mathring"
                     r"|ddot|dddot|overrightarrow|overleftarrow|bar|dot)(?![A-Za-z])\s*(?:\{\s*)?[-+]?[\d.]")
_SET_OPEN = re.compile(r"\s*(?:\\left\s*)?(?:\\\{|\\lbrace(?![A-Za-z]))")
_SET_CLOSE = re.compile(r"(?:\\right\s*)?(?:\\\}|\\rbrace(?![A-Za-z]))\s*\Z")
_SET_BRACE = re.compile(r"\\[{}]|\\[lr]brace(?![A-Za-z])")
_ORDERED = re.compile(r"(?:\\left\s*)?[(\[]")


def _outer(answer: str, opens: str, closes: str, tokens: list[str]) -> bool:
    """Whether the first of `tokens` (each an opener in `opens` or a closer in `closes`) is matched by the last: the
    answer is one bracketed whole ('(1, 2) \\cup (3, 4)' is not)."""
    depth = 0
    for i, token in enumerate(tokens):
        depth += 1 if token in opens else -1 if token in closes else 0
        if depth == 0 and i < len(tokens) - 1:
            return False
    return depth == 0


def _listed(inner: str) -> bool:
    """Whether `inner` holds a comma or semicolon outside its brackets ('\\,' is spacing): two items or more."""
    depth = 0
    for i, ch in enumerate(inner):
        depth += 1 if ch in "([{" else -1 if ch in ")]}" else 0
        if ch in ",;" and depth == 0 and inner[i - 1:i] != "\\":
            return True
    return False


def bracket_kind(answer: str) -> str | None:
    """'set' for a set of two or more items ('\\{3, 4\\}'), 'ordered' for a bracketed tuple or interval of two or more
    ('(3, 4)', '[3, 4)'), None for anything else (a bare list, one value, a union)."""
    if _SET_OPEN.match(answer) and _SET_CLOSE.search(answer):
        tokens = [t.group() for t in _SET_BRACE.finditer(answer)]
        inner = _SET_CLOSE.sub("", answer[_SET_OPEN.match(answer).end():])
        if _outer(answer, ("\\{", "\\lbrace"), ("\\}", "\\rbrace"), tokens) and _listed(inner):
            return "set"
    stripped = answer.strip()
    if _ORDERED.match(stripped) and stripped.endswith((")", "]")):
        tokens = [ch for ch in stripped if ch in "()[]"]
        if _outer(stripped, "([", ")]", tokens) and _listed(stripped[1:-1]):
            return "ordered"
    return None


def _bases(answer: str) -> list[str]:
    """The bases of the numerals in `answer` ('12_8' -> ['8'], '6_{(5)}' -> ['5'], '12_{10}' -> ['10'])."""
    return [_BASE_NOISE.sub("", m.group(1)).lower() for m in _BASE.finditer(answer)]


def _other(bases: list[str]) -> list[str]:
    """The bases other than ten: a numeral in base 10 is the plain number."""
    return [b for b in bases if b not in ("10", "ten")]


def repeating_value(integer: str, fixed: str, period: str) -> Fraction:
    """0.1\\overline{6} -> 1/6: the digits before the period, then the period repeated forever."""
    shift = 10 ** len(fixed)
    return (int(integer or 0) + Fraction(int(fixed or 0), shift)
            + Fraction(int(period), (10 ** len(period) - 1) * shift))


def expand_repeating(latex: str) -> str:
    """Every repeating decimal in `latex` as the fraction it denotes ('0.\\overline{3}' -> '\\frac{1}{3}'), for
    math-verify, which cannot read \\overline."""
    def fraction(match: re.Match) -> str:
        value = repeating_value(match.group(1), match.group(2), match.group(3) or match.group(4))
        return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
    return REPEATING.sub(fraction, latex)


def terminates(value: Fraction) -> bool:
    """Whether `value` has a finite decimal expansion (its denominator has no prime factors but 2 and 5)."""
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    return denominator == 1


def machine_rounding(decimal: str, exact: Fraction) -> bool:
    """Whether `decimal` is `exact` (a fraction without a finite decimal expansion) printed at double precision:
    at least MACHINE_DIGITS significant digits, within one unit of its last digit (see the module docstring)."""
    match = _DECIMAL.fullmatch(decimal.strip())
    if match is None or terminates(exact):
        return False
    if len((match.group(1) + match.group(2)).lstrip("0")) < MACHINE_DIGITS:
        return False
    return abs(Fraction(decimal.strip()) - exact) < Fraction(1, 10 ** len(match.group(2)))
