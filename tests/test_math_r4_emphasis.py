"""Markdown emphasis opened ways around refusals
('Answer: **4** **2**' paid 2 while 'Answer: 4 2' is WRONG). Emphasis now reads as the text without it, for refusals
too. Decision: rlvr/verifiers/math/emphasis.py. Corpus rows: form 'emphasis_refusal'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL = MODES

EMPHASIS = [
    # the adversarial completions: each is refused as the same text without emphasis is
    ("Answer: **4** **2**", "2", W, "", ALL), ("Answer: **4** **2**", "4", W, "", ALL),
    ("Answer: 4 2", "2", W, "", ALL),
    ("The answer is **2** **\\boxed{4}**", "4", W, "", ALL),
    ("The answer is **twice** \\boxed{4}", "4", W, "", ALL),
    ("The answer is **not** \\boxed{4}", "4", W, "", ALL),
    ("Answer: − **4**", "4", W, "", ALL), ("Answer: − 4", "4", W, "", ALL),
    ("Answer: 42 **is false**", "42", U, "retracted", ALL),
    ("Answer: **4**!", "4", W, "", ALL), ("Answer: __4__ __2__", "2", W, "", ALL),
    ("The answer is ***not*** \\boxed{4}", "4", W, "", ALL),
    # honest: emphasis around the value or the marker still reads the value
    ("Answer: **42**", "42", C, "", ALL), ("**Final Answer:** \\boxed{42}", "42", C, "", ALL),
    ("The final answer is **\\boxed{42}**.", "42", C, "", ALL), ("Answer: ***42***", "42", C, "", ALL),
    ("Answer: **− 4**", "-4", C, "", ALL), ("The answer is **4**, not 2.", "4", C, "", ALL),
    ("Answer: <b>42</b>", "42", C, "", ALL), ("Answer: <strong>42</strong>", "42", C, "", ALL),
    ("The answer is <b>not</b> \\boxed{4}", "4", W, "", ALL),
    # a power stays a power: nothing closes the '**'
    ("\\boxed{5}**2", "5", W, "", ALL), ("2**\\boxed{5}", "5", W, "", ALL), ("**\\boxed{5}**2", "5", W, "", ALL),
]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail", cases(EMPHASIS))
def test_emphasis_opens_no_way_around_a_refusal(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
