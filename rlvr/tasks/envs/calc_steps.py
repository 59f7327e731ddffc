"""The calculator's step rewards: what a turn's calls computed, checked against the known
solution (the seeds' process reward), read with episode.credit=process.

The reference's steps are its operations worked one at a time ("(5 + 6) * 8" is 5 + 6 = 11, then 11 * 8 = 88). A
call reaches a step when it performs that operation on the same operands (in either order for + and *), one call
per operation or all in one, as the worked examples do; or when it is another route to the answer: its whole
expression writes exactly the question's numbers (each once, as a multiset, and no other literal), performs the
reference's operators (as a multiset) and has the reference's value. A route reaches every step not reached yet,
and its own operations are the ones it performed ("5 - 8 + 12" or "5 + (12 - 8)" for 5 + 12 - 8, "11 / 4 * 12" or
"11 * (12 / 4)" for 11 * 12 / 4: 1, as the reference's own order earns).

A turn whose calls all ran earns share x precision: share = steps it reached first / all steps (an episode earns
at most 1 however it splits its work, each step paid once); precision = steps it reached first / (operations it
performed + operations wasted by the earlier turns). An operation is wasted when it reaches no step: a guess, an
identity ("17 + 0"), a repeat, an operation on copied numbers, and each failed call (a bare "17", a malformed
call) counts as one. Recomputing a step an earlier turn reached is no waste in a turn that reaches a new one
(building on a known value: "5 * 2", then "3 + 5 * 2"); in a turn that reaches nothing new it is a repeat. A turn
with a failed call earns 0 and reaches nothing (the next turn may compute its steps again), but its waste counts:
what it showed the model is spent.

Why over the episode, not per turn (an adversarial case; level 2, "apples 11 12 8", 11 + 12 * 8 = 107, honest
working 1 in one call, 1/2 + 1/2 a step per turn): with precision per turn a wrong guess cost nothing in later
turns, and guessing across turns tied honest working. One whole-expression guess per turn ("11 * 12 + 8",
"(11 + 12) * 8", "11 + 12 * 8") earned 0 + 0 + 1; now 0 + 0 + 2/(2 + 4) = 1/3. One operation per turn (12 + 8,
12 - 8, 12 * 8, 11 + 96) earned 0 + 0 + 1/2 + 1/2; now 1/2 x 1/3 twice = 1/3. Six whole-expression guesses and a
malformed call in one turn (0, but the model read every value), then the honest call, earned 1; now 10 wasted
operations and the failed call: 2/(2 + 11) = 2/13. Why routes: without them a turn's four guessed expressions over
the birds' numbers 5 12 8 (5 + 12 - 8, 5 * 12 - 8, 5 + 12 * 8, 5 - 12 - 8) earned 1/4 and the honest "5 - 8 + 12"
0; now 2/8 against 1. The operator multiset keeps coincidences out ("(4 - 3) * 5" = 5 = "5 / (4 - 3)"; "7 + 4 - 4"
= "7 * 4 / 4"); the number multiset keeps out identities (a literal the question lacks: "22 - 5 + 0") and values
copied from elsewhere. Working that writes a number twice ("5 * 11 + 10 * 11" for (5 + 10) * 11) is no route: the
outcome pays it. Any operation that reaches nothing before the last step is reached makes that turn's or a later
turn's precision below 1, so every guessing strategy earns strictly less than honest working over the episode
(tests/test_step_rewards.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Step:
    """One binary operation on exact values: "5 + 6 = 11" is Step("+", 5, 6, 11)."""

    symbol: str  # + - * /
    left: Fraction
    right: Fraction
    value: Fraction

    @property
    def operation(self) -> tuple[str, tuple[Fraction, ...]]:
        """What makes two steps the same work: the operator and its operands, in either order for + and *."""
        operands = (self.left, self.right)
        return self.symbol, tuple(sorted(operands)) if self.symbol in "+*" else operands


@dataclass(frozen=True)
class Work:
    """What an expression computes: its operations in order (`calculator.worked`), the numbers it writes, its
    value. The reference's Work is the solution; a successful call's is what the call did."""

    steps: tuple[Step, ...]
    numbers: tuple[int, ...]  # the literals written, sorted; a unary minus is no part of its literal
    value: Fraction

    @property
    def operators(self) -> tuple[str, ...]:
        return tuple(sorted(step.symbol for step in self.steps))


def numbers_in(expression: str) -> tuple[int, ...]:
    """The literals an expression that `calculator.worked` read writes, sorted: its digit runs (the evaluator
    allows no other characters that make a number)."""
    return tuple(sorted(int(digits) for digits in re.findall(r"\d+", expression)))


def is_route(reference: Work, call: Work) -> bool:
    """Whether the call is the reference's work in another order: the same numbers and operators (multisets) and
    the same value (module docstring)."""
    return (call.value == reference.value and call.numbers == reference.numbers
            and call.operators == reference.operators)


@dataclass(frozen=True)
class Progress:
    """An episode's state for its step rewards: the reference steps reached (by index) and the operations wasted."""

    reached: frozenset[int] = frozenset()
    wasted: int = 0


def _reach(reference: Work, reached: frozenset[int], calls: list[Work]) -> tuple[list[int], int, int]:
    """(the reference steps the calls reach first, in order; the operations counted; the operations that redo a
    step an earlier turn reached, which are not counted)."""
    new: list[int] = []
    counted = redone = 0
    for call in calls:
        route = is_route(reference, call)
        for step in call.steps:
            matches = [i for i, target in enumerate(reference.steps) if target.operation == step.operation]
            fresh = [i for i in matches if i not in reached and i not in new]
            if fresh and not route:
                new.append(fresh[0])
            elif matches and reached.issuperset(matches):
                redone += 1  # builds on a step an earlier turn reached and paid: neither paid nor counted against
                continue
            counted += 1  # a new step, a route's operation, or one that reaches none: a guess, a repeat, an identity
        if route:  # another order of the reference's work reaches what is left of it
            new.extend(i for i in range(len(reference.steps)) if i not in reached and i not in new)
    return new, counted, redone


def turn_reward(reference: Work, progress: Progress, calls: list[Work], failed: int) -> tuple[float, Progress]:
    """(a turn's step reward, the episode's progress after it), for the successful calls of the turn in order and
    its `failed` calls (module docstring). A turn with a failed call earns 0 and reaches nothing; its waste counts."""
    new, counted, redone = _reach(reference, progress.reached, calls)
    if not new:
        counted += redone  # nothing new to build on: recomputing a reached step is a repeat
    performed = max(counted, len(new))  # a route has as many operations as the steps it reaches; never precision > 1
    wasted = progress.wasted + performed - len(new) + failed
    if failed or not new:
        return 0.0, Progress(progress.reached, wasted)
    reward = len(new) / len(reference.steps) * len(new) / (performed + progress.wasted)
    return reward, Progress(progress.reached | frozenset(new), wasted)
