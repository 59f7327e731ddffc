"""Negations before a box and denials after a value that the first rules missed. Strings only; each check is one
anchored match at a bounded number of places.

Decisions (tests/test_math_r4_denials.py; corpus rows of form 'denial_words'):
- A negation touches a box when only these stand between them: at most three words of a small list ('be', 'equal',
  'to', 'exactly', 'quite', 'going', ...), punctuation that opens ('not: \\boxed{5}', 'not (\\boxed{5})', 'not —'),
  blank lines, math delimiters and spacing ('$', '\\(', '\\,'). The words of a font or text group before the box count
  ('\\textbf{not }', '\\text{not}\\,'). Negations: 'not', 'never', 'cannot', any "-n't", 'no longer', 'hardly', 'by no
  means', 'in no way', 'unlikely'. Reading: WRONG, as around.box_problem reads 'It is not \\boxed{5}'; the same before
  the final number of running text ('The total is hardly 5.'). A negation that does not touch the box ('It is not
  hard to see that the answer is \\boxed{5}') denies nothing. A denied claim that the answer is the value right
  before it is WRONG too ("I don't think the answer is \\boxed{5}", "It's false that the answer is \\boxed{5}", 'Do
  not answer \\boxed{5}').
- A denial right after a value (in a box, on an 'Answer:' line, after the statement, after the final number of
  running text; not after a value inside a parenthesis: '(the value 3 is extraneous)' denies 3): an optional ',',
  ', which', ', but that', ':', a dash or '(', an optional copula, then a word that rejects it ('extraneous',
  'rejected', 'ruled out', 'a contradiction', 'contradicts', 'not a solution', "isn't right", 'does not satisfy', "won't
  work", 'cannot work', ...); a question answered 'No' ('Is it \\boxed{5}? No.'); a cross mark ('✗', '❌'); a sentence
  that is only 'Not.', 'Nope.' or 'Just kidding.'. Reading: UNPARSEABLE (retracted), as around.denied reads
  '\\boxed{5} is false'. 'No doubt' and 'No problem' answer no question.
- More forms (tests/test_math_r5_denials.py; corpus rows 'r5_denial'): after the value also 'Nah', 'False',
  'is not it', "can't be right", 'is not the case', 'is flawed', 'is an error / a trap / a red herring', 'is the naive
  answer', '✖', '👎', and a detached 'NOT.' ('— NOT.', '... not.', '. FALSE.'); before it also an aside between commas
  ('not, I repeat,'), '\\hspace{..}' and '\\\\', 'n o t', a rejecting verb ('We reject', 'We can exclude', "Don't
  write", 'Avoid'), lookalike letters read as Latin ('nοt' with a Greek omicron, 'ñot'), and a strike ('\\cancel{',
  '\\sout{' right before the box: WRONG, struck through).
"""
from __future__ import annotations

import re
import unicodedata
from itertools import islice

_GROUP = re.compile(r"\\(?:text\w*|math\w*|mbox|emph|operatorname)\s*\{([^{}]*)\}")
_NEGATED = re.compile(r"\b(?:not|n\s+o\s+t|never|cannot|[a-z]+n['’]t|no\s+longer|hardly|by\s+no\s+means|in\s+no\s+way"
                      r"|unlikely)(?:\s*,\s*(?:[a-z'’]+\s+){0,3}[a-z'’]+\s*,)?"
                      r"(?:\s+(?:be|equal|equals|to|exactly|necessarily|always|ever|quite|precisely|simply|just|really"
                      r"|actually|going|likely|given\s+by)){0,3}"
                      r"(?:\s|[:(\[\u2013\u2014]|-|\$|\\[(\[]|\\[,;:! ]|\\q?quad\b|\\\\"
                      r"|\\[hv]space\*?\s*\{[^{}]{0,20}\}|\\(?:en|thin|med|thick)space\b)*\Z", re.IGNORECASE)
# A claim that the answer is that value, denied before it ("I don't think the answer is \\boxed{5}", "It's false that
# the answer is \\boxed{5}", 'Do not answer \\boxed{5}')
_DENIED_CLAIM = re.compile(
    r"\b(?:(?:i|we)\s+(?:do\s*n['’]?t|do\s+not)\s+(?:think|believe)|(?:i|we)\s+doubt|it(?:['’]s|\s+is)\s+(?:false|wrong"
    r"|incorrect|impossible|not\s+true|untrue))\s+(?:that\s+|to\s+say\s+(?:that\s+)?|for\s+)?(?:the\s+)?(?:answer|total"
    r"|result|value|sum)\s+(?:is|was|would\s+be|will\s+be|to\s+be|equals)\s*(?:\$|\\[(\[])?\s*\Z"
    r"|\bdo\s*(?:n['’]?t|\s+not)\s+answer\s*(?:\$|\\[(\[])?\s*\Z"
    r"|(?:\b(?:do\s*n['’]?t|do\s+not|never)\s+(?:write|answer|put|choose|pick|say)"  # "Don't write \\boxed{5}" (fifth
    r"|\b(?:reject|exclude|discard|eliminate|rule\s+out|avoid))\s*:?\s*(?:\$|\\[(\[])?\s*\Z", re.IGNORECASE)  # round)
_SKIP = r"(?:[ \t]|[$)\]}]|\\[)\]]|\\(?:text\w*|math\w*|mbox|emph)\s*\{|</answer>|\\[,;:! ])*"
_COPULA = (r"(?:(?:is|was|are|were|would\s+be|will\s+be|must\s+be|seems(?:\s+to\s+be)?|turns\s+out(?:\s+to\s+be)?"
           r"|proves?(?:\s+to\s+be)?|gets?)\s+)?(?:(?:definitely|clearly|certainly|obviously|surely)\s+)?")
_REJECTS = (r"(?:false|untrue|impossible|incorrect|wrong|invalid|fails?|failed|extraneous|rejected|excluded|eliminated"
            r"|discarded|ruled\s+out|disproven|disproved|refuted|inconsistent|absurd|bogus|nonsense|spurious"
            r"|(?:a\s+)?contradiction|contradicts|leads?\s+to\s+a\s+contradiction|a\s+(?:mistake|typo)"
            r"|flawed|an?\s+(?:error|trap|red\s+herring)|not\s+(?:it|the\s+case)|the\s+(?:naive|wrong|incorrect)\s+answer"
            r"|ca\s*n['’]t\s+be\s+(?:right|correct|true|it|the\s+answer)"
            r"|not\s+(?:true|possible|valid|correct|right|consistent|allowed|acceptable|admissible"
            r"|a\s+(?:valid\s+)?(?:solution|root|answer)|the\s+(?:answer|solution))"
            r"|(?:is|was|are|does|do|did|can|could|will|would|wo)\s*n['’]?t\s+(?:right|correct|true|valid|work|hold"
            r"|satisfy|solve|fit|apply|a\s+solution|the\s+answer)"
            r"|(?:does|do|did|will|would|can|could)\s+not\s+(?:work|hold|satisfy|solve|fit|apply)"
            r"|cannot\s+(?:work|hold|be\s+(?:right|correct|true))|can\s+not\s+work)\b")
_SEPARATOR = r"(?:,?\s*but\s+(?:that|this|it)\s+|,\s*(?:which\s+)?|\s*[:\u2013\u2014]\s*|\s+-\s+|\s*\(\s*)?"
_DENIAL = re.compile(rf"{_SKIP}{_SEPARATOR}{_COPULA}{_REJECTS}"
                     rf"|{_SKIP}\?\s*(?:no|nope|nah|false|wrong)\b(?![ \t]+(?:doubt|problem|need|way))"
                     rf"|{_SKIP}[✗✘❌✖✕👎🚫]|{_SKIP}(?:[.!,;:]|\.\.\.?|…|\s*[-\u2013\u2014]+)\s*"
                     r"(?:not|nope|nah|false|just\s+kidding)[.!]*[ \t]*(?:\n|\Z)", re.IGNORECASE)
_VALUE_END = re.compile(r"[\d}$)\]]")
_STRUCK = re.compile(r"\\(?:[bx]?cancel|sout|st|xout)\s*\{\s*(?:\$|\\\(|\\\[)?\s*\Z")  # '\\cancel{\\boxed{5}}'
# Letters that look like Latin ones (Greek, Cyrillic): a word spelled with them reads as the
# Latin word; accents are dropped ('ñot' is 'not')
_LOOKALIKE = str.maketrans("οОоΟαаАΑеЕεΕіІιΙтТΤсСϲрРΡхХΧуУνոԁ", "oOoOaaAAeEeEiIiItTTcCcpPPxXXyYvnd")


def _latin(text: str) -> str:
    """`text` with lookalike letters read as Latin ones and accents dropped (NFKD, combining marks removed)."""
    decomposed = unicodedata.normalize("NFKD", text.translate(_LOOKALIKE))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))
NEGATED = "a negation touches the value"
DENIED = "unparseable: the final answer is retracted after it (a word after it rejects it)"
_CHARS = 2400  # a statement longer than this is an over-long answer anyway (boxes.MAX_ANSWER_CHARS)


def negated_before(text: str, start: int) -> str | None:
    """Why the box (or the final number of running text) starting at `start` is negated by the words right before it
    (see the module docstring)."""
    before = _GROUP.sub(r" \1 ", text[max(0, start - 120):start])
    struck = _STRUCK.search(before)
    if struck:
        return f"the box is struck through ({struck.group().strip()!r} before it)"
    before = _latin(before) if not before.isascii() else before  # 'nοt' with a Greek omicron is 'not'
    negation = _NEGATED.search(before) or _DENIED_CLAIM.search(before)
    return f"{NEGATED} ({negation.group().strip()!r} before it)" if negation else None


def denial_after(text: str, start: int, end: int) -> str | None:
    """DENIED when a value of the statement at text[start:end] that lies in no parenthesis, or the statement itself, is
    followed by a word that rejects it (see the module docstring); None otherwise. At most 64 value ends are tried."""
    ends = islice((m.end() for m in _VALUE_END.finditer(text, start, min(end, start + _CHARS))), 64)
    for at in [*ends, end]:
        inside = text[start:at]
        if at < end and inside.count("(") > inside.count(")"):
            continue
        if _DENIAL.match(text, at, min(len(text), at + 160)):
            return DENIED
    return None
