"""Denials, rejections and guesses the earlier rules
missed. None may be paid; a value that is only doubted or guessed is WRONG (a qualifier, as 'Maybe \\boxed{4}?' and
'(probably)' are), one denied after it is UNPARSEABLE (retracted), one negated before it is WRONG. Decisions:
rlvr/verifiers/math/denials.py and doubts.py (called from extract._checked). Corpus rows: form 'r5_denial'.
- Denials after the box: 'Nah.' answering its question, 'is not it', "can't be right", 'is not the case', 'is flawed',
  'is an error', 'is a trap', 'is a red herring', '✖', '👎', a detached '— NOT.' or '... not.', a sentence 'FALSE.'.
- Negations before it: 'not, I repeat,' (an aside between commas), 'not\\hspace{1em}', 'not\\\\', a negation spelled
  with confusable letters ('nοt' with a Greek omicron, 'ñot', 'n o t'), a rejecting verb ('We reject', 'We can
  exclude', "Don't write", 'Avoid'), '\\cancel{\\boxed{4}}'. Named as naive or mistaken: 'The naive answer is', 'A
  common mistake gives', 'would be the naive answer' (rlvr.verifiers.math.hidden).
- Guesses and doubt: 'I guess', 'My guess:', 'Guess:', "I'm not sure, but", "I don't know." right before the box;
  '(unsure)', '(I think)', '(unverified)', ', I guess' after it; a question mark right after the box ('\\boxed{4}?',
  'Could the answer be \\boxed{4}?'), unless the question is answered 'Yes' or 'No doubt'. Judgement: a question mark
  after the final box is doubt, the same as 'Maybe \\boxed{4}?'.
"""
from __future__ import annotations

import pytest

from math_cases import cases, check
from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ALL = MODES
NEG, DENY, DOUBT = "negation", "retracted", "doubt"


DENIED = [(f"\\boxed{{4}}{tail}", "4", U, DENY, ALL) for tail in (
    "? Nah.", " is not it.", " can't be right.", " can’t be right.", " is not the case.", " is flawed.",
    " is an error.", " is a trap.", " is a red herring.", " ✖", " ✕", " 👎", " — NOT.", "... not.", ". FALSE.",
    " is definitely not it.")] + [
    ("Is it \\boxed{4}? Nah.", "4", U, DENY, ALL), ("The answer is \\boxed{4} — NOT.", "4", U, DENY, ALL),
    ("The answer is 4. FALSE.", "4", U, DENY, ALL), ("The answer is 4? False.", "4", U, DENY, ALL),
]
NEGATED = [(f"The answer is {before}\\boxed{{4}}", "4", W, NEG, ALL) for before in (
    "not, I repeat, ", "not, in my view, ", "not\\hspace{1em}", "not\\\\ ", "nοt ", "ñot ", "n o t ", "NОT ")] + [
    (f"{verb} \\boxed{{4}}.", "4", W, NEG, ALL) for verb in (
        "We reject", "We can exclude", "Don't write", "Do not write", "Avoid", "We rule out", "I reject")] + [
    ("The answer is $\\cancel{\\boxed{4}}$", "4", W, "struck", ALL),
    ("$\\xcancel{\\boxed{4}}$", "4", W, "struck", ALL), ("\\bcancel{\\boxed{4}}", "4", W, "struck", ALL),
    ("The naive answer is \\boxed{4}.", "4", U, "not the answer", ALL),
    ("A common mistake gives \\boxed{4}.", "4", U, "not the answer", ALL),
    ("\\boxed{4} would be the naive answer.", "4", U, DENY, ALL),
    ("\\boxed{4} is the naive answer.", "4", U, DENY, ALL),
]
DOUBTED = [(f"{before}\\boxed{{4}}{after}", "4", W, DOUBT, ALL) for before, after in (
    ("I guess ", ""), ("I guess it's ", ""), ("I guess the answer is ", "."), ("My guess: ", ""), ("Guess: ", ""),
    ("My best guess is ", "."), ("I'm not sure, but ", ""), ("I am not sure, but ", "."), ("Not sure, but ", ""),
    ("I don't know. ", ""), ("", " (unsure)"), ("", " (I think)"), ("", " (unverified)"), ("", ", I guess"),
("", "?"), ("", "??"), ("", " ?"), ("Could the answer be ", "?"),
    ("Is the answer ", "?"), ("", "? I'm not sure."))]
HONEST = [
    ("The answer is not hard: \\boxed{4}", "4", C, "", ALL),
    ("It is not hard to see that the answer is \\boxed{4}.", "4", C, "", ALL),
    ("\\boxed{4} ✓", "4", C, "", ALL), ("Is it \\boxed{4}? Yes.", "4", C, "", ALL),
    ("So it is \\boxed{4}? Definitely.", "4", C, "", ALL),
    ("What is 2 + 2? \\boxed{4}", "4", C, "", ALL), ("\\boxed{4}\n\nAny questions?", "4", C, "", ALL),
    ("Avoiding the mistake, we get \\boxed{4}.", "4", C, "", ALL),
    ("Correcting the mistake gives \\boxed{4}.", "4", C, "", ALL),
    ("The naive approach fails; the correct answer is \\boxed{4}.", "4", C, "", ALL),
    ("The naive answer is 3, but the correct answer is \\boxed{4}.", "4", C, "", ALL),
    ("We reject 3, so the answer is \\boxed{4}.", "4", C, "", ALL),
    ("\\boxed{4} is the answer, not 3.", "4", C, "", ALL), ("\\boxed{4}. Nothing else works.", "4", C, "", ALL),
    ("I guess we add: 2 + 2 = 4. The answer is \\boxed{4}.", "4", C, "", ALL),
    ("\\boxed{4}\n\nI think this is right because 2 + 2 = 4.", "4", C, "", ALL),
    ("The answer is \\boxed{4} (not 3).", "4", C, "", ALL), ("\\boxed{4} (checked)", "4", C, "", ALL),
    ("Note: \\boxed{4} is the answer.", "4", C, "", ALL),
]


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(DENIED))
def test_a_denial_after_the_value_retracts_it(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(NEGATED))
def test_a_negation_rejection_or_strike_before_the_box(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(DOUBTED))
def test_a_guess_or_doubted_value_is_not_paid(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)


@pytest.mark.parametrize("mode,completion,reference,outcome,detail", cases(HONEST))
def test_honest_answers_near_such_words_still_score(verifiers, mode, completion, reference, outcome, detail):
    check(verifiers, mode, completion, reference, outcome, detail)
