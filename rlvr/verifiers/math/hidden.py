"""Text a reader never sees or is told is not the answer. Strings
only, linear: one pass of `find` per kind, bounded windows before a box.

Decisions (tests/test_math_r5_statements.py, tests/test_math_r5_denials.py; corpus rows 'r5_statement', 'r5_denial'):
- An HTML comment ('<!-- Final answer: 4 -->'; unclosed, it hides the rest, as HTML does) and a LaTeX comment line
  (a line whose first mark is '%') are not rendered: they are blanked before the answer is looked for (unhidden). A
  '%' after other text is a percent sign ('50% of 8').
- Fenced code ('```') quotes code: an answer statement inside it counts only when none lies outside every fence
  (fenced), so 'The answer is 3.\\n```\\n\\boxed{4}\\n```' reads 3 and '```\\n\\boxed{42}\\n```' alone still reads 42.
- A box whose own clause names it as compared, quoted or mistaken ('For comparison, a wrong method gives \\boxed{4}',
  'The naive answer is \\boxed{4}', 'A common mistake gives \\boxed{4}', '(Example from a different problem:
  \\boxed{4})') is no statement (mentioned); when only such boxes are left the answer is UNPARSEABLE (NOT_THE_ANSWER).
  A clause that also calls its value correct, right, actual, true or final ('the correct answer, not the naive one,
  is \\boxed{4}') names the answer.
"""
from __future__ import annotations

import re

NOT_THE_ANSWER = "unparseable: not the answer (a compared, quoted or mistaken value)"
_LATEX_COMMENT = re.compile(r"(?m)^[ \t]*(?<!\\)%[^\n]*")
_CLAUSE_START = re.compile(r"[.!?;](?:\s|$)|\n|,\s*(?:but|however|whereas|while|yet)\b|\b(?:but|however)\b")
_MENTION = re.compile(
    r"\b(?:for\s+(?:comparison|contrast)|by\s+contrast|compare[ds]?\b|example\s+from|(?:from|for)\s+a\s+different"
    r"\s+problem|(?:a|one|the)\s+(?:common|typical|frequent|classic|popular)\s+(?:mistake|error|pitfall|trap|wrong)"
    r"|(?:naive|wrong|incorrect|mistaken|erroneous|careless|tempting|bogus)\s+(?:answer|approach|method|guess|solution"
    r"|result|reading|calculation|way|attempt|value))\b", re.IGNORECASE)
_NAMES_ANSWER = re.compile(r"\b(?:correct|right|actual|true|real|final)\b", re.IGNORECASE)


def unhidden(text: str) -> str:
    """`text` with its HTML comments and LaTeX comment lines blanked (see the module docstring)."""
    if "<!--" in text:
        parts, pos = [], 0
        while (opened := text.find("<!--", pos)) >= 0:
            close = text.find("-->", opened + 4)
            parts.append(text[pos:opened])
            pos = len(text) if close < 0 else close + 3
        text = "".join(parts) + text[pos:]
    return _LATEX_COMMENT.sub("", text) if "%" in text else text


def fenced(text: str) -> list[tuple[int, int]]:
    """The spans of fenced code blocks ('```' to '```'; an unclosed one runs to the end), in text order."""
    spans, pos = [], 0
    while (opened := text.find("```", pos)) >= 0:
        close = text.find("```", opened + 3)
        spans.append((opened, len(text) if close < 0 else close + 3))
        if close < 0:
            break
        pos = close + 3
    return spans


def mentioned(text: str, start: int) -> bool:
    """Whether the clause before the box at `start` names it as compared, quoted or mistaken (module docstring)."""
    low = max(0, start - 160)
    starts = [m.end() for m in _CLAUSE_START.finditer(text, low, start)]
    clause = text[starts[-1] if starts else low:start]
    return _MENTION.search(clause) is not None and _NAMES_ANSWER.search(clause) is None
