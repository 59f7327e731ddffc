"""What stands between two answer statements and joins them into one.
Strings only, linear: every pattern is a single pass with bounded repeats.

Decisions (tests/test_math_r4_hedges.py; rlvr.verifiers.math.latex.connective and list_gap use these):
- Spacing and glue typeset nothing but space or a break, so between two boxes they join them as a space does,
  whatever the command: read by family, not by a list of names, since the names are open-ended (`\\hskip 1em`,
  `\\kern1em`, `\\mkern9mu`, `\\hfilll`, `\\negthinspace`, `\\strut`, `\\nobreak`, `\\relax`, `\\rule{1cm}{0pt}`,
  `\\\\[2pt]`, `\\break`, `\\pagebreak`), with their dimensions; HTML breaks and spaces (`<br>`, `&nbsp;`) too.
- A relation or an operator between two statements (`\\boxed{5} = \\boxed{6}`, `\\equiv`, `\\iff`, `\\slash`, `‖`,
  `∨`) offers both: a hedge, never the second alone. So do case and option labels (`Case 2:`, `Option B:`) and a
  label that names another answer (`Alternate answer: 6`, `Another answer: 6`; also `Other
  interpretation: 6`, `Another reading: 6`, `Another possibility:`) and a case condition on a variable (`for even n`,
  `when odd`). Not list items for a list
  reference: only spacing joins those (list_gap).
"""
from __future__ import annotations

import re

_DIMEN = r"[-+]?\s*(?:\d{1,6}(?:\.\d{0,6})?|\.\d{1,6})\s*(?:em|ex|pt|pc|mu|cm|mm|in|bp|dd|cc|sp|px|true\s*pt|fil{1,3})"
_GLUE_SPEC = rf"\s*=?\s*{_DIMEN}(?:\s*plus\s*{_DIMEN})?(?:\s*minus\s*{_DIMEN})?"
_ARGUMENT = r"\s*(?:\{[^{}]{0,40}\}|\[[^\[\]]{0,40}\])"
# A control word of the spacing families: its name ends in space/skip/kern/break/strut/phantom/quad/glue, or it is a
# fill (\\hfil, \\vfilll), a rule or one of the commands that typeset nothing (\\relax, \\par, \\null, \\indent).
_SPACING_NAME = (r"[A-Za-z]{0,12}(?:space|skip|kern|break|strut|phantom|quad|glue)|[hv]fil{1,3}|[hv]ss|rule|relax|par"
                 r"|null|(?:no)?indent|leavevmode|newline|cr|crcr|(?:display|text|script)style|smash|mathclose"
                 r"|mathopen|nonumber|notag")
SPACING_NAME = re.compile(_SPACING_NAME)  # the name alone (rlvr.verifiers.math.operators: no operator)
GLUE = re.compile(rf"\\(?:{_SPACING_NAME})(?![A-Za-z])\*?(?:{_GLUE_SPEC}|(?:{_ARGUMENT}){{0,3}})"
                  rf"|\\\\\*?(?:\s*\[[^\[\]]{{0,20}}\])?"  # '\\\\[2pt]'
                  r"|<\s*/?\s*(?:br|p|hr|wbr)\s*/?\s*>|&(?:nbsp|ensp|emsp|thinsp|#160|#xa0);", re.IGNORECASE)
# Between statements only: a relation or operator offers both sides; so do case and option labels.
BETWEEN = re.compile(
    r"[=≠≡≈≅≃⇔↔⟺‖∨∧∥]|\\(?:equiv|iff|neq?|approx|cong|simeq|sim|leftrightarrow|Leftrightarrow|longleftrightarrow"
    r"|Longleftrightarrow|slash|backslash|lor|vee|land|wedge|Vert|lVert|rVert|vert|lvert|rvert|parallel|mid|pm|mp"
    r"|colon|circ|star|ast|oplus|otimes|cdot|times|div|bullet|diamond|textendash|textemdash)(?![A-Za-z])"
    r"|\b(?:case|option|choice|scenario|possibility|alternat(?:e|ive)|alt|another|other|second|backup|secondary)\b"
    r"(?:\s*(?:answer|solution|value|result|interpretation|reading|view|approach|method|guess|possibility|option|case|scenario))?(?:\s*\(?\s*(?:\d{1,2}|[A-Za-z](?![A-Za-z]))\s*\)?)?\s*:?(?:\s*the\b)?"
    r"|\brespectively\b|\bresp\b\.?"
    # a case condition ('\\boxed{3} for even n; \\boxed{4} for odd n')
    r"|\b(?:for|when|if)\s+(?:all\s+)?(?:even|odd|positive|negative|non-?negative|prime|composite|large|small)\b",
    re.IGNORECASE)


def spaced(gap: str) -> str:
    """`gap` with its spacing and glue commands as spaces (see the module docstring)."""
    return GLUE.sub(" ", gap)


def joined(gap: str) -> str:
    """`gap` with its spacing, relations, operators and case labels as spaces: what joins two statements into one."""
    return BETWEEN.sub(" ", GLUE.sub(" ", gap))


# A line below the final statement that holds only another value is a second candidate (before,
# a blank line, a bullet or a number word got past the next-line rule: 'Answer: 5\n\n6', 'Answer:\n5\n- 6',
# '\\boxed{5}\n6'). At most two blank lines, then: a bullet, 'or', '$' or '**' around one number or one word.
_BELOW = re.compile(r"(?:[ \t]*\r?\n){1,3}(?:[ \t]*(?:or|either|and/or)[ \t]*(?:\r?\n[ \t]*){1,3})?"
                    r"[ \t]*(?:[-*+\u2022][ \t]+)?(?:\$|\\\(|\*\*)?[ \t]*"
                    r"([-+\u2212]?\d[\d,./]*|[A-Za-z]{3,12}(?:-[A-Za-z]{3,12})?)"
                    r"[ \t]*(?:\$|\\\)|\*\*)?[ \t]*\.?[ \t]*(?=\r?\n|\Z)", re.IGNORECASE)
_LINE_REST = re.compile(r"[ \t.$)\]*]*(?=\r?\n)")  # what may close a box's line: '$', '.', '**'


def value_below(text: str, end: int, line_end: int) -> re.Match | None:
    """The line below the final statement (text[:end]; an 'Answer:' line ends at `line_end`, a box at -1) when it
    holds only a value (group 1: the number or word); None otherwise. A box counts only at the end of its line."""
    if line_end < 0:
        rest = _LINE_REST.match(text, end, min(len(text), end + 40))
        if rest is None:
            return None
        line_end = rest.end()
    return _BELOW.match(text, line_end, min(len(text), line_end + 200))
