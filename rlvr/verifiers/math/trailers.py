"""Another value offered next to the final answer (each form was once paid as if it offered nothing).
Strings only, linear: a bounded window after the final statement, at most 32 sentences of it.

Decisions (tests/test_math_r5_trailers.py; corpus rows of form 'r5_trailer'):
- Two answer statements in one sentence ('The answer is 3, the answer is 4.', 'The answer is
  3; the answer is 4.', 'Final answer: 3 / Final answer: 4', 'The answer is 3 (if we count the endpoints) and the
  answer is 4.') offer two values: a hedge (one_sentence), as 'Answer: 3' and 'Answer: 4' on two lines are. A word
  that corrects the first ('The answer is 3, no wait, the answer is 4.') makes the second a correction, and a first
  that is arithmetic giving no other value ('The answer is 2 + 2, so the answer is 4.') offers nothing.
- After the final statement, a sentence that offers another value is a hedge (offered_after):
  one that opens with that value and a case or an endorsement ('(3 if n is odd)', 'P.S. 3 if the question meant
  inclusive.', '3 is equally valid.', '3 also works.'), or one holding a phrase that offers a value and another value
  ('Some would say 3.', '(Other interpretation: 3.)', 'Both 3 and 4 satisfy the constraints.'). A negation in the
  sentence rejects the value ('3 does not work'); arithmetic ('This is because 3 + 1 = 4.', '3 + 1 = 4 as well'), the
  answer's own value ('(4 if we count the endpoints)') and numbers of other things ('Both triangles have 3 sides.',
  'Another approach: count the 3 pairs') offer none.
"""
from __future__ import annotations

import re
from itertools import islice

from rlvr.verifiers.math.around import HEDGED, TRAILER_CHARS, other_number

# A word between two statements of one sentence that corrects the first (as rlvr.verifiers.math.extract._CORRECTION)
_CORRECTING = re.compile(r"\b(?:wait|actually|mistake|wrong|error|oops|hmm|re-?check\w*|redo|correct\w*|instead"
                         r"|rather|no|fix\w*|recalculat\w*|recomput\w*|let\s+me|sorry|not)\b", re.IGNORECASE)
# What opens the next statement of its sentence ('3, the', '3 / Final', '3 and the'): dropped from the first's value
_LEAD = frozenset(("and", "so", "the", "final", "my", "our", "thus", "hence", "therefore", "then", "i.e"))
_LEAD_PUNCTUATION = " \t,;:/|*-"
_LINES = ("answer_line", "hashes")


def _first_value(raw: str) -> str:
    """The first statement's value without the words that open the next one ('3 / Final' -> '3')."""
    for _ in range(8):
        raw = raw.rstrip(_LEAD_PUNCTUATION)
        head, _, word = raw.rpartition(" ")
        if word.lower() not in _LEAD:
            break
        raw = head
    return raw


def one_sentence(first, second) -> bool:
    """Whether two 'Answer:' statements (rlvr.verifiers.math.lines.Candidate) share one sentence and offer two values:
    the first runs into the second's marker on its line, no word between them corrects it and it holds another number
    (see the module docstring)."""
    if first.kind not in _LINES or second.kind not in _LINES or first.end != second.start:
        return False
    written = first.raw or first.text
    return not _CORRECTING.search(written) and other_number(_first_value(written), second.text)


_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=[^\s)\]]))*(?:[.!?]+|\n|\Z)")  # 'P.S. 3 if ...': 'P.S.' then '3 if ...'
_NUMBER = r"[-+\u2212]?\d[\d,]*(?:\.\d+)?"
# A sentence that opens with a value ('(3 if n is odd)', 'PS: 3 if ...', '3 is equally valid.'), not a list marker
_OPENS = re.compile(rf"[\s(\[*_$]*(?:(?:p\.?\s?s|n\.?\s?b|note|or|also|alternatively|otherwise)\b\.?[\s:,]*)?"
                    rf"(?P<value>{_NUMBER})(?![\d.,]*[.):]\s)(?!\s*[)\].:]?\s*\Z)", re.IGNORECASE)
_CASE_AFTER = re.compile(r"\$?\s*(?:if|when|whenever|unless|assuming|provided|in\s+case|for\s+(?:odd|even|some|other"
                         r"|the\s+other|an?\s+(?:odd|even|inclusive|exclusive|different)))\b", re.IGNORECASE)
# Right after that value, a predicate that endorses it ('is equally valid', 'also works', 'would also work', 'too');
# not any verb ('3 is a factor': no endorsement)
_ENDORSED = re.compile(r"\s*(?:(?:is|are|would|could|might|may|should|seems?)\s+)?(?:(?:be|also|equally|too)\s+){0,2}"
                       r"(?:valid|acceptable|possible|plausible|correct|right|fine|works?"
                       r"|an?\s+(?:answer|option|solution|alternative|possibility)"
                       r"|another\s+(?:answer|option|solution))\b"
                       r"|\s*(?:also|too|as\s+well)\W*\Z", re.IGNORECASE)
# A phrase that offers a value in its sentence ('Some would say 3', 'Other interpretation: 3', 'Both 3 and 4 ...')
_OFFERING = re.compile(rf"\b(?:some(?:one|\s+people)?|others?|many|people)\s+(?:would|might|may|could|will|often)\s+"
                       rf"(?:say|argue|answer|claim|get|think|pick|choose|write|put|prefer|read|count)\b"
                       rf"|\b(?:other|another|alternative|second|different)\s+(?:interpretation|reading|answer"
                       rf"|possibility|option|candidate|value|result)s?\b|\bboth\s+\$?{_NUMBER}\$?\s+and\s+\$?{_NUMBER}"
                       rf"|\bequally\s+(?:valid|correct|likely|possible|good|right)\b", re.IGNORECASE)
_REJECTED = re.compile(r"\b(?:not|never|no|wrong|incorrect|invalid|impossible|[a-z]+n['’]t)\b", re.IGNORECASE)


def offered_after(text: str, end: int, value: str) -> str | None:
    """HEDGED when a sentence after the final statement (ending at `end`, stating `value`) offers another value with
    it; None otherwise (see the module docstring). Reads TRAILER_CHARS, 32 sentences at most."""
    window = text[end:end + TRAILER_CHARS]
    for match in islice(_SENTENCE.finditer(window), 32):
        sentence = match.group()
        if not sentence.strip() or _REJECTED.search(sentence):
            continue
        opens = _OPENS.match(sentence)
        if opens:
            rest = sentence[opens.end():]
            if (_CASE_AFTER.match(rest) or _ENDORSED.match(rest)) and other_number(opens.group("value"), value) \
                    and other_number(sentence[opens.start("value"):], value):
                return f"{HEDGED} ({value}, then {opens.group('value')} offered after it)"
        offer = _OFFERING.search(sentence)
        if offer and other_number(sentence, value):
            return f"{HEDGED} ({value}, then another value offered with {offer.group()!r})"
    return None
