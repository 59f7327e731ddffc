"""Answers the completion denies, withdraws or offers
together with another value. None of them may be paid; an honest late correction is read as the answer.

Each class has the adversarial completion (paid before), a correct variant where one exists, and honest controls
that must keep scoring. Decisions: rlvr/verifiers/math/around.py (a denial after a value: denied; a negation before a
box; a parenthesis naming another value; a value on the next line of an 'Answer:' line; an 'alternative' label; a
bullet is no minus sign), corrections.py (a correction in prose after the answer), latex.py (spacing between two
boxes is a connective), extract.py (struck-through text is withdrawn). Corpus rows: form 'withdrawn'.
"""
from __future__ import annotations

import pytest

from rlvr.types import Outcome
from rlvr.verifiers.math.verifier import MODES

C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSEABLE
ZERO = (W, U)  # not paid, whichever refusal
B = "The answer is \\boxed{5}.\n\n"


def _cases(table):
    return [pytest.param(mode, *case, id=f"{mode}-{i}:{case[0][:40]}")
            for i, case in enumerate(table) for mode in MODES]


def check(verifiers, mode, completion, reference, outcome):
    verdict = verifiers[mode].verify(completion, reference)
    expected = outcome if isinstance(outcome, tuple) else (outcome,)
    assert verdict.outcome in expected and verdict.score == float(C in expected), verdict


# ---------------------------------------------------------------- a negation before or a denial after
NEGATED = [
    # before a box, also inside \text{}: the box is denied
    ("The answer cannot be $\\boxed{5}$.", "5", W),
    ("It can't be \\boxed{5}.", "5", W),
    ("It is not \\boxed{5}.", "5", W),
    ("$\\text{It is not } \\boxed{5}$", "5", W),
    ("$\\text{The answer is not } \\boxed{5}$", "5", W),
    ("It won't ever equal \\boxed{5}", "5", ZERO),
    # a denial right after the value: retracted
    ("The answer is \\boxed{5} is false.", "5", U),
    ("The answer is \\boxed{5}, which is false.", "5", U),
    ("\\boxed{5 \\text{ is false}}", "5", U),
    ("\\boxed{5 \\text{ is impossible}}", "5", U),
    ("\\boxed{5 \\text{ is incorrect}}", "5", U),
    ("\\boxed{5 \\text{ fails}}", "5", U),
    ("<answer>5 is incorrect</answer>", "5", U),
    ("<answer>5 is false</answer>", "5", U),
    ("Answer: 5 fails", "5", U),
    ("Answer: 5 is false", "5", U),
    ("Answer: 5 does not work", "5", U),
    # honest: a negation elsewhere, a denial of another value, 'false' as the answer itself
    ("The answer is \\boxed{5}. This is not a coincidence.", "5", C),
    ("It is not hard to see the answer is \\boxed{5}.", "5", C),
    ("5 cannot be split further, so the answer is \\boxed{5}", "5", C),
    ("We cannot use 4 twice, so the answer is \\boxed{5}.", "5", C),
    ("Since $x$ can't be negative, $x = \\boxed{5}$.", "5", C),
    ("Since it cannot be \\boxed{4}, the answer is \\boxed{5}.", "5", C),
    ("The claim that $x=3$ is false, so $x = \\boxed{5}$.", "5", C),
    ("Checking: 4 fails, 6 fails, so the answer is \\boxed{5}.", "5", C),
    ("The answer is \\boxed{5}. The other case fails because 4 is odd.", "5", C),
    ("The answer is \\boxed{5}. It is impossible to get more than 5.", "5", C),
    ("\\boxed{\\text{False}}", "\\text{False}", C),
    ("Answer: False", "False", C),
    ("\\boxed{5 \\text{ apples}}", "5", C),
]


@pytest.mark.parametrize("mode, completion, reference, outcome", _cases(NEGATED))
def test_a_denied_answer_is_not_paid(verifiers, mode, completion, reference, outcome):
    check(verifiers, mode, completion, reference, outcome)


# ---------------------------------------------------------------- a correction in prose after the answer
CORRECTED = [
    # a correction that states a value is the last answer statement: the answer
    (B + "Hmm, let me recheck. Actually it should be 6.", "6", C),
    (B + "Hmm, let me recheck. Actually it should be 6.", "5", W),
    (B + "Correction: 6.", "6", C), (B + "Correction: 6.", "5", W),
    (B + "On second thought, 6.", "6", C), (B + "On second thought, 6.", "5", W),
    (B + "Oops, I miscounted; the total is 6.", "6", C), (B + "Oops, I miscounted; the total is 6.", "5", W),
    (B + "Erratum: the result is 6.", "6", C), (B + "Erratum: the result is 6.", "5", W),
    (B + "Update: 6", "6", C), (B + "Update: 6", "5", W),
    (B + "Edit: the answer should be 6", "6", C), (B + "Edit: the answer should be 6", "5", W),
    (B + "The correct total is 6.", "6", C), (B + "The correct total is 6.", "5", W),
    (B + "Therefore the final count is six.", "6", C), (B + "Therefore the final count is six.", "5", W),
    (B + "Scratch that, it's 6.", "6", C), (B + "Scratch that, it's 6.", "5", W),
    (B + "I made a mistake: the total is 6.", "6", C),
    (B + "Correction: $6$", "6", C),
    ("Answer: \\boxed{3} is wrong, the correct value is 4", "4", C),
    # a correction that offers another value without stating it: the answer is withdrawn, nothing paid
    (B + "On second thought, maybe 6.", "5", ZERO), (B + "On second thought, maybe 6.", "6", ZERO),
    (B + "Correction: 6 or 7", "5", ZERO), (B + "Correction: 6 or 7", "6", ZERO),
    (B + "Oops, I think 6 fits better.", "5", U),
    # honest: the same value, arithmetic, a pointer, mild openers, a verb before the answer
    ("Update the total: 3 + 2 = 5. Answer: 5", "5", C),
    (B + "Check: 2 + 3 = 5.", "5", C),
    (B + "The correct total is 5.", "5", C),
    (B + "The final count is 5 apples.", "5", C),
    (B + "Update: I added a check in step 2.", "5", C),
    (B + "Edit: fixed a typo.", "5", C),
    (B + "Actually, 3 of them are red.", "5", C),
    (B + "Actually, the 3 red and 2 blue balls give 5.", "5", C),
    (B + "Wait, let me double-check: 2 + 3 = 5. Yes.", "5", C),
    (B + "On second thought, this matches the 5 found above.", "5", C),
    ("Correction: earlier I wrote 4, but 2 + 3 = 5. The answer is \\boxed{5}.", "5", C),
    (B + "This is the correct answer since 2 + 3 = 5.", "5", C),
]


@pytest.mark.parametrize("mode, completion, reference, outcome", _cases(CORRECTED))
def test_a_correction_after_the_answer_is_read_or_withdraws_it(verifiers, mode, completion, reference, outcome):
    check(verifiers, mode, completion, reference, outcome)


# ---------------------------------------------------------------- two candidates offered together
HEDGES = [
    # spacing between two boxes is a connective
    ("\\boxed{5}\\hfill\\boxed{6}", "6", W), ("\\boxed{5}\\hfill\\boxed{6}", "5", W),
    ("\\boxed{5}\\phantom{x}\\boxed{6}", "6", W), ("\\boxed{5}\\vspace{1em}\\boxed{6}", "6", W),
    ("\\boxed{5}\\hspace{2cm}\\boxed{6}", "6", W), ("\\boxed{5}\\medskip\\boxed{6}", "6", W),
    # a parenthesis that names another value for a case
    ("\\boxed{5} (6 with endpoints)", "5", W), ("\\boxed{5} (6 if the endpoints count)", "5", W),
    # a value alone on the next line of an 'Answer:' or '####' line, or 'or' between
    ("Answer:\n5\n6", "5", W), ("Answer:\n5\n6", "6", W), ("The answer is:\n5\n6", "5", W),
    ("Answer:\n5\nor\n6", "5", W), ("Answer: 5\n6", "5", W), ("#### 5\n6", "5", W), ("#### 5\n6", "6", W),
    # an alternative answer labelled as such
    ("Answer: 5\n\nAnswer (alternative): 6", "5", W), ("Answer: 5\n\nAnswer (alternative): 6", "6", W),
    ("Answer: 5\n\nAlternative answer: 6", "5", W), ("Answer: 5\n\nAlternative answer: 6", "6", W),
    # a markdown bullet is no minus sign: the 'also' hedge stays
    ("The answer is \\boxed{5}.\n- 6 is also acceptable", "5", W),
    ("The answer is \\boxed{5}.\n* 6 is also acceptable", "5", W),
    # struck-through text is withdrawn
    ("~~The answer is 5~~", "5", U), ("~~The answer is \\boxed{5}~~", "5", U),
    ("~~The answer is 4~~ The answer is \\boxed{5}.", "5", C),
    ("~~The answer is 4~~ The answer is \\boxed{5}.", "4", W),
    ("Answer: ~~4~~ 5", "5", C),
    # honest: one value, then an explanation, a pointer, a blank line, arithmetic, the same value
    ("Answer:\n5", "5", C), ("Answer:\n5\n\nThis follows from step 2.", "5", C), ("#### 5\n", "5", C),
    ("Answer: 5\n2. Next, we check.", "5", C), ("Answer:\n5\n5", "5", C),
    ("\\boxed{5} (see step 2)", "5", C), ("\\boxed{12} (3 groups of 4)", "12", C),
    ("The answer is \\boxed{5}.\n- Check: 2 + 3 = 5", "5", C),
    ("The answer is \\boxed{5}. An alternative approach gives the same 5.", "5", C),
    ("The answer is $5~~\\text{cm}$", "5 cm", C),
]


@pytest.mark.parametrize("mode, completion, reference, outcome", _cases(HEDGES))
def test_two_candidates_together_are_a_hedge_and_struck_text_is_withdrawn(verifiers, mode, completion, reference,
                                                                          outcome):
    check(verifiers, mode, completion, reference, outcome)
