"""Markdown and HTML emphasis read as the text without it.

Decisions (tests/test_math_r4_emphasis.py; corpus rows of form 'emphasis_refusal'):
- Paired bold delimiters ('**', '***', '__') and paired HTML emphasis tags ('<b>', '<strong>', '<em>', '<i>') are
  dropped from the completion before its answer is looked for, so every rule reads the words and values themselves:
  'Answer: **4** **2**' is 'Answer: 4 2' (two values), 'The answer is **not** \\boxed{4}' is a negation, 'Answer:
  − **4**' is −4, 'Answer: 42 **is false**' a denial, 'Answer: <b>42</b>' is 42.
- Only pairs that GFM reads as emphasis go: the opener follows no word character, '*' or backslash and precedes a
  non-space; the closer follows a non-space and precedes no word character or '*'; one paragraph at most. So a
  power stays a power ('\\boxed{5}**2', '2**\\boxed{5}', 'x**2', '**\\boxed{5}**2'): nothing closes it.
- Linear: a pair's inside holds no '**' (the scan from an opener stops at the next one), at most 2000 characters.
"""
from __future__ import annotations

import re

_BOLD = re.compile(r"(?<![\w*\\])(\*\*\*?|__)(?=[^\s*_])((?:[^*\n]|\*(?!\*)|\n(?![ \t]*\n)){1,2000}?)"
                   r"(?<=[^\s*])\1(?![\w*])")
_TAG = re.compile(r"<(b|strong|em|i)>([^<>]{1,2000}?)</\1>", re.IGNORECASE)


def plain(text: str) -> str:
    """`text` with its paired emphasis delimiters dropped, their insides kept (see the module docstring)."""
    if "**" in text or "__" in text:
        text = _BOLD.sub(r"\2", text)
    return _TAG.sub(r"\2", text) if "</" in text else text
