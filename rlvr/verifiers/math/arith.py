"""Plain arithmetic read exactly ('12 + 22', '3 × 4 - 1'), for the rules that let arithmetic restate or explain a value
(rlvr.verifiers.math.around, corrections). Moved out of around.py to keep it under 400 lines.
Strings only: one pass of anchored token matches.
"""
from __future__ import annotations

import re
from fractions import Fraction

_ARITHMETIC = re.compile(r"\s*(\d+(?:\.\d+)?|[-+*/×÷·=]|\\times|\\cdot|\\div)")


def arithmetic(expression: str) -> Fraction | None:
    """The value of plain arithmetic ('12 + 22', '3 × 4 - 1'); None for anything else."""
    tokens, at = [], 0
    while at < len(expression.rstrip()):
        token = _ARITHMETIC.match(expression, at)
        if token is None:
            return None
        tokens.append(token.group(1))
        at = token.end()
    try:
        terms, sign, product, operator = Fraction(0), 1, None, "*"
        for i, token in enumerate(tokens):
            if i % 2 == 0:
                number = Fraction(token)
                product = number if product is None else product * number if operator == "*" else product / number
            elif token in "+-":
                terms, sign, product = terms + sign * product, 1 if token == "+" else -1, None
            else:
                operator = "/" if token in ("/", "÷", "\\div") else "*"
        return terms + sign * product if tokens and len(tokens) % 2 else None
    except (ValueError, ZeroDivisionError, TypeError):
        return None
