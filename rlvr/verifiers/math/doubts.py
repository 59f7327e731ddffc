"""A final box the completion itself doubts or only guesses. Strings
only: one anchored match before the box (at most 120 characters) and one at its end.

Decision (tests/test_math_r5_denials.py; corpus rows of form 'r5_denial'): 'guess' and uncertainty qualify a value
(docs/verifiers.md: 'Maybe \\boxed{4}?', '(probably)' and '(guess)' are WRONG), so these are WRONG too:
- right before the box: 'I guess', 'My (best) guess:', 'Guess:', "I'm not sure(, but)", 'Not sure, but', "I don't
  know." (with 'it's', 'the answer is' between them and the box);
- right after it: '(unsure)', '(not sure)', '(I think)', '(unverified)', ', I guess', ', I think'
  (not 'I think this is right because ...');
- a question mark right after the box ('\\boxed{4}?', 'Could the answer be \\boxed{4}?'): judgement call, a question
  about the final box is doubt, unless it is answered ('Yes', 'No doubt', 'Definitely': 'Is it \\boxed{4}? Yes.').
  'No' after it retracts it (rlvr.verifiers.math.denials).
"""
from __future__ import annotations

import re

DOUBTED = "doubt: the completion guesses or questions its final answer"
_BEFORE = re.compile(
    r"(?:\bI\s+guess|\bmy\s+(?:best\s+)?guess(?:\s+is)?|(?<![\w\s])\s*guess|^\s*guess|\bI(?:['’]m|\s+am)\s+not\s+(?:sure"
    r"|certain)|\bnot\s+sure|\bI\s+(?:do\s*n['’]?t|do\s+not)\s+know)\s*[,.:!]?\s*(?:but\s+)?(?:(?:maybe\s+)?(?:it['’]s"
    r"|it\s+is|the\s+answer\s+(?:is|would\s+be|might\s+be))\s*)?(?:\$|\\[(\[])?\s*\Z", re.IGNORECASE)
_AFTER = re.compile(
    r"(?:[ \t]|\$|\\[)\]]|\})*(?:\?(?![ \t]*(?:\*\*)?(?:yes|yep|yeah|indeed|correct|right|no\s+doubt|definitely"
    r"|certainly|of\s+course|sure|absolutely)\b)"
    r"|\((?:unsure|not\s+sure|uncertain|i\s+think|unverified|unchecked|(?:just\s+)?a\s+guess|guessing|maybe)\)"
    r"|,\s*I\s+(?:guess|think|suppose|believe)\b(?![ \t]+(?:this|that|it|so|because)\b))", re.IGNORECASE)


def doubted(text: str, start: int, end: int) -> str | None:
    """DOUBTED when the words right before the box at text[start:end], or right after it, guess or question it (see
    the module docstring); None otherwise."""
    if _BEFORE.search(text, max(0, start - 120), start) or _AFTER.match(text, end, min(len(text), end + 80)):
        return DOUBTED
    return None
