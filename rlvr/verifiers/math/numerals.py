"""Whole numbers and fraction denominators written in words ('twenty-one', 'one hundred and five', 'fifths',
'sixteenth'), with no other module of the math verifier below them: words.py reads mixed numbers and counts with
them, forms.py asks whether a word after a number names a fraction."""
from __future__ import annotations

_ONES = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_DENOMINATORS = {"half": 2, "halves": 2, "third": 3, "quarter": 4, "fourth": 4, "fifth": 5, "sixth": 6,
                 "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "hundredth": 100,
                 "thousandth": 1000, "millionth": 10**6}
def denominator(word: str) -> int | None:
    """The denominator a fraction word names ('fifths' -> 5, 'half' -> 2), else None."""
    word = word.lower()
    for form in (word, word.removesuffix("s")):
        if form in _DENOMINATORS:
            return _DENOMINATORS[form]
    return _ordinal(word.removesuffix("s"))


_ORDINAL_STEMS = {"fif": "five", "eigh": "eight", "nin": "nine", "twelf": "twelve"}


def _ordinal(word: str) -> int | None:
    """The number an ordinal in '-th' names ('sixteenth' -> 16, 'twentieth' -> 20, 'hundred-thousandth'): any such
    word is a denominator (before, '5 sixteenths' was read as 5, as the table lacked it)."""
    if not word.endswith("th") or len(word) > 40:
        return None
    stem = word[:-2]
    stem = stem[:-2] + "y" if stem.endswith("ie") else stem  # 'twentieth' -> 'twenty'
    for tail, whole in _ORDINAL_STEMS.items():
        if stem.endswith(tail):
            stem = stem[:-len(tail)] + whole
            break
    value = cardinal(stem.replace("-", " "))
    return value if value and value > 1 else None


def cardinal(text: str) -> int | None:
    """A whole number written in words ('twenty-one', 'one hundred and five'); None for anything else."""
    words = text.lower().replace("-", " ").split()
    total, group, last, cap = 0, 0, "", 10**15
    for i, word in enumerate(words):
        if word == "and" and last in ("hundred", "scale") and i + 1 < len(words):
            continue
        if word in ("a", "an") and i == 0 and len(words) > 1:
            group, last = 1, "a"
        elif word in _ONES and (last in ("", "hundred", "scale") or (last == "tens" and 0 < _ONES[word] < 10)):
            group, last = group + _ONES[word], "ones"
        elif word in _TENS and last in ("", "hundred", "scale"):
            group, last = group + _TENS[word], "tens"
        elif word == "hundred" and last in ("ones", "tens", "a") and 0 < group < 100:  # 'twelve hundred'
            group, last = group * 100, "hundred"
        elif word in _SCALES and last not in ("", "scale") and group and _SCALES[word] < cap:
            total, group, last, cap = total + group * _SCALES[word], 0, "scale", _SCALES[word]
        else:
            return None
    return None if last in ("", "a") else total + group
