"""The "steps" verifier: are the arithmetic steps a completion writes down true?

Why a verifier: R1's rejection sampling keeps traces that are correct AND readable; a trace whose answer is right
but whose intermediate equations are false ("7 * 8 = 54, so 56") is neither. Scored with a small weight beside
"math", this is a process reward: it pays for stated steps that hold. It can only be hacked by writing equations
that are true, which is honest work except for padding: "1 + 1 = 2" appended to any trace passes. A length penalty
(reward.overlong_buffer) or selecting the shortest of the correct traces counters that; this check alone does not.

What is checked (`check_steps`): every maximal run of the reasoning text made of digits, spaces, the operators
+ - * × · −, parentheses and "=", holding an "=" and an operator or two numbers. It is split at "="; each side that
reads as an integer expression is evaluated with a small `ast` walk (never eval; no power operator, at most
MAX_DIGITS digits per number and MAX_SIDE characters per side, so no completion can make it slow). Each "=" whose two
neighbouring sides both evaluate is one stated step; it is wrong when they differ.

When in doubt a run is skipped, never judged: a false "wrong" would punish a correct trace, a skipped run costs
only coverage. Skipped: runs that continue a decimal or grouped number ("2.5 = 2.5", "1,234 + 1 = 1,235": checked
as integers they would read "5 = 2"), runs touching a letter ("CO2 = 44", "6 = 2x"), and runs next to notation
this does not evaluate: /, ^, ÷, %, !, braces or LaTeX (`\\frac`, `\\times`), or an operator word (x, times, of,
over, ...): "12 / 4 = 3" would otherwise read "4 = 3", "10% of 50 = 5" "50 = 5".
"""
from __future__ import annotations

import ast
import re
from typing import NamedTuple

from rlvr.types import Outcome, Verdict
from rlvr.verifiers.base import error_verdict

MAX_DIGITS = 30  # per number: longer literals are not arithmetic a trace states
MAX_SIDE = 200  # characters per side of an "=": bounds the parse (nesting) and the size of the integers built
MAX_VALUE = 10 ** 60  # an intermediate result past this stops the evaluation (30-digit numbers multiplied once fit)

_SPAN = re.compile(r"[0-9 \t+\-*×·−()=]+")
_OPERATOR = re.compile(r"[+\-*×·−]")
_NUMBER = re.compile(r"\d+")
# next to a run, these mean the expression goes on in notation the evaluator does not read
_NOTATION = frozenset("/^÷%!_\\{}[]|")
_OPERATOR_WORDS = frozenset({"x", "times", "cdot", "div", "over", "of", "mod", "by", "plus", "minus", "frac"})
_LAST_WORD = re.compile(r"([A-Za-z]+)$")
_FIRST_WORD = re.compile(r"^([A-Za-z]+)")


class StepCheck(NamedTuple):
    stated: int  # "=" signs whose two neighbouring sides both evaluate
    wrong: int  # of those, the ones whose sides differ


def think_text(completion: str) -> str | None:
    """The text inside <think>...</think>; before </think> when the completion has no <think> (a chat template may
    open it in the prompt); after an unclosed <think> to the end (a trace cut by max_new_tokens is still reasoning);
    None when the completion has neither tag."""
    open_, close = completion.find("<think>"), completion.find("</think>")
    if open_ < 0 and close < 0:
        return None
    if open_ < 0 or 0 <= close < open_:  # the first tag is </think>: the opening one was prefilled
        return completion[:close]
    start = open_ + len("<think>")
    end = completion.find("</think>", start)
    return completion[start:] if end < 0 else completion[start:end]


def reasoning_text(completion: str) -> str:
    """Where steps are looked for: the think section, or the whole completion when there is none."""
    think = think_text(completion)
    return completion if think is None else think


def _value(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _value(node.left), _value(node.right)
        if left is None or right is None:
            return None
        value = left + right if isinstance(node.op, ast.Add) else left - right if isinstance(node.op, ast.Sub) \
            else left * right
        return value if abs(value) <= MAX_VALUE else None
    return None  # names, calls, unary plus, floats, bools: not an integer expression


def evaluate_side(side: str) -> int | None:
    """The integer an expression of ints, + - * (× · −) and parentheses stands for; None when it is not one."""
    side = side.strip().replace("×", "*").replace("·", "*").replace("−", "-")
    if not side or len(side) > MAX_SIDE or any(len(n) > MAX_DIGITS for n in _NUMBER.findall(side)):
        return None
    # "(3 + 4 = 7)": a parenthesis opened before the first side or closed after the last belongs to the prose
    while side.startswith("(") and side.count("(") > side.count(")"):
        side = side[1:].lstrip()
    while side.endswith(")") and side.count(")") > side.count("("):
        side = side[:-1].rstrip()
    try:
        return _value(ast.parse(side, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # "1 2", "007", unbalanced parentheses
        return None


def _continues_number(text: str, at: int) -> bool:
    """A "." or "," at text[at] between two digits: the run is part of a decimal or grouped number."""
    return 0 < at < len(text) - 1 and text[at] in ".," and text[at - 1].isdigit() and text[at + 1].isdigit()


def _open_edge(text: str, edge: int, before: bool, side: str) -> bool:
    """Whether a run may end at `edge` (its first character when `before`, else one past its last), `side` being
    its stripped outer side there: only when nothing beside it can make that side part of a longer expression."""
    at = edge - 1 if before else edge
    if 0 <= at < len(text) and text[at].isalpha():  # touching a letter: "CO2 = 44", "6 = 2x"
        return False
    if _continues_number(text, at):
        return False
    beside = text[:edge].rstrip(" \t") if before else text[edge:].lstrip(" \t")
    if not beside:
        return True
    char = beside[-1] if before else beside[0]  # never a digit, a space or an operator: those are in the run
    word = (_LAST_WORD if before else _FIRST_WORD).search(beside)
    if char in _NOTATION or (word is not None and word.group(1).lower() in _OPERATOR_WORDS):
        return False
    # "2x + 3 = 7", "y - 3 = 4": a run that opens (or closes) on an operator after a word is a fragment
    return not (char.isalpha() and (side[0] if before else side[-1]) in "+*×·-−")


def _judged(text: str, match: re.Match[str], sides: list[str]) -> bool:
    span, first, last = match.group(), sides[0].strip(), sides[-1].strip()
    start = match.start() + len(span) - len(span.lstrip(" \t"))  # the run's edges without its outer blanks
    end = match.end() - len(span) + len(span.rstrip(" \t"))
    # an empty outer side ("x = 3 + 4 = 7") leaves nothing on that edge for the text beside it to continue
    return (not first or _open_edge(text, start, True, first)) and (not last or _open_edge(text, end, False, last))


def check_steps(text: str) -> StepCheck:
    """The equations stated in `text` and how many are wrong (see the module docstring for what is read)."""
    stated = wrong = 0
    for match in _SPAN.finditer(text):
        span = match.group()
        if "=" not in span or not (_OPERATOR.search(span) or len(_NUMBER.findall(span)) >= 2):
            continue
        sides = span.split("=")
        if not _judged(text, match, sides):
            continue
        values = [evaluate_side(side) for side in sides]
        for left, right in zip(values, values[1:]):
            if left is not None and right is not None:
                stated += 1
                wrong += left != right
    return StepCheck(stated, wrong)


class StepsVerifier:
    """CORRECT when the reasoning states at least one arithmetic step and every one holds; WRONG when one does not;
    UNPARSEABLE (score 0, as a missing answer) when it states none: nothing to reward, and no reason to punish."""

    name = "steps"

    def verify(self, completion: str, reference: str = "") -> Verdict:
        try:
            check = check_steps(reasoning_text(completion))
        except Exception as err:  # e.g. a non-str completion: total, never raise
            return error_verdict("steps verifier failed", err)
        if check.wrong:
            return Verdict(Outcome.WRONG, 0.0, f"{check.wrong} of {check.stated} stated steps wrong")
        if check.stated:
            return Verdict(Outcome.CORRECT, 1.0, f"{check.stated} stated steps, all right")
        return Verdict(Outcome.UNPARSEABLE, 0.0, "no arithmetic step stated")
