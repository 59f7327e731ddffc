"""A relation with nothing on its left states no value. Adversarial completions got past the check with what stood
before the relation (a brace, a thin space, a parenthesis, an '=' whose right side opens with another relation) and
with relations the list lacked ('!=', '=/=', '≃', '≅', '\\simeq', '\\cong', '\\nsim'). Decision:
rlvr/verifiers/math/relations.py. Corpus rows: form 'relation_prefix'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W = Outcome.CORRECT, Outcome.WRONG
ALL = MODES
REL = "a relation"

RELATIONS = [
    # adversarial completions (each paid 1 in every mode before)
    ("Answer: != 5", "5", W, REL, ALL), ("Answer: =/= 5", "5", W, REL, ALL), ("Answer: /= 5", "5", W, REL, ALL),
    ("Answer: ≃ 5", "5", W, REL, ALL), ("Answer: ≅ 5", "5", W, REL, ALL),
    ("Answer: $\\simeq 5$", "5", W, REL, ALL), ("Answer: $\\cong 5$", "5", W, REL, ALL),
    ("\\boxed{{\\neq} 5}", "5", W, REL, ALL), ("\\boxed{{}\\neq 5}", "5", W, REL, ALL),
    ("\\boxed{\\,\\neq 5}", "5", W, REL, ALL), ("\\boxed{\\; \\ge 5}", "5", W, REL, ALL),
    ("\\boxed{\\quad \\ge 5}", "5", W, REL, ALL), ("\\boxed{\\displaystyle \\ge 5}", "5", W, REL, ALL),
    ("\\boxed{\\left. \\ge 5\\right.}", "5", W, REL, ALL), ("\\boxed{{\\geq 5}}", "5", W, REL, ALL),
    ("\\boxed{(\\geq 5)}", "5", W, REL, ALL), ("\\boxed{\\nsim 5}", "5", W, REL, ALL),
    ("\\boxed{\\nequiv 5}", "5", W, REL, ALL), ("\\boxed{= \\neq 5}", "5", W, REL, ALL),
    ("\\boxed{= \\ge 5}", "5", W, REL, ALL), ("\\boxed{x = \\ne 5}", "5", W, REL, ALL),
    ("\\boxed{:\\ge 5}", "5", W, REL, ALL), ("\\boxed{\\equiv \\ge 5}", "5", W, REL, ALL),
    ("Answer: `!= 42`", "42", W, REL, ALL), ("\\boxed{\\mathrm{\\geq} 5}", "5", W, "", ALL),
    ("\\boxed{\\text{ } \\geq 5}", "5", W, REL, ALL), ("\\boxed{[\\geq 5]}", "5", W, REL, ALL),
    # honest: '=' (and ':=', '\\equiv') asserts the value; a relation with a left side is read as before
    ("\\boxed{= 5}", "5", C, "", ALL), ("Answer: = 5", "5", C, "", ALL), ("\\boxed{x = 5}", "5", C, "", ALL),
    ("\\boxed{{5}}", "5", C, "", ALL), ("\\boxed{\\,5}", "5", C, "", ALL), ("\\boxed{(5)}", "5", C, "", ALL),
    ("\\boxed{\\displaystyle \\frac{1}{2}}", "\\frac12", C, "", ALL), ("\\boxed{x := 5}", "5", C, "", ALL),
    ("Since 4 \\neq 5, the answer is \\boxed{5}.", "5", C, "", ALL),
    ("\\boxed{x \\geq 5}", "x \\geq 5", C, "", ALL), ("\\boxed{[0, 5)}", "[0, 5)", C, "", ALL),
    # a reference that opens with the same relation is compared as written
    ("\\boxed{\\geq 5}", "\\geq 5", C, "", ALL), ("\\boxed{{\\geq} 5}", "\\geq 5", C, "", ALL),
    ("\\boxed{\\simeq 5}", "\\simeq 5", C, "", ALL), ("\\boxed{\\simeq 5}", "\\geq 5", W, REL, ALL),
]


@pytest.mark.parametrize("mode, completion, reference, outcome, detail", cases(RELATIONS))
def test_a_relation_with_nothing_on_its_left_states_no_value(verifiers, mode, completion, reference, outcome,
                                                             detail):
    check(verifiers, mode, completion, reference, outcome, detail)
