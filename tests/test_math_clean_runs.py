"""latex._runs and latex._dollar_sign, rewritten for speed (a CI failure on 1 MB completions), against the
definitions they replaced: a loop stripping one space or one two-character wrapper at a time from each end, and a '$'
that is the only one in the span, right after a digit."""
from __future__ import annotations

import itertools

import pytest

from rlvr.verifiers.math.latex import _dollar_sign, _runs

PAIRS = ("**", "__", "\\(", "\\)", "\\[", "\\]")


def stripped_one_at_a_time(text: str, start: int, end: int, wrappers: bool) -> tuple[int, int]:
    while start < end and (text[start].isspace() or (wrappers and text.startswith(PAIRS, start, end))):
        start += 1 if text[start].isspace() else 2
    while end > start and (text[end - 1].isspace() or (wrappers and text.endswith(PAIRS, start, end))):
        end -= 1 if text[end - 1].isspace() else 2
    return start, end


def test_runs_equal_the_loop_on_every_short_string():
    # every string of up to 5 characters over wrapper halves, spaces (a no-break one too) and a digit, every span:
    # 9**5 strings; a mutant of the fast path (text[end - 2], 'or' for 'and', a dropped 'not') or of the reversed
    # match (step -2) differs on some of them
    alphabet = "*_\\()[] \u00a01"
    checked = 0
    for size in range(6):
        for chars in itertools.product(alphabet, repeat=size):
            text = "".join(chars)
            for start, end in ((0, size), (min(1, size), size), (0, max(size - 1, 0))):
                for wrappers in (True, False):
                    assert _runs(text, start, end, wrappers) == stripped_one_at_a_time(text, start, end, wrappers), \
                        (text, start, end, wrappers)
                    checked += 1
    assert checked > 300_000


@pytest.mark.parametrize("text, start, end, sign", [
    ("18\\$", 0, 4, True),      # an escaped dollar after the number
    ("2,74 $", 0, 6, True),     # the only '$', after a digit and a space
    ("$5$", 0, 3, False),       # two '$' in the span: delimiters
    ("$5$ 7 $", 3, 7, True),    # '$' before the span are not counted: one in ' 7 $'
    ("5 $ $", 0, 5, False),     # two in the span
    ("a $", 0, 3, False),       # after a word, not a number
    ("$$5 $", 2, 5, True),      # the '$$' before the span are outside it
    ("5 $ $$", 0, 3, True),     # and the '$$' after it
])
def test_a_dollar_sign_is_the_spans_only_dollar_after_a_number(text, start, end, sign):
    assert _dollar_sign(text, start, end, text.count("$")) is sign
