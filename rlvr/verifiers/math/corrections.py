"""A correction written in prose after the final answer statement (issue 43's third red team, finding 3): it states
a new answer, or it only takes the earlier one back. Strings only, linear: a bounded window after the statement.

Decisions (tests/test_math_withdrawn.py; corpus rows of form 'withdrawn'):
- The last answer statement is the answer, whatever its kind (docs/verifiers.md), and an earlier different one is
  a correction. After the final statement, a correction opener followed by a value read as a statement is one more
  answer statement, so the answer: a correction label ('Correction: 6', 'Erratum: the result is 6', 'Update: 6',
  'Edit: the answer should be 6'), a correction phrase ('On second thought, 6', 'Oops, I miscounted; the total is
  6', 'Actually it should be 6', "Scratch that, it's 6"), or a sentence naming the corrected or final quantity ('The
  correct total is 6', 'Therefore the final count is six', 'the answer should be 6'). A value is read only when it
  is bare ('6', 'six') or follows a subject and a copula ('the total is 6 apples', 'it should be 6'), never a
  number inside other words ('Actually, 3 of them are red' states nothing).
- An opener that offers another value without stating it cleanly ('On second thought, maybe 6 fits better', 'I
  made a mistake in step 2, which gives 7') withdraws the answer: UNPARSEABLE, never the earlier value paid. Mild
  openers ('actually', 'wait', 'let me recheck') only state: reasoning after an answer often uses them honestly.
- No correction: a verb ('Update the total: 3 + 2 = 5.' before the answer is no label), arithmetic ('Check: 2 + 3
  = 5'), the same value ('The correct total is 5'), an opener before the final statement (the statement wins).
"""
from __future__ import annotations

import re
from itertools import islice

from rlvr.verifiers.math.around import RETRACTED, TRAILER_CHARS, other_number, value_end
from rlvr.verifiers.math.lines import Candidate
from rlvr.verifiers.math.numbers import as_number
from rlvr.verifiers.math.prose import lead_end

KIND = "correction"  # the kind of a statement read here (rlvr.verifiers.math.extract)
_LABEL = (r"(?:correction|corrected\s+answer|erratum|corrigendum|update|edit|revision|revised\s+answer)"
          r"\s*(?:\*\*)?\s*:")
_STRONG = (r"on\s+(?:second\s+thought|reflection|closer\s+inspection)|oops|whoops|scratch\s+that"
           r"|(?:i\s+)?mis(?:counted|calculated|computed|read|added|typed)|(?:i\s+)?made\s+an?\s+(?:mistake|error)"
           r"|(?:it|this|that|the\s+(?:answer|total|count|result|value|sum))\s+should\s+(?:actually\s+|really\s+)?"
           r"(?:be|have\s+been)"
           r"|the\s+(?:correct|right|actual|true|real|final|corrected|revised|new)\s+(?:answer|total|count|result"
           r"|value|number|sum|amount|tally|figure)\s+(?:is|was|should\s+be|must\s+be|=)")
_MILD = r"actually|wait|let\s+me\s+(?:re-?check|recount|recompute|redo|correct)\w*"
_OPENER = re.compile(rf"\b(?:(?P<strong>{_LABEL}|{_STRONG})|{_MILD})(?![A-Za-z])", re.IGNORECASE)
_SKIP = re.compile(r"[\s,;:!*\u2014\u2013]*")  # between an opener and its value ('On second thought, 6')
_WRAPPERS = " \t$*"
# A pointer to the work names no value ('Update: I added a check in step 2.')
_POINTER = re.compile(r"\b(?:steps?|lines?|parts?|cases?|eq(?:uation)?s?|problems?|questions?|sections?|rows?"
                      r"|columns?)\.?\s*\(?\d{1,3}[a-z]?\)?", re.IGNORECASE)


def _stated(clause: str) -> str | None:
    """The value a correction's clause states: bare ('6', 'six', '$6$') or after a subject and a copula ('the total
    is 6 apples', "it's 6"); None otherwise (see the module docstring)."""
    clause = clause.strip(_WRAPPERS).rstrip(".!").strip(_WRAPPERS)
    at = lead_end(clause)
    rest = clause[at:].strip(_WRAPPERS).rstrip(".!").strip(_WRAPPERS)
    # as_number reads number words too ('six', 'a dozen': numbers._plain_value ends in words_value)
    return rest if as_number(rest) is not None else None


def correction(text: str, end: int, value: str) -> Candidate | str | None:
    """After the final statement (ending at `end`, stating `value`): the correction that states a new answer (a
    Candidate of KIND, to be taken as the last statement), or RETRACTED when a correction only withdraws it, or
    None (see the module docstring). Reads TRAILER_CHARS after `end`, at most 32 openers."""
    limit = min(len(text), end + TRAILER_CHARS)
    found: Candidate | None = None
    withdrawn = False
    for opener in islice(_OPENER.finditer(text, end, limit), 32):
        start = _SKIP.match(text, opener.end(), limit).end()
        newline = text.find("\n", start, limit)
        line_end = newline if newline >= 0 else limit
        stop = value_end(text, start, line_end)
        stated = _stated(text[start:stop])
        if stated is not None:
            found, withdrawn = Candidate(stated, start, stop, text[start:stop], kind=KIND, line_end=line_end), False
        elif opener.group("strong") and other_number(_POINTER.sub(" ", text[start:line_end]),
                                                     found.text if found else value):
            withdrawn = True  # another value, offered but not stated: the answer before it is withdrawn
    if withdrawn:
        return f"{RETRACTED} (a correction after it offers another value)"
    return found
