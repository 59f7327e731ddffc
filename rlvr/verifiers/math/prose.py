"""Prose around a stated number: which words before and after it can go without
changing what is stated. Strings only, no sympy.

Decisions (tests/test_math_around.py; corpus rows of form 'prose_around'):
- Before the number, an allow-list: words are dropped only when all of them are FILLERS ('so', 'therefore',
  'clearly', 'exactly'), or a subject ended by a copula ('the total is', 'there are', "it's", 'total =', 'the
  largest n is') with only fillers after it. A subject may be any words but those that change, bound or hedge the
  value (DENY: 'the reciprocal of 5', 'twice 5', 'the square of x is 25', 'upwards of 34', 'probably 34' are not 5,
  25 or 34), and holds no digit. Anything else keeps its words: the answer is then not the bare number.
- After the number, a deny-list: words are dropped unless they change, bound or hedge the value (rlvr.verifiers.math
  .forms.changes_count: '5 tens', '5 grand', '34 minimum', '5 times itself', '5 to the second'), name a number, or
  start a condition ('34 when k = 5'): nouns and units are open classes ('17 birds', '5 cm').
"""
from __future__ import annotations

import re

from rlvr.verifiers.math.forms import changes_count

FILLERS = frozenset((
    "so", "thus", "hence", "therefore", "then", "clearly", "finally", "overall", "altogether", "indeed", "simply",
    "just", "exactly", "precisely", "now", "answer", "final", "the", "a", "an", "our", "my", "this", "that", "we", "i",
    "you", "it", "get", "gets", "got", "obtain", "obtains", "obtained", "find", "finds", "found", "arrive", "at",
    "gives", "give", "yields", "of", "total", "result", "value", "number", "correct", "required", "desired", "is",
    "equal", "to", "be", "will", "would", "should", "must", "which", "as", "follows",
    "actually", "really", "still"))  # 'The answer is actually 6' states 6
COPULAS = frozenset((
    "is", "are", "was", "were", "equals", "equal", "=", ":", "be", "becomes", "remains", "gives", "makes", "totals",
    "it's", "that's", "there's", "what's", "here's", "has", "have", "had", "costs", "weighs", "needs", "takes",
    "took", "spent", "spends", "earns", "earned", "pays", "paid", "sold", "bought", "saved", "owes", "receives",
    "received", "get", "gets", "got", "obtain", "find", "found", "yields"))
DENY = frozenset((
    "reciprocal", "inverse", "opposite", "negative", "negation", "minus", "plus", "square", "squared", "cube", "cubed",
    "sqrt", "log", "logarithm", "twice", "thrice", "double", "triple", "half", "quarter", "third",
    "percent", "percentage", "not", "no", "never", "neither", "nor", "or", "either", "maybe", "perhaps", "possibly",
    "probably", "likely", "approximately", "approx", "about", "around", "roughly", "nearly", "almost", "estimated",
    "least", "most", "more", "less", "fewer", "than", "over", "under", "above", "below", "upwards", "upward", "up",
    "shy", "short", "beyond", "within", "between", "from", "except", "excluding", "times", "power", "factorial", "if",
    "when", "unless", "otherwise", "wrong", "incorrect", "isn't", "aren't", "wasn't", "ago", "mod", "modulo", "by",
    "divided", "multiplied", "increased", "decreased", "reduced", "added", "subtracted", "next", "previous",
    "preceding", "following", "successor", "predecessor", "absolute", "complement", "exponent"))
_CONDITIONS = frozenset(("when", "if", "for", "unless", "where", "whenever", "with", "given", "assuming", "provided"))
_TOKENS = re.compile(r"[A-Za-z][A-Za-z'’]*|[=:]")
_ASSIGNED = re.compile(r"\s*[A-Za-z]\s*=\s*")
_LEAD = re.compile(r"[A-Za-z'’=:\s,*]*")  # the words before a number: letters, '=' and ':' (no digit, no LaTeX)


def lead_end(text: str) -> int:
    """Where the number after droppable leading words starts in `text` (see the module docstring); 0 when the words
    before it cannot go (or there are none)."""
    lead = _LEAD.match(text)
    tokens = [t.lower().replace("’", "'") for t in _TOKENS.findall(lead.group())]
    if not tokens or lead.end() == len(text) or any(t in DENY for t in tokens) or _ASSIGNED.fullmatch(lead.group()):
        return 0  # 'x = 4' stays an assignment
    copula = max((i for i, t in enumerate(tokens) if t in COPULAS), default=-1)
    if len(tokens) > 16 or not all(t in FILLERS for t in tokens[copula + 1:]):
        return 0
    return lead.end()


def keeps_value(word: str) -> bool:
    """Whether a word after a number may be dropped: not one that changes, bounds or hedges it, or starts a condition
    (see the module docstring)."""
    word = word.lower().strip(".,:;!?")
    return not (changes_count(word) or word in DENY or word in _CONDITIONS)
