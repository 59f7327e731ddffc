"""Mutation survivors: edges of the math verifier that no test pinned.

Each section names the helper it holds in place (rlvr/verifiers/math/*.py); expected values are worked out by hand from
the helper's docstring, as each comment says. Mutants shown equivalent: bench/equivalent_mutants.md.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import rlvr.verifiers.math.verifier as verifier_module
from rlvr.verifiers.math.boxes import last_boxed
from rlvr.verifiers.math.corrections import KIND, correction
from rlvr.verifiers.math.extract import final_answer
from rlvr.verifiers.math.prose import lead_end
from rlvr.verifiers.math.verifier import STARVED_WALL_FACTOR, MathVerifyWorker
from rlvr.verifiers.math.words import words_value

B = "The answer is \\boxed{5}.\n\n"


# ---------------------------------------------------------------- boxes.last_boxed: a trailing '.'
def test_a_bare_box_drops_its_sentence_full_stop_but_a_braced_box_keeps_its_content():
    # '\boxed 5.' ends a sentence: _BOXED_BARE takes '5.' (no space, brace or '$' stops it) and last_boxed strips the
    # '.'; inside braces the writer delimited the answer, so '5.' is returned as written.
    assert last_boxed("so \\boxed 5.") == "5"
    assert last_boxed("so \\boxed{5.}") == "5."
    assert last_boxed("\\boxed{2.5}") == "2.5" and last_boxed("\\boxed 2.5.") == "2.5"


# ---------------------------------------------------------------- corrections.correction: kind and line_end
def test_a_stated_correction_is_a_candidate_of_kind_correction_ending_at_its_line():
    # 'Correction: 6' after the box: the value '6' starts after ': ' and its line ends at the '\n' before 'More'.
    text = B + "Correction: 6\nMore text."
    value_at = text.index("Correction: ") + len("Correction: ")
    found = correction(text, text.index("\n"), "5")
    assert (found.text, found.start, found.end, found.kind) == ("6", value_at, value_at + 1, KIND)
    assert found.line_end == text.index("\n", value_at)
    # the kind is what the final answer reports (extract._with_run copies the last statement's kind)
    assert final_answer(B + "Correction: 6.").kind == "correction"


def test_a_correction_at_the_end_of_the_text_ends_its_line_there():
    # no newline after the value: the line ends at the window's limit, the end of the text
    text = B + "Correction: 6"
    assert correction(text, text.index("\n"), "5").line_end == len(text)


def test_a_value_on_the_line_below_a_correction_hedges_it():
    # trailer_problem reads the next line after an 'Answer:' line or a correction (its line_end): '6' then '7' alone
    # on the next line offers two values (as 'Answer:\n5\n6' does), so nothing is paid.
    final = final_answer(B + "Correction: 6\n7")
    assert final.text == "6" and final.problem.startswith("hedged")
    assert final_answer(B + "Correction: 6\n6").problem == ""  # the same value below is no other value


# ---------------------------------------------------------------- words.words_value: a zero denominator
@pytest.mark.parametrize("text", ["1/0", "1/00", "0/00", "3/000"])
def test_a_fraction_over_zero_written_with_several_zeros_is_no_value(text):
    # the check was text.endswith('/0'), and '1/00' ends with '00': Fraction(1, 0) raised ZeroDivisionError, so
    # 'Correction: 1/00' after an answer crashed final_answer (found by the mutant of corrections._stated).
    assert words_value(text) is None
    final = final_answer(B + f"Correction: {text}")
    assert final is not None and final.text == "5"


# ---------------------------------------------------------------- prose.lead_end: at most 16 leading words
def test_sixteen_filler_words_may_go_but_seventeen_may_not():
    # 'so' is a FILLER and no COPULA: every token after copula index -1 is a filler, so the lead is droppable while
    # there are at most 16 tokens; lead_end is then where '5' starts (3 characters per 'so ').
    assert lead_end("so " * 16 + "5") == 48
    assert lead_end("so " * 15 + "5") == 45
    assert lead_end("so " * 17 + "5") == 0


@pytest.mark.parametrize("text", ["twice 5", "5", "the total", "x = 4", "so " * 17 + "5", "the answer is maybe 5"])
def test_a_lead_that_cannot_go_ends_at_zero(text):
    # the docstring: 0 (an int, an index into the text) when the words before the number cannot go or there are none
    at = lead_end(text)
    assert at == 0 and isinstance(at, int)


# ---------------------------------------------------------------- verifier: the starved worker's deadlines
class _FakeWorker(MathVerifyWorker):
    """A worker that never answers and is always runnable without using CPU (starved): each read waits until its
    deadline on the fake clock and records it."""

    def __init__(self, clock: list[float]):
        super().__init__()
        self.clock, self.deadlines = clock, []

    def _cpu(self):
        return 0.0, True

    def _read_line(self, deadline):
        self.deadlines.append(deadline)
        self.clock[0] = max(self.clock[0], deadline)
        return None


def test_a_starved_worker_is_read_in_steps_of_a_quarter_budget_up_to_the_wall_factor(monkeypatch):
    # budget 4 s from t=0: the first read waits to 4; then, while starved and before 3 budgets (12 s), each read
    # waits a quarter budget (1 s) more: 5, 6, ..., 12, the last capped at started + STARVED_WALL_FACTOR * budget.
    clock = [0.0]
    monkeypatch.setattr(verifier_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    worker = _FakeWorker(clock)
    assert worker._read_line_in_budget(4.0) is None
    assert STARVED_WALL_FACTOR == 3.0
    assert worker.deadlines == [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]


def test_a_starved_worker_s_last_step_is_capped_at_the_wall_factor(monkeypatch):
    # budget 2 s from t=0: the first read waits to 2; the clock is nudged 0.125 s after each read, so each later
    # read waits to now + 0.5 (a quarter budget): 2.625, 3.25, ..., 5.75, and then to the cap 3 * 2 = 6.0, not 6.375.
    clock = [0.0]
    monkeypatch.setattr(verifier_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    worker = _FakeWorker(clock)
    reads = worker._read_line

    def nudged(deadline):
        line = reads(deadline)
        clock[0] += 0.125
        return line

    monkeypatch.setattr(worker, "_read_line", nudged)
    assert worker._read_line_in_budget(2.0) is None
    assert worker.deadlines == [2.0, 2.625, 3.25, 3.875, 4.5, 5.125, 5.75, 6.0]
