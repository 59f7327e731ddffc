"""Mutation survivors: edges of the math verifier's string helpers that no test pinned.

Each section names the helper it holds in place (rlvr/verifiers/math/*.py); expected values are worked out by hand from
the helper's docstring, as each comment says.
"""
from __future__ import annotations

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.math.boxes import MAX_ANSWER_CHARS, cut
from rlvr.verifiers.math.extract import FinalAnswer, final_answer
from rlvr.verifiers.math.forms import changes_count, counted_value
from rlvr.verifiers.math.hedges import MAX_DISTINCT_ANSWERS, hedge_problem
from rlvr.verifiers.math.latex import split_equals
from rlvr.verifiers.math.numbers import number_before
from rlvr.verifiers.math.verifier import MathVerifier
from rlvr.verifiers.math.words import value_word


# ---------------------------------------------------------------- boxes.cut: an over-long span
def test_an_over_long_span_is_cut_at_one_past_the_limit_uncleaned():
    # cut's docstring: a span longer than MAX_ANSWER_CHARS comes back uncleaned, MAX_ANSWER_CHARS + 1 characters
    # long, so the caller sees "too long" (> MAX_ANSWER_CHARS) while copying no more than that.
    text = "$" + "7" * (MAX_ANSWER_CHARS + 500) + "$"
    over = cut(text, 0, len(text))
    assert over == text[:MAX_ANSWER_CHARS + 1]  # '$' kept (uncleaned), then 2000 sevens
    assert len(over) == MAX_ANSWER_CHARS + 1
    # one character over the limit is already over-long: 2001 characters, the '$' wrappers kept
    edge = "$" + "7" * (MAX_ANSWER_CHARS - 1) + "$"
    assert cut(edge, 0, len(edge)) == edge[:MAX_ANSWER_CHARS + 1] and edge.startswith("$")


def test_a_span_of_exactly_the_limit_is_cleaned():
    # end - start == MAX_ANSWER_CHARS is not over the limit: the '$' pair is stripped as for any answer
    text = "$" + "7" * (MAX_ANSWER_CHARS - 2) + "$"
    assert cut(text, 0, len(text)) == "7" * (MAX_ANSWER_CHARS - 2)


# ---------------------------------------------------------------- forms.changes_count: '-es' plurals
@pytest.mark.parametrize("word", ["minuses", "pluses", "grosses", "Minuses"])
def test_an_es_plural_after_a_sibilant_reads_as_its_singular(word):
    # 'minus', 'plus' and 'gross' are VALUE_WORDS; their plurals end in 'ses' (a sibilant), so word[:-2] is the
    # singular ('minuses' -> 'minus'); removesuffix('s') gives 'minuse', which is no word of the set.
    assert changes_count(word)
    assert counted_value(f"17 {word}") is None  # '17 minuses' does not state 17


@pytest.mark.parametrize("answer, value", [("17 boxes", "17"), ("3 dishes", "3"), ("4 churches", "4"),
                                          ("5 miles", "5"), ("6 buses", "6")])
def test_an_es_plural_of_a_plain_noun_is_still_a_count(answer, value):
    # 'box', 'dish', 'church', 'bus' and 'mile' are not in _NOT_A_COUNT: the singular read by the sibilant rule
    # ('boxes' -> 'box') or by removesuffix ('miles' -> 'mile', never 'mil') keeps the count
    assert counted_value(answer) == value


# ---------------------------------------------------------------- hedges.hedge_problem: a joined run counts once
LIST_OF_BOXES = "Answer: 7\n\nAnswer: 8\n\nThe answer is \\boxed{1} and \\boxed{2}"


def test_a_joined_list_counts_as_one_answer_in_the_spam_check():
    # recent = 7, 8, 1, 2; the final run (1, 2) is one list answer '1, 2' for a reference listing two values, so the
    # spam check counts 7, 8 and '1, 2': 3 distinct, not more than MAX_DISTINCT_ANSWERS. Counting the run's
    # members besides the joined answer would make 5 and call it spam.
    final = final_answer(LIST_OF_BOXES)
    assert final.recent == ("7", "8", "1", "2") and final.run == ("1", "2") and final.listed
    assert MAX_DISTINCT_ANSWERS == 3
    assert hedge_problem(final, "1, 2") is None
    verdict = MathVerifier("strict").verify(LIST_OF_BOXES, "1, 2")
    assert verdict.outcome is Outcome.CORRECT, verdict


def test_a_joined_list_after_three_other_answers_is_spam():
    # the neighbour: 6, 7, 8 and the list '1, 2' are 4 distinct answers, more than 3
    final = FinalAnswer("2", "boxed", ("6", "7", "8", "1", "2"), ("1", "2"), listed=True, line=("1", "2"))
    assert "answer spam" in hedge_problem(final, "1, 2")
    # only the run's own entries (the last len(run) of recent) give way to the joined answer
    final = FinalAnswer("2", "boxed", ("5", "5", "1", "2"), ("1", "2"), listed=True, line=("1", "2"))
    assert hedge_problem(final, "1, 2") is None  # 5 and '1, 2': 2 distinct


# ---------------------------------------------------------------- latex.split_equals: comparisons are no '='
@pytest.mark.parametrize("answer", ["x <= 5", "x >= 5", "x != 5", "a \\= b", "x<=5"])
def test_an_equals_sign_after_a_comparison_or_backslash_is_not_a_cut(answer):
    # the '=' of '<=', '>=', '!=' and '\\=' is part of another relation: the character before it (at - 1) is one of
    # '<>!\\', so the answer stays one side
    assert split_equals(answer) == [answer]


@pytest.mark.parametrize("answer, sides", [("=5", ["", "5"]), ("x = 5", ["x ", " 5"]), ("x=y=3", ["x", "y", "3"]),
                                           ("\\frac{a=b}{2} = 3", ["\\frac{a=b}{2} ", " 3"])])
def test_top_level_equals_signs_cut(answer, sides):
    # a leading '=' (at == 0) cuts before it; an '=' inside a group (its next brace closes one) does not
    assert split_equals(answer) == sides


# ---------------------------------------------------------------- numbers.number_before: from the start of the text
def test_the_number_before_finds_one_at_the_very_start():
    # 'It is 3 or 4' reads the number before 'or'; here it is the text's first character (index 0), which the
    # search window max(0, at - 200) must include: '5' ends at 1
    assert number_before("5 or 6", 2) == ("5", 1)
    assert number_before("12 or 6", 3) == ("12", 2)


def test_the_number_before_looks_back_200_characters_within_its_sentence():
    # at = 192: the '5' at 0 is 192 back, inside the window; at = 252 it is 252 back, outside (None)
    assert number_before("5" + " " * 190 + "or", 192) == ("5", 1)
    assert number_before("5" + " " * 250 + "or", 252) is None
    assert number_before("5. Then or", 9) is None  # a sentence break between: no number in its sentence


# ---------------------------------------------------------------- words.value_word: denominators
@pytest.mark.parametrize("word", ["fifths", "halves", "third", "Quarter.", "hundredths"])
def test_a_denominator_word_is_a_value_word(word):
    # 'fifths' names the denominator 5 (numerals._DENOMINATORS, plural read as singular); it is no ones, tens or scale
    # word, nor a magnitude, so only the denominator test makes it a value word
    assert value_word(word)


@pytest.mark.parametrize("word, expected", [("five", True), ("dozens", True), ("hundred", True), ("twenty", True),
                                            ("cat", False), ("answer", False)])
def test_value_words_and_prose(word, expected):
    assert value_word(word) is expected
