"""A relation with nothing on its left: '\\neq 5', '\\geq 5',
'!= 5' say how the answer relates to 5, not that it is 5, and math-verify drops the relation and reads 5.

Decisions (tests/test_math_r4_relations.py; corpus rows of form 'relation_prefix'):
- The check reads what may stand before a relation and still leave its left side empty, instead of listing the
  strings seen: spacing (`\\,`, `\\quad`, `~`, `\\displaystyle`), math delimiters (`$`, `\\(`), an opening
  brace, bracket, parenthesis or font group (`{\\neq} 5`, `(\\geq 5)`, `\\mathrm{\\geq}`), an empty group (`{}`,
  `\\text{ }`), `\\left.`, a backtick; and an assertion ('=', ':=', ':', '\\equiv', 'x =') whose right side opens with
  another relation ('= \\ge 5' asserts nothing: it bounds). '= 5', 'x := 5' and '\\equiv 5' still state 5.
- Relations are a broad list: ASCII ('!=', '=/=', '/=', '<>', '<', '>'), HTML entities, Unicode (≠ ≥ ≃ ≅ ≈ ∼ ∈ ⊂ ...)
  and LaTeX commands (negated forms, '\\simeq', '\\cong', '\\nsim', '\\nequiv', '\\approx', '\\sim', order and set
  relations). An HTML tag ('<b>42</b>') is no relation.
- So is a binary operator with nothing on its left ('\\div 4', '\\times 4', '\\cdot 4', '÷ 4',
  '* 4', '/ 4'): math-verify dropped it and read 4. A sign ('-4', '+4', '\\pm 4') is no such operator.
- The answer is WRONG unless the reference opens with the same relation (spellings of one relation are the same:
  '\\ne', '≠', '!=').
"""
from __future__ import annotations

import re

# What may stand before a relation with its left side still empty (see the module docstring); one step at a time
_BEFORE = re.compile(r"(?:\s|\$|`|~|\\[(\[]|\\[,;:! ]|\\q?quad(?![A-Za-z])|\\(?:display|text|script)style(?![A-Za-z])"
                     r"|\\left\s*(?:\.|\(|\[|\\\{)|\{\s*\}|[{}(\[]|\\(?:mathrm|mathbf|mathit|text\w*|mbox|operatorname)"
                     r"\s*\{)*")
# An assertion of the value: its right side may open with a relation, which then bounds the value instead
_ASSERTION = re.compile(r"(?:[A-Za-z](?:_\{?\w+\}?)?\s*)?(?::=|=(?![=/<>])|:(?!=)|\\equiv(?![A-Za-z])"
                        r"|\\coloneqq(?![A-Za-z]))")
_COMMANDS = (r"neq?|not(?:in)?|nequiv|ncong|nsim|n?(?:[lg]eq?q?|[lg]eqslant|[lg]t|less\w*|gtr\w*|su[bp]set\w*|mid"
             r"|parallel|prec\w*|succ\w*)|sim(?:eq)?|cong|approx(?:eq)?|asymp|ll|gg|lll|ggg|in|ni|owns|(?:var)?propto"
             r"|perp|backsim|eqsim|thicksim|thickapprox|lesssim|gtrsim")
_RELATION = re.compile(rf"(?:!=|=/=|/=|<>|=<|<(?![A-Za-z/][A-Za-z0-9]*\s*>)|>|&(?:lt|gt|ne|ge|le);"
                       rf"|[≠≥≤≦≧⩽⩾≪≫∈∉∋∝⊂⊆⊃⊇⊊⊋∣∤∥⊥≲≳≺≻≼≽≮≯≰≱≃≅≄≆≇≉≁≢≈∼]|\\(?:{_COMMANDS})(?![A-Za-z]))")
# Spellings of one relation, so that a reference's '\\ge' admits the completion's '≥'
_SAME = {"ne": ("\\ne", "\\neq", "≠", "!=", "=/=", "/=", "<>", "&ne;", "\\not"),
         "ge": ("\\ge", "\\geq", "≥", "\\geqslant", "⩾", "≧", "\\geqq", "&ge;"),
         "le": ("\\le", "\\leq", "≤", "\\leqslant", "⩽", "≦", "\\leqq", "&le;", "=<"),
         "gt": ("\\gt", ">", "&gt;"), "lt": ("\\lt", "<", "&lt;"),
         "simeq": ("\\simeq", "≃"), "cong": ("\\cong", "≅"), "approx": ("\\approx", "≈"), "sim": ("\\sim", "∼")}
_NAME = {spelling: name for name, spellings in _SAME.items() for spelling in spellings}
_WINDOW = 200  # what stands before a relation is short; longer openings are read no further


def leading_relation(answer: str) -> str | None:
    """The relation an answer opens with, its left side empty (see the module docstring), as one name per relation;
    None when it opens otherwise. Bounded: two assertions at most, each after a prefix read by one anchored match."""
    at = _BEFORE.match(answer, 0, _WINDOW).end()
    for _ in range(3):
        relation = _RELATION.match(answer, at)
        if relation:
            return _NAME.get(relation.group(), relation.group())
        assertion = _ASSERTION.match(answer, at)
        if assertion is None:
            return None
        at = _BEFORE.match(answer, assertion.end(), assertion.end() + _WINDOW).end()
    return None


# A binary operator with nothing on its left; '**' is bold, never an operator
_OPERATOR = re.compile(r"\\(?:div|times|cdot|ast|over|bmod)(?![A-Za-z])|[÷×⋅·/]|\*(?!\*)")


def leading_operator(answer: str) -> str | None:
    """The binary operator an answer opens with, its left side empty ('\\div 4' -> '\\div'); None otherwise."""
    operator = _OPERATOR.match(answer, _BEFORE.match(answer, 0, _WINDOW).end())
    return operator.group() if operator else None


def relation_problem(pred: str, gold: str) -> str | None:
    """Why `pred` states no value (it opens with a relation or an operator that `gold` does not open with); None
    otherwise."""
    relation = leading_relation(pred)
    if relation is not None and relation != leading_relation(gold):
        return f"a relation ({relation!r}) with nothing on its left bounds or excludes the value; it states none"
    operator = None if relation is not None else leading_operator(pred)  # '/= 5' is a relation
    if operator is not None and operator != leading_operator(gold):
        return f"an operator ({operator!r}) with nothing on its left makes it no value"
    return None
