"""Adversarial math completions (about 1 MB each) and the trainer-process CPU the math verifier spends on each.

Extracting the final answer of a 1 MB completion took 1-2 s of the trainer's CPU; the goal
is <= 0.2 s per completion. `math_adversarial_cases()` returns the completions used for that (bench/verifiers.py
times them too); every case is scored against reference "1" with the math-verify worker stubbed out, so what is
timed is the parent's own work: extraction, hedge checks and the exact number path.

    .venv/bin/python bench/math_adversarial.py [--budget 0.2]
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.verifiers.math.verifier import MODES, MathVerifier  # noqa: E402

MB = 1_000_000
BUDGET_S = 0.2  # parent CPU per completion


class AdversarialCase(NamedTuple):
    name: str
    completion: str
    reference: str


def _repeat(unit: str, tail: str = "") -> str:
    """`unit` repeated to about 1 MB, then `tail`."""
    return unit * (MB // len(unit)) + tail


_UNITS = {  # name -> (repeated unit, tail)
    # markers: boxes, answer lines, GSM8K hashes, tags, opened and never closed
    "boxes_open": ("\\boxed{", ""), "boxes": ("\\boxed{1} ", ""), "boxes_bare": ("\\boxed 1 ", ""),
    "brace_then_boxes": ("{", "\\boxed{1}"), "answer_marks": ("Answer:", ""), "answer_lines": ("Answer: 1\n", ""),
    "answer_empty_lines": ("Answer:\n", ""), "answer_mixed_case": ("aNsWeR: ", "1"),
    "answer_words": ("the answer is ", ""),
    "answer_words_no_colon": ("answer ", "Answer: 1"), "hashes": ("#### ", ""), "hash_run": ("#", " 1"),
    "answer_tags": ("<answer>1</answer>", ""), "answer_tags_open": ("<answer>", "1"),
    "think_tags": ("<think>", "</answer>"), "think_answer_tags": ("<think></think><answer>", ""),
    "lines_of_dollars": ("Answer: " + "$" * 1990 + "\n", ""),
    "tags_of_boxes": ("<answer>" + "\\boxed{1} " * 50 + "</answer>", ""),
    # the fallbacks: numbers, environments, fractions and braces everywhere
    "dollars": ("$", ""), "parens_env": ("\\(", ""), "env_or": ("$1$ or ", ""), "envs_assign": ("$x = 1$. ", ""),
    "spaced_thousands": ("1 000 ", ""), "comma_ones": ("1,", ""), "hyphens": ("-", "1"), "digits": ("7", ""),
    "digits_spaced": ("1 ", ""), "words": ("the cat sat ", "1"), "numbers": ("1 2 3 ", ""), "decimals": ("1.", ""),
    "exponents": ("1e", ""), "powers": ("1^", ""), "open_braces": ("{", "1"), "close_braces": ("}", "1"),
    "open_parens": ("(", "1"), "intervals": ("[1, 2) ", ""), "row_breaks": ("\\\\", ""), "cells": ("1 & ", ""),
    "percents": ("1% ", ""), "euros": ("1,50 € ", ""), "fracs": ("\\frac{1}{2}", ""), "fracs_bare": ("\\frac12 ", ""),
    "sqrts": ("\\sqrt{2}", ""), "texts_open": ("\\text{", ""), "units": ("5\\text{ cm}", ""),
    "repeating": ("0.\\overline{3}", ""), "spaces": (" ", "1"), "newlines": ("\n", "1"), "negatives": ("-1 ", ""),
    "assignments": ("x = ", "1"), "prices": ("\\$5 ", ""), "currency_pairs": ("$5 and ", ""),
    "thousands": ("1,000,", ""), "latex_thousands": ("11,\\!111,\\!", "111"), "unicode_minus": ("\u22121 ", ""),
    "text_groups": ("1 \\text{ million} ", ""), "arrows": ("3 \\to ", "4"),
    # wrappers cleaned one per pass (quadratic), a lookahead per '=' (quadratic)
    "answer_lines_of_stars": ("Answer: " + "**" * 990 + "1\n", ""),
    "boxes_of_stars": ("\\boxed{" + "**" * 990 + "1}\n", ""),
    "answer_lines_of_dollars": ("Answer: " + "$" * 995 + "1" + "$" * 995 + "\n", ""),
    "env_of_parens": ("Some reasoning here.\n\n", "$$" + "\\(" * 7000 + "1$$"),
    "env_of_equals": ("Some reasoning here.\n\n", "$" + "=" * 16000 + "1$"),
    # runs of spaces after the value, where an explanation search was tried at every space
    "answer_spaces_because": ("Answer: 1" + " " * 2500 + " because\n", ""),
    "answer_spaces_sentence": ("Answer: 1." + " " * 2500 + "The end.\n", ""),
    "answer_spaces": ("Answer: 1" + " " * 2500 + "\n", ""),
}


def math_adversarial_cases() -> list[AdversarialCase]:
    """The adversarial completions (about 1 MB each; reference "1"), each a worst case of one scan: markers by
    the hundred thousand, never-closed boxes and environments, numbers, braces and fractions everywhere."""
    cases = [AdversarialCase(name, _repeat(unit, tail), "1") for name, (unit, tail) in _UNITS.items()]
    # an answer early, then 1 MB of padding (thinking, or prose) after it
    cases.append(AdversarialCase("think_then_box", "<think>" + "so 2 + 2 " * (MB // 9) + "</think>\\boxed{1}", "1"))
    cases.append(AdversarialCase("box_then_padding", "\\boxed{1}" + " " * MB, "1"))
    # an 'Answer:' line whose value ends in a parenthesis (read as a restatement of it)
    for name, unit in (("answer_degrees_paren", "^\\circ"), ("answer_units_paren", "\\text{ cm}^2"),
                       ("answer_parens", " (1)"), ("answer_triple_parens", " (((1)))"),
                       ("answer_nested_parens", " " + "(" * 20 + "1" + ")" * 20)):
        cases.append(AdversarialCase(name, "Answer: 1" + _repeat(unit, " (1)"), "1"))
    return cases


def parent_cpu(verifier: MathVerifier, case: AdversarialCase, tries: int = 1) -> float:
    """CPU seconds this process spends verifying `case` (the math-verify worker is another process): the
    least of `tries` runs, with the garbage collector paused, so that a collection of the caller's own objects
    (a test session holds millions) or a descheduled core on a loaded machine is not charged to the verifier."""
    costs = []
    for _ in range(tries):
        gc.disable()
        try:
            start = time.process_time()
            verifier.verify(case.completion, case.reference)
            costs.append(time.process_time() - start)
        finally:
            gc.enable()
    return min(costs)


class NoWorker:
    """Answers 'different' without math-verify: only the parent's work is timed."""

    def check(self, gold: str, pred: str, timeout_s: float) -> dict:
        return {"status": "different"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="CPU seconds allowed per completion")
    args = parser.parse_args(argv)
    verifiers = {mode: MathVerifier(mode, worker=NoWorker()) for mode in MODES}
    print(f"{'case':24} {'chars':>9} " + " ".join(f"{mode:>11}" for mode in MODES) + "  (parent CPU s)")
    worst = 0.0
    for case in math_adversarial_cases():
        times = [parent_cpu(verifiers[mode], case) for mode in MODES]
        worst = max(worst, *times)
        print(f"{case.name:24} {len(case.completion):9d} " + " ".join(f"{t:11.3f}" for t in times))
    print(f"worst: {worst:.3f} s per completion (budget {args.budget:g} s)")
    return 0 if worst <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
