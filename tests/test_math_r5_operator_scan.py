"""The scan for constructs math-verify cannot read (rlvr/verifiers/math/operators.py, _unknown), pinned where a
wider mutation draw over an earlier change's lines found its branches unchecked: every construct of an
answer is looked at, not only those before the first known one; a known symbol outside ASCII, a known command and
degrees are passed over, and only a construct with something on both sides is reported."""
from __future__ import annotations

import pytest

from rlvr.verifiers.math.operators import _unknown


@pytest.mark.parametrize("answer,found", [
    ("3 × 4", []),  # a symbol math-verify reads (outside ASCII: the scan's fourth group)
    ("3 α 4", []),  # a letter of another script
    ("3 ★ 4", ["★"]),  # a symbol it drops
    ("3 × 4 ★ 5", ["★"]),  # the scan goes on past a known symbol
    ("3 \\times 4 \\star 5", ["\\star"]),  # ... and past a known command
    ("3 ? 4", ["?"]), ("3 @ 4", ["@"]), ("3 \\# 4", ["\\#"]),
    ("\\star 4", []), ("4 \\star", []),  # nothing on one side: no side is read for the whole
    ("3 \\circ 4", ["\\circ"]),  # composition, or a typo: not degrees
    ("30^\\circ F", []),  # degrees, even with a word after them
    ("^\\circ 5", []),  # degrees at the very start of the answer (the look-back window starts at 0)
    ("30^\\circ + 3 \\star 4", ["\\star"]),  # the scan goes on past degrees
])
def test_what_the_scan_reports(answer, found):
    assert _unknown(answer) == found
