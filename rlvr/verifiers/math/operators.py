"""Operators and constructs math-verify cannot read. Strings only, linear.

math-verify drops a LaTeX command it does not know, and a character such as '?' or '@', and then reads what is left:
`\\boxed{3 \\slash 4}` (3/4) was 4, `\\boxed{3 \\colon 4}` (the ratio) was 4, and so with `\\circ`, `\\star`,
`\\oplus`, `\\#`. A list of such operators is never complete, so the rule is the other way round:

Decisions (tests/test_math_r4_operators.py; corpus form 'r4_operator'):
- A command that is not one math-verify reads (KNOWN: numbers' and sets' operators, relations, functions, Greek
  letters, fonts, spacing, delimiters), or one of '?', '@', '#', '\\#', '\\S', '\\P', '\\_', standing between two
  parts of the answer, makes it WRONG: the answer is not one of its sides. A reference with the same construct is
  compared as written (math-verify then drops it on both sides). `^\\circ` (degrees) is a unit, not an operator.
- `a \\choose b` is the binomial coefficient: it is compared as `\\binom{a}{b}` (binomials;
  math-verify read '10 \\choose 4' as 4), and a `\\choose` that cannot be so read (two in one group, which TeX calls
  ambiguous) is an operator math-verify cannot read.
- A condition in a text group (`\\boxed{3 \\text{ if } n \\text{ even}}`: 'if', 'when', 'unless', 'otherwise',
  'for', 'where', 'provided', 'assuming') is a case answer, never its value: WRONG unless the reference says it too.
"""
from __future__ import annotations

import re
import unicodedata

from rlvr.verifiers.math.gaps import SPACING_NAME

# Commands math-verify (latex2sympy) reads, or that carry no value of their own (fonts, spacing, sizing).
KNOWN = frozenset((
    "frac dfrac tfrac cfrac sqrt cdot times div pm mp sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh "
    "log ln lg exp lim sum prod int binom dbinom tbinom pi infty infinity alpha beta gamma delta epsilon "
    "varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi omicron rho varrho sigma varsigma tau upsilon phi "
    "varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega le leq ge geq lt gt ne neq "
    "approx equiv sim cong in notin ni subset subseteq supset supseteq cup cap setminus emptyset varnothing "
    "mathbb mathbf mathrm mathit mathcal mathsf mathtt mathfrak boldsymbol bm text textrm textbf textit textup "
    "textnormal mbox operatorname mathop displaystyle textstyle scriptstyle left right big Big bigg Bigg bigl bigr "
    "Bigl Bigr biggl biggr middle langle rangle lfloor rfloor lceil rceil lvert rvert vert lVert rVert Vert mid "
    "begin end quad qquad overline underline bar hat vec tilde dot ddot widehat widetilde overrightarrow prime "
    "degree deg cdots ldots dots vdots land lor wedge vee neg lnot to rightarrow Rightarrow implies iff gcd "
    "lcm max min mod bmod pmod det arg dim ker Re Im angle triangle parallel leqslant geqslant nleq ngeq "
    "hspace phantom hphantom vphantom boxed fbox cr newline gets mapsto infin hline limits nolimits ell hbar aleph "
    "underbrace overbrace stackrel xrightarrow nabla".split()))
_COMMAND = re.compile(r"\\([A-Za-z]+)|\\([#S_P])(?![A-Za-z])|([?@#])|([^\x00-\x7f])")
# Symbols outside ASCII that math-verify reads (or that are units and primes, judged elsewhere); any other symbol or
# punctuation mark ('★', '§', '‖') is an operator it drops. An en dash between two values is a range or an operator
# (a leading one is a minus: numbers.canonical): math-verify read '5 – 6' as 6.
_KNOWN_SYMBOLS = frozenset("≤≥≠×÷·−∞π√∪∩∈∉⊂⊆⊃⊇∅±∓°′″‴’≈≡∼→⇒⇔↔∧∨¬∠△∥…⋅ℝℕℤℚℂ½⅓⅔¼¾⅛⅜⅝⅞²³¹⁰⁴⁵⁶⁷⁸⁹⁻€£¥¢₹")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ")
_SPACE_OR_GROUP = re.compile(r"[\s{}$]*")
_CONDITION = re.compile(r"\\(?:text|textrm|mathrm|mbox|textnormal|textit)\s*\{[^{}]{0,80}?\b(?:if|when|whenever|unless"
                        r"|otherwise|for(?!\s+(?:all|every|each|any)\b)|where|provided|assuming|iff)\b", re.IGNORECASE)


_CHOOSE = re.compile(r"\\choose(?![A-Za-z])")
MAX_CHOOSE = 8  # binomials rewritten per answer; each costs a scan of its group (answers are short)


def _group(text: str, at: int, end: int) -> tuple[int, int]:
    """The brace group around text[at:end]: from after its unmatched '{' (or 0) to its unmatched '}' (or the end).
    '\\{' and '\\}' are set braces, not groups."""
    start, depth = at, 0
    while start > 0:
        ch = text[start - 1]
        if ch in "{}" and text[start - 2:start - 1] != "\\":
            depth += 1 if ch == "}" else -1
            if depth < 0:
                break
        start -= 1
    stop, depth = end, 0
    while stop < len(text):
        ch = text[stop]
        if ch in "{}" and text[stop - 1] != "\\":
            depth += 1 if ch == "{" else -1
            if depth < 0:
                break
        stop += 1
    return start, stop


def binomials(answer: str) -> str:
    """`answer` with each `a \\choose b` (TeX: the whole group before and after it) as `\\binom{a}{b}`; a group with
    two, or an empty side, is left as written (see the module docstring)."""
    for _ in range(MAX_CHOOSE):
        match = _CHOOSE.search(answer)
        if match is None:
            break
        start, stop = _group(answer, match.start(), match.end())
        top, bottom = answer[start:match.start()].strip(), answer[match.end():stop].strip()
        if not top or not bottom or _CHOOSE.search(bottom):
            break
        answer = f"{answer[:start]}\\binom{{{top}}}{{{bottom}}}{answer[stop:]}"
    return answer


def _unknown(answer: str) -> list[str]:
    """The constructs of `answer` that math-verify cannot read, each with something on both sides of it."""
    found = []
    answer = binomials(answer)  # a '\\choose' left is one that cannot be read as a binomial
    for match in _COMMAND.finditer(answer):
        name, symbol = match.group(1), match.group(4)
        if symbol is not None and (symbol in _KNOWN_SYMBOLS or unicodedata.category(symbol)[0] not in "SP"):
            continue  # a letter or digit of another script, or a symbol math-verify reads
        if name is not None and (name in KNOWN or SPACING_NAME.fullmatch(name)):
            continue
        if name == "circ" and _DEGREES.search(answer, max(0, match.start() - 8), match.end()):
            continue  # '30^\\circ' is degrees
        before = answer[:match.start()].strip(" \t\n{}$")
        after = answer[_SPACE_OR_GROUP.match(answer, match.end()).end():]
        if before and after:
            found.append(match.group())
    return found


def operator_problem(pred: str, gold: str) -> str | None:
    """Why `pred` holds a construct math-verify would drop to read one of its sides (see the module docstring); None
    when it holds none, or the reference has the same."""
    condition = _CONDITION.search(pred)
    if condition and not _CONDITION.search(gold):
        return "a condition in the answer ('if', 'when', ...) makes it a case answer, not a value"
    theirs = set(_unknown(gold))
    unread = [c for c in _unknown(pred) if c not in theirs]
    if unread:
        return f"{unread[0]!r} between two values is an operator math-verify cannot read; the answer is not one side"
    return None
