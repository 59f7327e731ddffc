"""Format verifiers: reward the shape of a completion, not its correctness.

"format" checks the DeepSeek-R1 layout `<think>...</think><answer>...</answer>` (R1 paper, section 2.2.2:
a format reward alongside the accuracy reward). "answer_format" checks that the last line is
`Answer: <number>`, the layout our default task instruction asks for.

Both are written with str.count/find and anchored, single-pass regexes, so a 1 MB adversarial completion
costs linear time. A one-regex version like `^<think>.*?</think>\\s*<answer>.*?</answer>$` backtracks
over every `</think>` and is quadratic on inputs that repeat the tags without closing the answer.
"""
from __future__ import annotations

import re

from rlvr.types import Outcome, Verdict
from rlvr.verifiers.base import error_verdict

_TAGS = ("<think>", "</think>", "<answer>", "</answer>")
_ANSWER_LINE = re.compile(r"Answer:[ \t]*-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?[ \t]*\.?")


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def think_answer_problems(text: str) -> list[str]:
    """What keeps `text` from being `<think>..</think> <answer>..</answer>`; empty list when it is."""
    counts = {tag: text.count(tag) for tag in _TAGS}
    missing = [tag for tag, n in counts.items() if n == 0]
    if missing:
        return [f"missing {', '.join(missing)}"]
    duplicated = [f"{tag} x{n}" for tag, n in counts.items() if n > 1]
    if duplicated:
        return [f"duplicated {', '.join(duplicated)}"]
    open_think, close_think, open_answer, close_answer = (text.find(tag) for tag in _TAGS)
    if not open_think < close_think < open_answer < close_answer:
        return ["tags out of order (expected <think>, </think>, <answer>, </answer>)"]
    problems = []
    if text[:open_think].strip():
        problems.append(f"text before <think>: {_short(text[:open_think].strip())}")
    between = text[close_think + len("</think>"):open_answer]
    if between.strip():
        problems.append(f"text between </think> and <answer>: {_short(between.strip())}")
    if not text[open_answer + len("<answer>"):close_answer].strip():
        problems.append("empty <answer>")  # an empty answer would earn the format reward for nothing
    after = text[close_answer + len("</answer>"):]
    if after.strip():
        problems.append(f"text after </answer>: {_short(after.strip())}")
    return problems


class FormatVerifier:
    """`<think>...</think>` then `<answer>...</answer>`, one of each, only whitespace outside them."""

    name = "format"

    def verify(self, completion: str, reference: str = "") -> Verdict:
        try:
            problems = think_answer_problems(completion)
        except Exception as err:  # e.g. a non-str completion: total, never raise
            return error_verdict("format verifier failed", err)
        if problems:
            return Verdict(Outcome.WRONG, 0.0, "; ".join(problems))
        return Verdict(Outcome.CORRECT, 1.0, "think/answer format ok")


class AnswerLineVerifier:
    """The last non-empty line is `Answer: <number>` (ints, decimals, negatives, 3/4, 1,234)."""

    name = "answer_format"

    def verify(self, completion: str, reference: str = "") -> Verdict:
        try:
            body = completion.rstrip()
            if not body:
                return Verdict(Outcome.WRONG, 0.0, "empty completion (expected a final 'Answer: <number>' line)")
            last_line = body[body.rfind("\n") + 1:].strip()
            if _ANSWER_LINE.fullmatch(last_line):
                return Verdict(Outcome.CORRECT, 1.0, "ends with an 'Answer: <number>' line")
            return Verdict(Outcome.WRONG, 0.0, f"last line is not 'Answer: <number>': {_short(last_line)}")
        except Exception as err:
            return error_verdict("answer_format verifier failed", err)
