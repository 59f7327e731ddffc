"""What stands around the final answer: where a statement's value ends, and what
before or after it changes, retracts or hedges it. Strings only, linear, bounded windows.

Decisions (tests/test_math_around.py; corpus rows of forms 'explanation', 'retraction', 'trailing_hedge',
'box_context'):
- An 'Answer:' line states its value in its first clause (value_end): it ends at its first sentence end and at an
  explanation ('because', 'since', ', as computed ...', ', which is ...'), and a trailing parenthesis that restates the
  value ('34 (12 + 22)', '5 (five)') is dropped. The value is read from that clause only, never the last number of
  the line: 'The final answer is 18. She has 20 dollars left.' does not read 20.
- After the final statement (trailer_problem): a retraction ('the answer isn't 5', 'that is wrong') makes it
  UNPARSEABLE; a hedge word with another number in its sentence ('\\boxed{3}, though 4 is also possible', 'Answer:
  3\\nor 4') is a hedge (WRONG); so is a later sentence on the answer's own line with another number ('The final answer
  is 18. She has 20 dollars left.'), unless it explains ('This is because ...'). A number equal to the answer, or
  marked as an approximation of it ('or about 0.87'), is no other value. Only TRAILER_CHARS after the statement are
  read: nothing further is paid for anyway, since only the final statement is compared.
- 'or' after 'not 4' rejects both ("so it's not 4 or 6" offers no value), and '(not 5 m)'
  after the value rejects another one, it does not retract the answer ('Answer: 5 cm (not 5 m)').
- A box is its content only when nothing next to it changes it (box_problem): a sign, an operator, a digit or a
  value word before it ('-\\boxed{3}', 'twice \\boxed{5}', '3 or \\boxed{4}'), a power, a command, a digit or a value
  word after it ('\\boxed{3}^2', '\\boxed{2}\\pi', '\\boxed{5} million') make it WRONG. A percent sign after it is
  its percent; a unit after it is its unit ('\\boxed{5} cm', compared by rlvr.verifiers.math.units).
- Without a statement (modes last_number, latex): a negation right before the final number ('The answer isn't 5')
  or a retraction after it makes it UNPARSEABLE (fallback_problem).
- Withdrawn answers (tests/test_math_withdrawn.py): a denial right after a value ('\\boxed{5} is false', 'Answer: 5
  fails') is a retraction (denied); a negation before a box, in a \\text{} too ('cannot be \\boxed{5}'), a case with
  another value in a parenthesis after it ('(6 with endpoints)'), a value alone on the next line of an 'Answer:' line
  and an 'alternative' label are hedges or changes; a markdown bullet is no minus sign.
"""
from __future__ import annotations

import re
from fractions import Fraction
from itertools import islice

from rlvr.verifiers.math.arith import arithmetic
from rlvr.verifiers.math.forms import changes_count, counted_value, is_unit
from rlvr.verifiers.math.gaps import value_below
from rlvr.verifiers.math.numbers import NUMBER_IN_TEXT, as_number, last_digit
from rlvr.verifiers.math.prose import COPULAS, DENY
from rlvr.verifiers.math.units import unit_of
from rlvr.verifiers.math.words import words_value

TRAILER_CHARS = 1000  # what is read after the final statement
_RESTATED_CHARS = 200  # the longest value a parenthesis after it may restate
RETRACTED = "unparseable: the final answer is retracted after it"
HEDGED = "hedged: several answers"
SENTENCE_END = re.compile(r"(?<=[^\s.])\.\s+(?=[A-Z<])")
_MEANINGFUL = re.compile(r"[^\s*$.,;:]")
_WHY = (r"(?:\s*+[,;]\s*+|\s++)(?:because|since|given\s+that|due\s+to|(?:this|that|it)\s+is\s+because|which\s+(?:is|was"
        r"|comes|follows|gives|equals|we)|as\s+(?:computed|calculated|shown|found|obtained|derived|stated|explained"
        r"|required|expected|above|before|in\s+step))\b", r"\s*+[,;]\s*+(?:as|not)\b")  # '5, not 6' rejects 6
# possessive: no word starts with a space, so giving one back never helps, and not trying saves a pass over a run
_EXPLANATION_HERE = re.compile("|".join(_WHY), re.IGNORECASE)
# Elsewhere tried only where a run of spaces starts: tried inside one too, each try ran to the run's end (quadratic:
# 64 lines of 'Answer: 1' and 2500 spaces cost 25 s). A match inside a run is found from the run's start as well.
_EXPLANATION = re.compile("|".join(f"(?<!\\s){why}" for why in _WHY), re.IGNORECASE)
_EXPLAINS = re.compile(r"(?:[\s,;:.$*)\]}]|\\[)\]])*(?:(?:this|that|it)\s+is\s+because|because|since|as\b"
                       r"|given\s+that|due\s+to|which|this\s+(?:follows|comes)\s+from|(?:explanation|reason(?:ing)?|check|verification|proof)\s*:)",
                       re.IGNORECASE)
_RETRACTION = re.compile(
    r"\b(?:wrong|incorrect|mistaken|erroneous|scratch\s+that|disregard|never\s*mind|not\s+(?:correct|right|valid|the"
    r"\s+(?:right|correct|final)?\s*answer))\b|\banswer\s+(?:is|was)\s*(?:n['’]?t|\s+not)\b"
    r"|\b(?:is|was)\s*n['’]t\s+\$?\\?(?:boxed\{)?[-\d.]|\b(?:is|was)\s+not\s+\$?\\?(?:boxed\{)?[-\d.]", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:or|either|maybe|perhaps|possibly|might|could|alternatively|otherwise|though|although|also"
                    r"|instead|too|if|unless|however|whereas|else|alternative(?=(?:\s+answer)?\s*\)?\s*:))\b",
                    re.IGNORECASE)  # 'if', 'unless', ... and 'Answer (alternative): 6' hedge
_EITHER_SIDE = frozenset(("maybe", "perhaps", "possibly", "might", "could", "also", "instead", "too"))
_APPROX = re.compile(r"\b(?:approximately|approx|about|roughly|around|nearly|equivalently|i\.e|that\s+is)\b|≈|\\approx",
                     re.IGNORECASE)
_NUMBER_WORD = re.compile(r"\b(?:zero|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
                          r"|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty"
                          r"|forty|fifty|sixty|seventy|eighty|ninety)\b", re.IGNORECASE)  # '\\boxed{4}. Or three.'
_BOUNDARY = re.compile(r"[.!?](?:\s|$)|\n")
_NEGATED = re.compile(r"(?:\bis\s*n['’]?t|\bis\s+not|\bnot|≠|\\neq?)\s*\$?\s*\Z", re.IGNORECASE)
_WORD_AFTER = re.compile(r"\s*([A-Za-z]+)")
_NOT = re.compile(r"\bnot\s*\$?\s*\Z", re.IGNORECASE)  # 'The answer is 5, not 6' rejects 6
_OPERATOR_BEFORE = re.compile(r"(?:[-+*/×÷·=^_]|\\(?:times|cdot|div))\s*\$?\s*\Z")  # '3 × 4 = 12', '13_5' (base 5)
_OPERATOR_AFTER = re.compile(r"\s*\$?\s*(?:[-+*/×÷·=^_]|\\(?:times|cdot|div)(?![A-Za-z]))")
# '(see step 2)': a pointer to the work, no value
_NOTE = re.compile(r"\s*(?:see|from|by|using|as\s+in|in|cf\.?|per)\s+(?:step|eq(?:uation)?|part|line|case|lemma"
                   r"|theorem)s?\.?\s*\(?\d{1,3}[a-z]?\)?\.?\s*", re.IGNORECASE)
_NOTE_AFTER = re.compile(rf"\s*\(({_NOTE.pattern})\)", re.IGNORECASE)
_NOT_EITHER = re.compile(r"\b(?:not|neither)\s+[-+\u2212]?\$?\d[\d.,]*\$?\s*,?\s*\Z", re.IGNORECASE)
_NOT_OTHER = re.compile(r"\s*not\s+[-+\u2212]?\d")
_BULLET_LINE = re.compile(r"[ \t]*[-*+\u2022][ \t]+")  # '\n- 6 is also acceptable': a bullet, no minus sign


# ---------------------------------------------------------------- the extent of an 'Answer:' line's value
def value_end(text: str, start: int, end: int, value_of=None) -> int:
    """Where the value of an 'Answer:' line at text[start:end] ends (see the module docstring)."""
    sentence = SENTENCE_END.search(text, start, end)
    end = sentence.start() if sentence else end
    why = _explanation(text, start, end)
    if why and _MEANINGFUL.search(text, start, why.start()):
        end = why.start()
    clause = text[start:end].rstrip(" .!")
    if clause.endswith(")") and (opened := clause.rfind("(")) > 0 and _MEANINGFUL.search(clause, 0, opened):
        if _NOTE.fullmatch(clause, opened + 1, len(clause) - 1) or _restates(clause[opened + 1:-1], clause[:opened]) \
                or _NOT_OTHER.match(clause, opened + 1):  # '5 cm (not 5 m)' rejects another value
            end = start + opened
    return end


def _explanation(text: str, start: int, end: int) -> re.Match | None:
    """The first _EXPLANATION in text[start:end]; `start` may lie inside a run of spaces. Only searched when one of its
    words or a ',' / ';' is there at all: the search cost 0.1 s on a 1 MB line, the check 2 ms."""
    segment = text[start:end].casefold().replace("ı", "i")  # as IGNORECASE matches: "ſınce" is "since"
    if not any(key in segment for key in _EXPLANATION_KEYS):
        return None
    return _EXPLANATION_HERE.match(text, start, end) or _EXPLANATION.search(text, start, end)


_EXPLANATION_KEYS = (",", ";", "because", "since", "given", "due", "which", "as")  # every _WHY match holds one


def _restates(inside: str, value: str) -> bool:
    """Whether a parenthesis restates the value before it: the same number in words or figures, or arithmetic that
    gives it ('34 (12 + 22)', '5 (five)'). Only short values are read: 1 MB of '(3) ' cost 0.3 s."""
    if len(inside) > 80 or len(value) > _RESTATED_CHARS:
        return False
    number = _number(value)
    if number is None:
        return False
    sides = [arithmetic(side) for side in inside.split("=")]
    return all(side == number for side in sides) or words_value(inside) == number


# ---------------------------------------------------------------- words that negate or qualify the value
_NEGATION = re.compile(r"\b(?:not|never|cannot|impossible|wrong|incorrect|mistaken|mistakes?|erroneous|nobody"
                       r"|red\s+herring|[a-z]+n['’]t)\b", re.IGNORECASE)
_QUALIFIER = re.compile(r"\b(?:unlikely|guess(?:ed|es)?|estimated?|estimates|approximate(?:ly)?|approx|rounded|bounds?"
                        r"|naive|at\s+(?:best|most|least)|(?:less|more|fewer|greater|larger|smaller|other)\s+than|up\s+to"
                        r"|times\s+(?:as|larger|bigger|smaller|greater|more|less|fewer)|roughly|about|nearly|almost"
                        r"|exceeds?|anything\s+but|all\s+but)\b", re.IGNORECASE)
_HEDGING = re.compile(r"\b(?:maybe|perhaps|possibly|probably)\b", re.IGNORECASE)  # on a line: a hedge (hedges.py)
_CLAUSE_START = re.compile(r"[.!?;,](?:\s|$)|\n")
# A case of the problem ('For n odd the answer is 3; for n even the answer is 4', 'If $n > 3$, the total is 5'): one
# answer among cases; 'For this problem the answer is 4' names no case
_CASE_START = re.compile(r"[.!?;](?:\s|$)|\n")
_CASE = re.compile(r"\s*(?:\W\s*)?(?:if|when|whenever|for|provided|assuming|unless|otherwise|else)\b"
                   r"(?:(?!\b(?:answer|total|value|result)\b)[^.;!?\n]){0,40}?(?:\b(?:odd|even|positive|negative|nonzero|prime|composite)\b|[<>≤≥≠]"
                   r"|\\(?:[lg]eq?|[lg]t|neq?)(?![A-Za-z]))|\s*(?:otherwise|else)\b", re.IGNORECASE)
QUALIFIED = "the words around the value bound, estimate or qualify it"
QUALIFIED_CHARS = 2400  # a statement's marker and value: longer values are over-long answers (boxes.MAX_ANSWER_CHARS)


def qualified(text: str, start: int, end: int, reach: int, hedging: bool = False) -> str | None:
    """Why the clause of a value (text[start:end], read from the start of its clause at most `reach` characters
    before `start`) negates or retracts it ('Answer: 25 would be wrong', 'the wrong answer is 25', 'The total
    cannot be 120'): RETRACTED; or bounds, estimates or qualifies it ('the lower bound is 25', 'Answer: 5 at best',
    'Maybe 5.'): QUALIFIED; None otherwise. Read by word lists, not one-off patterns."""
    low, end = max(0, start - reach), min(end, start + QUALIFIED_CHARS)
    starts = [m.end() for m in _CLAUSE_START.finditer(text, low, start)]
    low = starts[-1] if starts else low
    if _NEGATION.search(text, low, end):
        return RETRACTED
    found = _QUALIFIER.search(text, low, end) or (hedging and _HEDGING.search(text, low, end))
    cases = [m.end() for m in _CASE_START.finditer(text, max(0, start - reach), start)]  # 'for n even the answer is 4'
    return QUALIFIED if found or _CASE.match(text, cases[-1] if cases else max(0, start - reach), start) else None


# A value, then a predicate that denies it, in its own clause ('\\boxed{5} is false',
# '\\boxed{5 \\text{ fails}}', '<answer>5 is incorrect</answer>', 'Answer: 5 fails'). Only right after a value: 'false'
# alone is an answer ('\\boxed{\\text{False}}'), and 'The other case fails' later explains, it denies nothing.
_DENIED = re.compile(r"(?:[ \t]|[$)\]}]|\\[)\]]|\\(?:text|mathrm|mbox|textrm)\s*\{|</answer>)*(?:,?\s*which\s+)?"
                     r"(?:(?:is|was|would\s+be|will\s+be|seems(?:\s+to\s+be)?|turns\s+out(?:\s+to\s+be)?|proves?"
                     r"(?:\s+to\s+be)?)\s+)?(?:false|untrue|impossible|incorrect|wrong|invalid|fails?|failed"
                     r"|not\s+(?:true|possible|valid|correct|right)|does\s*n[o'’]?t\s+(?:work|hold))\b", re.IGNORECASE)
_VALUE_END = re.compile(r"[\d}$)\]]")


def denied(text: str, start: int, end: int) -> str | None:
    """RETRACTED when a value of the statement at text[start:end], or the statement itself, is followed by a predicate
    that denies it (_DENIED); None otherwise. At most 64 value ends are tried, each match anchored."""
    ends = islice((m.end() for m in _VALUE_END.finditer(text, start, min(end, start + QUALIFIED_CHARS))), 64)
    if any(_DENIED.match(text, at, min(len(text), at + 120)) for at in [*ends, end]):
        return f"{RETRACTED} (a word after it denies it)"
    return None


# ---------------------------------------------------------------- after the final statement
def trailer_problem(text: str, end: int, line_end: int, value: str) -> str | None:
    """Why what follows the final statement (ending at `end`; for an 'Answer:' line, its line ending at `line_end`,
    else -1) retracts or hedges its value; None when it does not (see the module docstring)."""
    window = text[end:end + TRAILER_CHARS]
    note = _NOTE_AFTER.match(window)  # '4 apples (from step 3)': a pointer, no other value
    window = window[note.end():] if note else window
    line_end = line_end - note.end() if note else line_end
    if _RETRACTION.search(window):
        return RETRACTED
    for hedge in islice(_HEDGE.finditer(window), 64):  # the value it offers: after it ('or 4'), or before it too
        low, high = _sentence_around(window, hedge.start(), hedge.end(), 40)  # ('4 might work too')
        low = low if hedge.group().lower() in _EITHER_SIDE else hedge.end()
        if _NOT_EITHER.search(window, max(0, hedge.start() - 24), hedge.start()):
            continue  # "so it's not 4 or 6" rejects both
        if other_number(window[low:hedge.start()] + " " + window[hedge.end():high], value):
            return f"{HEDGED} ({value} and another value with {hedge.group()!r})"
    below = value_below(text, end, line_end)  # 'Answer:\n5\n6', '#### 5\n6', '\\boxed{5}\n\n6' (rlvr...gaps)
    if below and other_number(below.group(1), value):
        return f"{HEDGED} ({value}, then another value on the next line)"
    same_line = window[:max(0, line_end - end)]
    for part in _BOUNDARY.split(same_line, 2)[:2]:  # the rest of its sentence, and the next one
        if not _EXPLAINS.match(part) and other_number(part, value):
            return f"{HEDGED} ({value}, then another value on its line)"
    return None


def _sentence_around(text: str, start: int, end: int, reach: int) -> tuple[int, int]:
    """Where the sentence of text[start:end] starts and ends, at most `reach` characters either side."""
    low = max(0, start - reach)
    boundaries = [m.end() for m in _BOUNDARY.finditer(text, low, start)]
    high = _BOUNDARY.search(text, end, min(len(text), end + reach))
    return boundaries[-1] if boundaries else low, high.start() if high else min(len(text), end + reach)


def other_number(text: str, value: str) -> bool:
    """Whether `text` holds a number other than `value`: not one marked as its approximation, nor one inside arithmetic
    ('3 × 4 = 12' explains, it offers no value)."""
    mine = _number(value)
    for match in islice(NUMBER_IN_TEXT.finditer(text), 16):
        bullet = _BULLET_LINE.fullmatch(text, text.rfind("\n", 0, match.start()) + 1, match.start())
        if _APPROX.search(text, max(0, match.start() - 24), match.start()) or _NOT.search(
                text, max(0, match.start() - 8), match.start()) or (not bullet and _OPERATOR_BEFORE.search(
                text, max(0, match.start() - 12), match.start())) or _OPERATOR_AFTER.match(text, match.end()):
            continue
        number = as_number(match.group())
        word = _WORD_AFTER.match(text, match.end())
        if word and number != mine and as_number(f"{match.group()} {word.group(1)}") == mine is not None:
            continue  # 'or 1 dozen' restates 12
        if (mine is not None and number != mine) or (mine is None and match.group().strip() not in value):
            return True
    words = (words_value(w.group()) for w in islice(_NUMBER_WORD.finditer(text), 16)
             if not _APPROX.search(text, max(0, w.start() - 24), w.start()))
    return mine is not None and any(word is not None and word != mine for word in words)


def _number(value: str) -> Fraction | None:
    number = as_number(value)
    counted = counted_value(value) if number is None else None
    return as_number(counted) if counted else number


# ---------------------------------------------------------------- next to a box
# '*' is a product, but '**' is markdown bold ('**Final Answer:** \\boxed{42}', 'is **\\boxed{42}**'; red
# team) unless glued to the box after a word or bracket ('x**\\boxed{2}', '(x+1)**\\boxed{2}') or set
# apart by spaces on both sides (' ** ' is no markdown emphasis); after a digit, the digit refuses it
_BEFORE_BOX = re.compile(r"(?:(?:[+/^_×÷·\d<≤≥≠≈∼~]|(?<!\*)\*(?!\*)|(?<=[\w)}\]])\*\*(?=\Z)|(?<=\s)\*\*(?=\s)"
                         r"|(?<![-=])>"
                         r"|\\(?:cdot|times|div|pm|mp|neg|lnot|approx|sim|sqrt|[lg]eq?|[lg]t|neq?|leqslant|geqslant)"
                         r"(?![A-Za-z])|\\not(?![A-Za-z])\s*=?|(?:\\[dt]?frac|\\sqrt|[\^_]|\})\s*\{)\s*(?:\$|\\\(|\\\[|\*\*)?\s*"
                         r"|[-\u2212\u2013](?:\$|\\\(|\\\[|\*\*)?)\Z")  # a sign right before it, an operator anywhere
_TAG_END = re.compile(r"<[^<>\n]{1,40}>\s*\Z")
_BULLET = re.compile(r"\s*[-*+]\s+(?:\$|\\\(|\\\[|\*\*)?\s*\Z")
_WORDS_BEFORE = re.compile(r"([A-Za-z'’]+)\s+(?:([A-Za-z'’]+)\s+)?(?:\$|\\\(|\\\[|\*\*)?\s*\Z")
_AFTER_BOX = re.compile(r"(?:[ \t~]|\\[,;:! ]|\$|\\\)|\\\]|\*\*|[)\]}]|\\right\s*[).\]|])*"
                        r"(?:(\\?%|percent\b|pct\b)"
                        r"|\\(?:text|mathrm|mbox)\s*\{([^{}]*)\}|([A-Za-z]+)"
                        r"|([\^_/×÷·\d<>≤≥≠²³½⅓⅔¼¾⅛⅜⅝⅞]|(?<!\*)\*(?!\*)"  # a closing '**' is bold
                        r"|\\(?!(?:right|end|q?quad|pmod)(?![A-Za-z]))[A-Za-z]))")  # '\\pmod{11}' ok
# A sign set apart from the box ('is - \\boxed{3}', '= -\\,\\boxed{3}', '10 - \\boxed{3}'); not a bullet ('- \\boxed{3}'
# at the start of a line) nor a dash after a word ('Final answer - \\boxed{3}')
_DETACHED_SIGN = re.compile(r"[-\u2212\u2013](?:\s|\\[,;:! ])+(?:\$|\\\(|\\\[|\*\*)?\s*\Z")
_WORD_END = re.compile(r"([A-Za-z]+)[*\s]*\Z")
# What is glued to the end of a box changes it ('\\boxed{3},000', '\\boxed{3}.5', '\\boxed{3}e5', '\\boxed{3}!',
# '\\boxed{3}²', '<answer>4</answer>.5'); a sentence's punctuation, a space, a closing delimiter or a unit does not
_GLUED = re.compile(r"[.,](?=\d)|\{,\}|([A-Za-z]+)|[\w!'’|{]")
_OF_WORDS = frozenset(("reciprocal", "inverse", "opposite", "square", "cube", "root", "half", "double", "twice",
                       "negative", "log", "logarithm", "negation", "multiple", "fraction", "percent"))


def box_problem(text: str, start: int, end: int, tag: bool = False, value: str = "") -> tuple[str | None, str]:
    """(why the box at text[start:end] is not its content alone, or None; '\\%' when a percent sign follows it). For
    an <answer> block (`tag`), only a sign before it: what precedes it may be another block. `value`: its content,
    which a parenthesis after it may restate ('\\boxed{34} (12 + 22)')."""
    line_start = text.rfind("\n", max(0, start - 80), start) + 1
    if tag:  # '-<answer>3</answer>', '= - <answer>3</answer>': a sign; '- <answer>' opening a line is a bullet
        signed = _TAG_SIGN.search(text, max(line_start, start - 40), start)
        why = "the answer block is part of an expression (a sign before it)"
        return (why, "") if signed else _after_box(text, end, value)
    before = _TAG_END.sub("", text[max(line_start, start - 40):start])  # '</answer>' is no relation
    if _BRACED_SIGN.search(before):  # '{-}\\boxed{3}'
        return "the box is part of an expression (a braced sign before it)", ""
    if _BEFORE_BOX.search(before) and not (line_start >= start - 40 and _BULLET.fullmatch(before)):
        return "the box is part of an expression (a sign, an operator or a number next to it)", ""
    sign = _DETACHED_SIGN.search(before)
    if sign and (before[:sign.start()].strip() or line_start < start - 40):
        word = _WORD_END.search(before, 0, sign.start())
        if not word or word.group(1).lower() in COPULAS:
            return "the box is part of an expression (a sign before it)", ""
    said = _TEXT_WRAP.sub(r"\1 ", before)  # '$\\text{It is not } \\boxed{5}$': the words of a \\text{} count
    negated = _NEGATED_BOX.search(said)  # 'cannot be \\boxed{5}', "can't be \\boxed{5}"
    if negated:
        return f"a word ({negated.group().strip()!r} before the box)", ""
    words = _WORDS_BEFORE.search(said)
    last = (words.group(2) or words.group(1)).lower() if words else ""
    if last == "but" and words.group(2) and words.group(1).lower() in ("anything", "everything", "all"):
        return f"a word ({words.group(0).strip()!r} before the box)", ""
    if last in DENY or (last == "of" and words.group(2) and words.group(1).lower() in _OF_WORDS):
        hedge = _HEDGE.fullmatch(last) or last in ("either", "nor", "maybe", "perhaps", "possibly", "probably")
        return f"{HEDGED if hedge else 'a word'} ({words.group(0).strip()!r} before the box)", ""
    return _after_box(text, end, value)


_TEXT_WRAP = re.compile(r"\\(?:text|mathrm|mbox|textrm|textit|emph)\s*\{([^{}]*)\}")
_NEGATED_BOX = re.compile(r"\b(?:not|never|cannot|[a-z]+n['’]t|no\s+longer)\s+(?:(?:be|equal|equals|to|exactly"
                          r"|necessarily|always|ever)\s+){0,2}(?:\$|\\\(|\\\[|\*\*)?\s*\Z", re.IGNORECASE)
_TAG_SIGN = re.compile(r"(?:[-\u2212+±]|[=:]\s*[-\u2212±]\s+)\Z")
_BRACED_SIGN = re.compile(r"\{\s*[-\u2212+±]\s*\}\s*(?:\$|\\\(|\\\[)?\s*\Z")  # '{-}\\boxed{3}'
# Spacing after a box, skipped once by itself: a run of 1 MB of spaces was scanned by each pattern that started
# with it, 0.16 s of a 0.2 s budget (bench/math_adversarial.py, box_then_padding). Alone, the greedy run never
# backtracks, and what follows it never starts with spacing.
_SPACE = re.compile(r"(?:[ \t~$]+|\\[,;:! )\]]|\*\*)*")
# After a box: a term ('\\boxed{3} + C', '\\boxed{3} - 2'), a factor in parentheses
# ('\\boxed{3}(2)'), a scale in words ('\\boxed{3} (in thousands)'), 'percent of' a number, or a condition
# ('\\boxed{5} otherwise'). A parenthesis with words ('(in cm)', '(see step 2)') or one that restates it stays.
_TERM_AFTER = re.compile(r"(?:[+±]|[-\u2212]\s*(?:\d|\\[A-Za-z]|[A-Za-z](?![A-Za-z])|\())")
_PAREN_AFTER = re.compile(r"\(([^()\n]{0,80})\)")
_OF_AFTER = re.compile(r"\s+of\b")
_CASE_PAREN = re.compile(r"\s*[-+]?\d[\d.,/]*\s+(?:with|without|including|excluding|counting|if|when|or|otherwise"
                         r"|unless)\b|\s*(?:or|if|when|otherwise|else|unless)\b", re.IGNORECASE)  # '(6 with endpoints)'
_CASE_AFTER = frozenset(("otherwise", "else", "when", "whenever", "if", "unless"))


def _around_box(text: str, end: int, after: re.Match | None, value: str) -> str | None:
    """Why what follows the box at text[:end] makes it part of a larger value (see above), or None."""
    spaced = _SPACE.match(text, end).end()
    if _TERM_AFTER.match(text, spaced):
        return "a term after it"
    paren = _PAREN_AFTER.match(text, spaced)
    other = _NOT_OTHER.match(paren.group(1)) if paren else None  # '(not 3)' rejects another value
    if paren and not (other and as_number(paren.group(1)[other.end() - 1:].strip()) not in (None, _number(value))):
        inside = paren.group(1)
        words = re.findall(r"[A-Za-z]+", inside)
        scale = not _HEDGE.search(inside) and any(changes_count(w) for w in words)  # '(if n is odd)': a hedge
        if (not words and inside.strip() and not _restates(inside, value)) or scale:
            return f"{paren.group().strip()!r} after it"
        if _CASE_PAREN.match(inside) and other_number(inside, value):  # '(6 with endpoints)': a second candidate
            return f"{paren.group().strip()!r} after it (another value)"
    if after is not None and after.group(1) and _OF_AFTER.match(text, after.end()):
        return "'percent of' after it"
    if after is not None and after.group(3) and after.group(3).lower() in _CASE_AFTER:
        return f"a condition ({after.group(3)!r}) after it"
    return None


def _after_box(text: str, end: int, value: str = "") -> tuple[str | None, str]:
    glued = _GLUED.match(text, end)
    if glued and not (glued.group(1) and len(glued.group(1)) > 1 and unit_of("1 " + glued.group(1))):  # '5cm'

        return f"the box is part of a larger value ({glued.group()!r} right after it)", ""
    after = _AFTER_BOX.match(text, end, min(len(text), end + 80))
    why = _around_box(text, end, after, value)
    if why:
        return f"the box is part of a larger value ({why})", ""
    if after is None:
        return None, ""
    if after.group(1):
        return None, "\\%"
    if after.group(4) or (after.group(2) is not None and not is_unit(after.group(2))) or (
            after.group(3) and (changes_count(after.group(3)) or after.group(3).lower() == "to")):
        return f"the box is part of a larger value ({text[end:after.end()].strip()!r} after it)", ""
    return None, ""


# ---------------------------------------------------------------- without a statement
def fallback_problem(text: str, start: int, end: int) -> str | None:
    """Why the final number or environment at text[start:end], read without a statement, is negated or retracted."""
    if _NEGATED.search(text, max(0, start - 16), start):
        return "unparseable: the final number is negated ('is not', 'isn't')"
    digit = last_digit(text[max(0, start - 24):start])  # 'not 4 but 5': that negation is 4's
    low = start if digit < 0 else max(0, start - 24) + digit + 1
    why = qualified(text, low, start, 24 if digit < 0 else 0, hedging=True) or _running_problem(text, start, end)
    if why:
        return why
    return RETRACTED if _RETRACTION.search(text, end, end + TRAILER_CHARS) else None


# Running text: a word that changes the number right before it ('twice 120', '3 through 5'), a
# subject that is a multiple of the unknown ('The value of $2n$ is 34'), or a condition right after it ('5 otherwise')
_CHANGED_BY = DENY - {"minus", "negative", "no", "not", "if", "when", "unless", "by", "or", "either", "nor", "never",
                     "maybe", "perhaps", "possibly", "probably", "likely"}  # a sign word is its sign; hedges and
# negations are read as such (hedges.py, qualified); 'rose by 12 percent' states 12 %;
# a condition word states its condition ('holds exactly when $x \\geq 2$')
_RANGE = frozenset(("through", "thru", "till", "until"))  # '3 to 4' is a run (hedges.py)
_LAST_WORD = re.compile(r"(\d[^A-Za-z\d]*)?\b([A-Za-z]+)\s*(?:\$|\\\(|\*\*)?\s*\Z")
_MULTIPLE_OF = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*\\?(?![aAI]\b)[A-Za-z](?![A-Za-z])\s*(?:\$|\\\))?\s*"
                          r"(?:is|was|equals|=)\s*(?:\$|\\\()?\s*\Z", re.IGNORECASE)
_CONDITION_AFTER = re.compile(r"\s*(?:\$|\\\)|\*\*)?\s*,?\s*(?:otherwise|else|when|whenever|if|unless)\b",
                              re.IGNORECASE)


def _running_problem(text: str, start: int, end: int) -> str | None:
    """Why the final number of running text at text[start:end] is not the answer (see above); None when it may be."""
    before = text[max(0, start - 40):start]
    word = _LAST_WORD.search(before)
    if word and (word.group(2).lower() in _CHANGED_BY or (word.group(1) and word.group(2).lower() in _RANGE)):
        return f"{QUALIFIED} ({word.group(2)!r} before it)"
    if _MULTIPLE_OF.search(before) or _CONDITION_AFTER.match(text, end):
        return QUALIFIED
    return None
