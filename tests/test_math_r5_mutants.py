"""Pins the lines one change added where a mutation sample (bench/mutate_change.py over
the change) found them unchecked: each test below fails with one of those mutants and passes without it. Grouped
by module of rlvr/verifiers/math/; rows are hand-labelled (completion, reference, outcome, detail phrase, modes) as
in tests/math_cases.py, and unit tests of a helper give the expected value worked by hand in a comment.
One bug found on the way (displayed.py): a framed box with '$' after it on its line ('$\\framebox{3}$') skipped the
next-line rule a plain box keeps ('$\\boxed{3}$\\n\\n6' is a hedge), because its statement claimed its line ended at
the box's brace; it now ends its line as a box does.
"""
from __future__ import annotations

from fractions import Fraction

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.arith import arithmetic
from rlvr.verifiers.math.displayed import same
from rlvr.verifiers.math.forms import bracket_kind
from rlvr.verifiers.math.hidden import fenced, unhidden
from rlvr.verifiers.math.operators import binomials
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL = MODES
FALLBACK = ("last_number", "latex")


# ---------------------------------------------------------------- arith.py
def test_arithmetic_reads_minus_and_division_exactly():
    assert arithmetic("5 - 2") == 3  # a '-' subtracts: 5 - 2, never 5 + 2
    assert arithmetic("12 + 22 - 4") == 30
    assert arithmetic("6 / 3") == 2  # '/' divides: 6 / 3, never 6 * 3
    assert arithmetic("6 ÷ 4") == Fraction(3, 2)
    assert arithmetic("6 \\div 3 \\times 4") == 8  # (6 / 3) * 4
    assert arithmetic("3 × 4 - 1") == 11


def test_arithmetic_is_none_for_a_dangling_operator_or_bad_numbers():
    assert arithmetic("5 *") is None  # two tokens: an operator with nothing after it is no expression
    assert arithmetic("5 \\times") is None
    assert arithmetic("* 5") is None  # Fraction('*') raises ValueError: caught, no value
    assert arithmetic("1 / 0") is None  # ZeroDivisionError: caught, no value
    assert arithmetic("5 +") is None  # TypeError (sign * None): caught, no value
    assert arithmetic("") is None


RESTATED = [  # a parenthesis of arithmetic that gives the value restates it and is dropped (around.value_end)
    ("Answer: 3 (5 - 2)", "3", C, "extracted 3", ALL),
    ("Answer: 2 (6 / 3)", "2", C, "extracted 2", ALL),
    ("Answer: 2 (6 \\div 3)", "2", C, "extracted 2", ALL),
    # a pointer to the work ending in a period inside the parenthesis is dropped too ('see step 3.')
    ("Answer: 5 (see step 3.)", "5", C, "extracted 5", ALL),
    ("Answer: 5 (see eq. 2 )", "5", C, "extracted 5", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(RESTATED))
def test_a_parenthesis_restating_the_value_or_pointing_to_work_is_dropped(verifiers, mode, completion, reference,
                                                                          outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


# ---------------------------------------------------------------- around.py: 'not 4 or 6' reads 24 characters back
# _NOT_EITHER is searched in the 24 characters before the hedge word. 'not $1,000,000,000,000$ ' is 4 + 19 + 1 = 24
# characters: its 'not' starts exactly 24 before 'or', so both values are rejected; one more space puts 'not' 25
# before, out of reach, and 'or 6' offers another value.
NOT_EITHER = [
    ("\\boxed{5}, so it's not $1,000,000,000,000$ or 6", "5", C, "extracted 5", ALL),
    ("\\boxed{5}, so it's not $1,000,000,000,000$  or 6", "5", W, "hedged", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(NOT_EITHER))
def test_not_before_or_rejects_both_values_within_24_characters(verifiers, mode, completion, reference, outcome,
                                                                detail):
    check(verifiers, mode, completion, reference, outcome, detail)


# ---------------------------------------------------------------- displayed.py
DISPLAYED = [
    # a display holding a relation checks work: it states nothing, and the display after it is still read
    ("\\boxed{4}\n\n\\[3 + 3 = 6\\]", "4", C, "extracted 4", ALL),
    ("\\boxed{4}\n\n\\[1 + 2 = 3\\]\n\n\\[5\\]", "5", C, "extracted 5", ALL),
    ("\\boxed{4}\n\n\\[1 + 2 = 3\\]\n\n\\[5\\]", "4", W, "extracted 5", ALL),
    # a framed box is a box: a bare value on a line below it is a hedge, '$' after it or not (the bug fixed here)
    *[(f"\\boxed{{4}}\n\n{framed}\n\n6", ref, W, "another value on the next line", ALL)
      for framed in ("$\\framebox{3}$", "\\framebox{3}", "$\\boxed{3}$") for ref in ("3", "6")],
    # a display restating the answer by another name changes nothing
    ("\\boxed{\\pi}\n\n\\[2\\pi\\]", "2\\pi", C, "", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(DISPLAYED))
def test_a_framed_box_or_display_after_the_answer_is_read_as_a_box(verifiers, mode, completion, reference, outcome,
                                                                   detail):
    check(verifiers, mode, completion, reference, outcome, detail)


def test_same_is_the_same_text_or_the_same_number():
    assert same("3", "3") and same("x", "x")  # the same text
    assert same("0.5", "\\frac{1}{2}") and same("3.0", "3")  # the same number, written differently
    assert not same("\\pi", "2\\pi")  # no number on either side, different text: two values
    assert not same("x", "y") and not same("3", "4")


# ---------------------------------------------------------------- extract.py: 'It is 5 and not 6.' states 5
AND_NOT = [
    # the only environment comes after 'and not': it is kept (and negated), there is nothing else to state
    ("It is f(x) and not $6$.", "6", U, "the final number is negated", ("latex",)),
    # the number before 'and not' is read when it stands at the start of the text
    ("5 and not 6.", "5", C, "extracted 5", FALLBACK),
    ("5 and not 6.", "6", W, "extracted 5", FALLBACK),
    ("5, not 6 -- the larger count is wrong.", "5", U, "retracted", FALLBACK),  # what follows 5 is read, not 5 itself
    # '5 and not' read 40 characters back at most: with the 5 exactly 41 characters before the 6 it is out of reach
    ("It is 5 and not" + " " * 32 + "6.", "5", W, "negation", ("last_number",)),
    ("It is 5 and not" + " " * 31 + "6.", "5", C, "extracted 5", ("last_number",)),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(AND_NOT))
def test_a_value_before_and_not_is_the_answer(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


# ---------------------------------------------------------------- forms.py
def test_bracket_kind_counts_items_outside_inner_brackets():
    assert bracket_kind("\\{(1, 2), 3\\}") == "set"  # '(1, 2)' then ', 3': a comma at depth 0, two items
    assert bracket_kind("\\{(1, 2)\\}") is None  # its only comma is inside '(...)': one item
    assert bracket_kind("\\{3\\}") is None  # no comma at all: one item
    assert bracket_kind("\\{[1, 2], [3, 4]\\}") == "set"


# ---------------------------------------------------------------- hidden.py
HIDDEN = [
    # a comment or a fence at the very start of the text hides its statement as anywhere else
    ("<!-- \\boxed{4} -->\nThe answer is 3.", "3", C, "extracted 3", ALL),
    ("<!-- \\boxed{4} -->\nThe answer is 3.", "4", W, "extracted 3", ALL),
    ("```\n\\boxed{4}\n```\nThe answer is 3.", "3", C, "extracted 3", ALL),
    # every fenced block is read, not only the first
    ("The answer is 3.\n```\nx = 1\n```\n```\n\\boxed{4}\n```", "3", C, "extracted 3", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HIDDEN))
def test_comments_and_fences_at_the_start_or_repeated_hide_statements(verifiers, mode, completion, reference,
                                                                      outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


def test_fenced_and_unhidden_by_hand():
    # 'x\n' then '```\na\n```' at 2..11, '\ny\n', '```\nb\n```' at 14..23
    assert fenced("x\n```\na\n```\ny\n```\nb\n```") == [(2, 11), (14, 23)]
    assert fenced("```\na\n```") == [(0, 9)]  # a fence at index 0
    assert fenced("x ```\na") == [(2, 7)]  # unclosed: runs to the end
    assert unhidden("<!-- 4 -->3") == "3"  # a comment at index 0
    assert unhidden("3<!-- 4") == "3"  # unclosed: hides the rest


# ---------------------------------------------------------------- operators.py
def test_binomials_takes_the_whole_group_after_choose():
    # '{n \\choose {k} + 1}': the group after \\choose is '{k} + 1' (the inner '{k}' opens and closes inside it)
    assert binomials("{n \\choose {k} + 1}") == "{\\binom{n}{{k} + 1}}"
    assert binomials("{n \\choose k}") == "{\\binom{n}{k}}"  # the group ends at its own '}'
    assert binomials("{n \\choose k} + 1") == "{\\binom{n}{k}} + 1"  # ... and what follows it stays outside
    assert binomials("{n \\choose {k}} + 1") == "{\\binom{n}{{k}}} + 1"


# ---------------------------------------------------------------- trailers.py (a second sample, over its own commit)
# one_sentence reads the first statement as written (its raw text, emphasis and delimiters kept), where the
# correcting word sits; offered_after needs the sentence that opens with another value to offer it (a case or an
# endorsement), not only to hold another number.
TRAILERS = [
    ("The answer is **3**, wait, the answer is 4.", "4", C, "", ALL),
    ("Answer: 3, sorry, Answer: 4", "4", C, "", ALL),
    ("The answer is $3$ (oops), the answer is 4.", "4", C, "", ALL),
    ("\\boxed{4}\n\n3 of the 7 boxes are red.", "4", C, "", ALL),  # an explanation after the answer, no offer
    ("\\boxed{4}\n\n3 of the 7 boxes would also work.", "4", W, "hedged", ALL),  # the same opening, endorsed
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(TRAILERS))
def test_a_corrected_first_statement_or_an_unendorsed_later_value_is_no_hedge(verifiers, mode, completion, reference,
                                                                              outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


# ---------------------------------------------------------------- corrections.py, denials.py (the wider sample of the
# earlier change's lines). A sentence opener with no sentence start in the 200 characters before it is mid-sentence
# (no correction); a value restated against the answer is read from the last sentence start within 120 characters;
# only fillers may stand before it; an opener skipped (here: inside a code fence) does not end the search. One bug:
# a restatement's line ended at its match, so a value on a line below it was not seen ('Not 5 but 6.\n\n**7**' paid 6).
CORRECTIONS = [
    ("\\boxed{5}" + " " * 200 + "No, 6.", "6", C, "", ALL),
    ("\\boxed{5}" + " " * 201 + "No, 6.", "6", W, "", ALL),  # 201 characters: no sentence start, mid-sentence
    ("\\boxed{5};" + " " * 115 + "It's 6, not 5.", "6", C, "", ALL),  # ';' lies 121 characters back: not read
    ("\\boxed{5}\n\nShe said it's 6, not 5.", "5", C, "", ALL),  # 'She said' is no filler: a report, no restatement
    ("\\boxed{5}\n\n```\nWait, it's 4.\n```\nWait, it's 6.", "6", C, "", ALL),
    ("\\boxed{5}\n\nNot 5 but 6.\n\n**7**", "6", W, "hedged", ALL),
    ("\\boxed{5}\n\nNot 5 but 6$.\n\n7", "6", W, "hedged", ALL),
    ("\\boxed{5}\n\nNot 5 but 6.", "6", C, "", ALL),
    # a value inside a parenthesis of the statement does not end the search for a denial after it
    ("Answer: (2+3) 5 👎", "5", U, "", ALL),
    ("Answer: 5 (2 + 3) ✖", "5", U, "", ALL),
    ("\\boxed{(2+3) 5} is a red herring.", "5", U, "", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(CORRECTIONS))
def test_correction_windows_fillers_fences_and_denials_after_a_parenthesis(verifiers, mode, completion, reference,
                                                                           outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


# ---------------------------------------------------------------- a second sample over the merged round: a value
# restated in a parenthesis keeps every digit; two framed values after the answer are a hedge (they paid the last:
# a bug, fixed); a framed value is read as a correction; 'and not' is looked for within 40 characters of the value.
SECOND = [
    ("\\boxed{4} (I mean 12)", "12", C, "", ALL),
    ("\\boxed{4}\n\n\\framebox{3} or \\framebox{5}", "5", W, "hedged", ALL),
    ("\\boxed{4}\n\n\\framebox{3} \\framebox{5}", "3", W, "hedged", ALL),
    ("\\boxed{4}\n\n\\framebox{3}\n\n\\framebox{4}", "4", W, "hedged", ALL),
    ("\\boxed{4}\n\n\\framebox{3}\n\n\\framebox{3}", "3", C, "", ALL),  # the same value twice offers one
    ("It is $5$" + " " * 30 + "and not $6$.", "5", C, "", ("latex",)),
    ("It is $5$" + " " * 40 + "and not $6$.", "5", U, "negated", ("latex",)),  # 'and not' begins 41 back: unread
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(SECOND))
def test_restated_digits_framed_hedges_and_the_and_not_window(verifiers, mode, completion, reference, outcome,
                                                                detail):
    check(verifiers, mode, completion, reference, outcome, detail)


def test_a_framed_value_after_the_answer_is_read_as_a_correction():
    from rlvr.verifiers.math.extract import final_answer
    assert final_answer("\\boxed{4}\n\n\\framebox{3}", "latex").kind == "correction"


# ---------------------------------------------------------------- a third sample (the merged rounds at 20 a file):
# a restatement corrects the answer only when what it rejects is the answer; empty and back-to-back fences; a
# membership test charges only a container searched for in a list.
def test_a_restatement_rejecting_another_value_is_no_correction(verifiers):
    # '6, not 7' does not correct 5: 6 is not read as the answer (it would be for "It's 6, not 5.")
    for mode in MODES:
        assert verifiers[mode].verify("\\boxed{5}. It's 6, not 7.", "6").outcome is W
        assert verifiers[mode].verify("\\boxed{5}. It's 6, not 5.", "6").outcome is C


def test_fences_closed_at_once_or_opened_again_at_once():
    # '``````x': a fence closed by the very next three backticks spans 0..6; '```a``````b```': the second fence
    # opens where the first closes (7) and closes at 11, so it spans 7..14 (not an unclosed one from 11)
    assert fenced("``````x") == [(0, 6)]
    assert fenced("```a``````b```") == [(0, 7), (7, 14)]


def test_a_membership_test_is_charged_only_for_a_container_in_a_sequence(monkeypatch):
    from rlvr.verifiers.code import decimals
    charged: list[float] = []
    monkeypatch.setattr(decimals, "check", charged.append)
    decimals.member_bound(5, list(range(5000)))  # a number found by ==, in C: no charge
    decimals.member_bound([5], {1: 2})  # a dict finds by hash: no charge
    assert charged == []
    # a list of 1 item searched in 5,000 one-item lists: 5,000 + 5,000 (their items) + 5,000 * (2 - 1) = 15,000,
    # over FREE_WEIGHT (4,096): charged 15,000 * SCAN_S
    decimals.member_bound([5], [[i] for i in range(5000)])
    assert charged == [pytest.approx(15_000 * decimals.SCAN_S)]
