"""Bounds of the verifiers pinned at their exact edge (mutation survivors of a fresh draw, issue 43)."""
from __future__ import annotations

import pytest

from rlvr.verifiers.code.check_program import MAX_CHECK_BYTES, parse_check
from rlvr.verifiers.code.evaluate import BadReference
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
