"""Bounds of the verifiers pinned at their exact edge (mutation survivors of a fresh draw)."""
from __future__ import annotations

import pytest

from rlvr.verifiers.code.check_program import MAX_CHECK_BYTES, parse_check
from rlvr.verifiers.code.evaluate import BadReference
from rlvr.verifiers.math.around import box_problem
from rlvr.verifiers.math.numbers import last_number
from rlvr.verifiers.math.units import _stem


def test_a_check_program_may_be_exactly_256_kib_and_no_more():
    # 256 << 10 = 262,144 bytes: the program below padded by a comment to exactly that many bytes parses; one more
    # byte is refused with the bound in the message
    head = "def check(candidate):\n    assert candidate(1) == 1\n#"
    exact = head + "x" * (262_144 - len(head))
    assert MAX_CHECK_BYTES == 262_144 and len(exact.encode()) == 262_144
    assert parse_check(exact, "f") is not None
    with pytest.raises(BadReference, match="up to 262144 bytes"):
        parse_check(exact + "x", "f")


def test_stem_gives_the_singular_of_a_noun():
    # -es after a sibilant drops two letters (boxes -> box, churches -> church), a plain -s one, -ss none; the
    # case and a trailing full stop go
    words = ("Apples", "boxes", "churches", "buses", "glass", "units.", "gas")
    assert [_stem(w) for w in words] == ["apple", "box", "church", "bus", "glass", "unit", "gas"]


def test_a_sign_before_an_answer_block_is_seen_up_to_40_characters_back():
    # '= - <answer>3</answer>' is -3, not 3. The sign is looked for in the 40 characters before the block (bounded,
    # so linear): here '=' sits exactly 40 characters before '<answer>' (37 spaces between '=' and '- '), so the
    # block is part of an expression; one space more puts '=' at 41, outside the window, and the block is read
    def around(spaces: int) -> str | None:
        text = "x =" + " " * spaces + "- <answer>3</answer>"
        start, end = text.index("<answer>"), text.index("</answer>") + len("</answer>")
        return box_problem(text, start, end, tag=True, value="3")[0]

    assert around(37) == "the answer block is part of an expression (a sign before it)"
    assert around(38) is None


def test_a_unit_glued_to_the_last_number_keeps_it_and_a_glued_magnitude_changes_it():
    # '5cm' is 5 (a unit, written without a space); '5k' is 5,000 and 'it is 5M' 5,000,000: the bare 5 is no answer
    assert last_number("The rope is 5cm long") == "5"
    assert last_number("so 12apples") == "12"
    assert last_number("it is 5k") is None and last_number("it is 5M") is None


def test_ordinals_in_th_name_their_denominator_through_their_stems():
    # '-fth', '-ghth', '-nth', '-lfth' ordinals are written on a changed stem: twenty-fifth -> twenty-five (25),
    # twenty-eighth -> 28, twenty-ninth -> 29; sixteenth -> 16; thirtieth (-ieth) -> thirty -> 30;
    # a word that names 1 ("oneth") is no denominator
    from rlvr.verifiers.math.numerals import denominator
    words = ("twenty-fifths", "twenty-eighths", "twenty-ninth", "sixteenths", "thirtieths", "oneth", "nth")
    assert [denominator(w) for w in words] == [25, 28, 29, 16, 30, None, None]
