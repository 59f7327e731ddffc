"""A correction written in prose after the final answer statement: it states
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
- Later statements (tests/test_math_r5_statements.py): after the final statement, an answer label ('Ans: 3',
  'Result: 3', 'Answer = 3'), a casual retraction ('nvm, 3', 'My mistake, 3', '(I mean 3)') or a sentence on a later
  line that states only another value after fillers and a copula ("It's 3.", 'We get 3.', 'Hence 3.', 'So there are 3
  apples.') is one more statement, so the answer; one restating the answer changes nothing, and 'Total: 4' (a label)
  or a bare value below the statement stays what it was (a hedge: rlvr.verifiers.math.gaps). Another value in
  question ('Hmm, 3?') withdraws the answer; an arrow to another value ('\\boxed{4} -> 3') is a hedge.
- More labels (tests/test_math_r5_trailers.py): 'A: 3' (a capital A opening its line), 'Solution: 3',
  "the answer's 3" and single-star emphasis ('*Correction*: 3') are labels too: after the box, they state the answer.
- No correction: a verb ('Update the total: 3 + 2 = 5.' before the answer is no label), arithmetic ('Check: 2 + 3
  = 5'), the same value ('The correct total is 5'), an opener before the final statement (the statement wins).
"""
from __future__ import annotations

import re
from itertools import islice

from rlvr.verifiers.math.around import RETRACTED, TRAILER_CHARS, arithmetic, other_number, value_end
from rlvr.verifiers.math.displayed import later, same
from rlvr.verifiers.math.forms import counted_value
from rlvr.verifiers.math.lines import Candidate
from rlvr.verifiers.math.numbers import as_number
from rlvr.verifiers.math.prose import COPULAS, FILLERS, lead_end

KIND = "correction"  # the kind of a statement read here (rlvr.verifiers.math.extract)
_LABEL = (r"(?:correction|corrected(?:\s+(?:answer|total|count|result|value))?|errat(?:um|a)|corrigendum|update"
          r"|edit|revision|revised(?:\s+(?:answer|total|count|result|value))?|fix|typo|recount|amended"
          r"|final(?:\s+(?:total|count|tally|sum|result|value|number|amount))?)"
          r"\s*(?:\*\*?)?\s*(?::|(?=\s[-\u2013\u2014]))")  # '*Correction*: 3'
_STRONG = (r"on\s+second\s+thoughts?|(?:on|upon)\s+(?:further\s+|closer\s+)?(?:reflection|inspection)|oops|whoops"
           r"|scratch\s+that|strike\s+that|ignore\s+(?:that|the\s+above)|make\s+(?:that|it)|i\s+meant|my\s+bad"
           r"|sorry|apologies|(?:i\s+)?mis(?:counted|calculated|computed|read|added|typed)|(?:i\s+)?forgot"
           r"|(?:i\s+)?made\s+an?\s+(?:mistake|error|typo)|(?:that|this)\s+was\s+a\s+typo"
           r"|(?:it|this|that|the\s+(?:answer|total|count|result|value|sum))\s+should\s+(?:actually\s+|really\s+)?"
           r"(?:be|have\s+been)"
           r"|the\s+(?:correct|right|actual|true|real|final|corrected|revised|new)\s+(?:answer|total|count|result"
           r"|value|number|sum|amount|tally|figure)\s+(?:is|was|should\s+be|must\s+be|=)")
_MILD = r"actually|wait|let\s+me\s+(?:re-?check|recount|recompute|redo|correct)\w*|re-?checking|double[- ]check\w*"
# Mild words that open a correction only at the start of a sentence ('No, 6.', 'Hmm, 6.', "So it's 6."; not 'there
# is no 6')
_SENTENCE = r"no|nope|nah|rather|hmm+|er|err|uh|um|i\s+mean|so"
# Answer labels that state a later value ('Ans: 3', 'Result: 3', 'Answer = 3'), casual
# retractions ('nvm, 3', 'jk, 3', 'My mistake, 3'), an arrow to another value ('\\boxed{4} -> 3': a hedge, as between
# two boxes) and any sentence start (a sentence stating only another value after fillers and a copula: "It's 3.")
_ANSWER_LABEL = (r"(?:ans(?:wer)?|(?:final\s+)?(?:result|solution)|conclusion|(?<![^\n])(?-i:A))\s*(?:\*\*?)?\s*"
                 r"(?::|=|->|→|⟹|=>)|ans\.(?=\s)|answer['’]s(?=\s)"
                 r"|reconsidering|my\s+(?:mistake|error)|nvm|jk|lol\s+no|never\s*mind|just\s+kidding")
_ARROW = r"->|=>|[→⟹⇒]|\\(?:implies|Rightarrow|Longrightarrow)(?![A-Za-z])"
_OPENER = re.compile(rf"\b(?:(?P<strong>{_LABEL}|{_STRONG})|{_MILD}|(?P<label>{_ANSWER_LABEL})"
                     rf"|(?P<sentence>{_SENTENCE}))(?![A-Za-z])|(?P<arrow>{_ARROW})"
                     r"|(?P<bare>(?<=\n)(?=[ \t]*\S)|(?<=[.!?][ \t])(?=\S))", re.IGNORECASE)
# Between an opener and its value ('On second thought, 6', 'Let me recheck... it's 6', 'Wait, no, 6'); a dash
# only before a space ('Correction - 6'; 'Correction: -6' keeps its sign)
_SKIP = re.compile(r"(?:[\s,;:!*.\u2026\u2014\u2013$∴]|-(?=\s)|\\therefore(?![A-Za-z])"
                   r"|\b(?:no|nope|nah|wait|rather|well|hmm+|oh)\b)*", re.IGNORECASE)
_WRAPPERS = " \t$*"
_WORDED = re.compile(r"[A-Za-z∴]")
_DISPLAY = re.compile(r"[ \t]*(?:\$\$|\\\[)")
# A pointer to the work names no value ('Update: I added a check in step 2.')
_POINTER = re.compile(r"\b(?:steps?|lines?|parts?|cases?|eq(?:uation)?s?|problems?|questions?|sections?|rows?"
                      r"|columns?)\.?\s*\(?\d{1,3}[a-z]?\)?", re.IGNORECASE)
# The only words a corrected value may follow: fillers and copulas ('the total is 6', "it's 6"), never another
# subject ('the total of the first row is 6', 'we used the fact that the first term is 6': 3b)
_SUBJECT = FILLERS | COPULAS | {"sum", "count", "amount", "tally", "still", "instead", "really", "actually", "mean",
                                 "there", "answer's", "it"}
_AFFIRMED = re.compile(r"\s+(?:is|was)\s+(?:right|correct|the\s+(?:right\s+|correct\s+)?answer)\Z", re.IGNORECASE)
_WORDS = re.compile(r"[A-Za-z][A-Za-z'’]*|[=:]")
# A condition before the opener in its sentence makes it a counterfactual ('Had we included the endpoint, it should
# be 6'), no correction
_SENTENCE_START = re.compile(r"[.!?](?:\s|$)|\n")
_CONDITION = re.compile(r"\b(?:if|had|were|suppose|supposing|assuming|unless|when|whenever|without|ignoring"
                        r"|excluding|otherwise)\b", re.IGNORECASE)
_NUMBER = r"[-+\u2212]?\d+(?:,\d{3})*(?:\.\d+)?"
# The value restated against the old one: 'It's 6, not 5.', 'Not 5 but 6.'
_INSTEAD = re.compile(rf"(?P<new>{_NUMBER})\s*,?\s+not\s+(?P<old>{_NUMBER})\b"
                      rf"|\bnot\s+(?P<old2>{_NUMBER})\s*,?\s+but\s+(?:rather\s+)?(?P<new2>{_NUMBER})\b", re.IGNORECASE)


def _stated(clause: str, strong: bool) -> str | None:
    """The value a correction's clause states: bare ('6', 'six', '$6$'), counted ('6 apples') or after fillers and a
    copula ('the total is 6', "it's 6"), or affirmed ('6 is right'); after a strong opener also plain arithmetic and
    its right result ('2 + 4 = 6'); None otherwise (see the module docstring)."""
    clause = clause.strip(_WRAPPERS).rstrip(".!").strip(_WRAPPERS)
    clause = clause[:-1] if clause.endswith(")") and "(" not in clause else clause  # '(I mean 3)'
    at = lead_end(clause)
    if at and not all(word.lower().replace("’", "'") in _SUBJECT for word in _WORDS.findall(clause[:at])):
        return None
    rest = _AFFIRMED.sub("", clause[at:].strip(_WRAPPERS).rstrip(".!").strip(_WRAPPERS)).strip(_WRAPPERS)
    # as_number reads number words too ('six', 'a dozen': numbers._plain_value ends in words_value)
    if as_number(rest) is not None:
        return rest
    if at and counted_value(rest) is not None:  # 'So there are 3 apples.'; not 'Actually, 3 of them are red'
        return counted_value(rest)
    left, equals, right = rest.rpartition("=")
    right = right.strip(_WRAPPERS)
    if strong and equals and as_number(right) is not None and arithmetic(left) == as_number(right):
        return right
    return None


def _skipped(text: str, opener: re.Match, end: int, fences: int) -> bool:
    """Whether an opener is no correction: inside a code block (an odd number of fences since the text start,
    `fences` of them before `end`), a sentence-start word in mid-sentence, or a counterfactual (a condition before
    it in its sentence)."""
    if (fences + text.count("```", end, opener.start())) % 2:
        return True
    starts = [m.end() for m in _SENTENCE_START.finditer(text, max(end, opener.start() - 200), opener.start())]
    low = starts[-1] if starts else max(end, opener.start() - 200)
    if opener.group("sentence") and (text[low:opener.start()].strip(" \t\n([") or (not starts and low > end)):
        return True
    return _CONDITION.search(text, low, opener.start()) is not None


def _instead(text: str, end: int, limit: int, value: str) -> Candidate | None:
    """A value restated against the answer after it ('It's 6, not 5.', 'Not 5 but 6.'), as a statement when only
    fillers and a copula stand before it in its sentence; None otherwise."""
    mine = as_number(value)
    for match in islice(_INSTEAD.finditer(text, end, limit), 8):
        new, old = match.group("new") or match.group("new2"), match.group("old") or match.group("old2")
        if mine is None or as_number(old) != mine or as_number(new) == mine:
            continue
        starts = [m.end() for m in _SENTENCE_START.finditer(text, max(end, match.start() - 120), match.start())]
        low = starts[-1] if starts else max(end, match.start() - 120)
        lead = text[low:match.start()].replace("’", "'")
        if all(word.lower() in _SUBJECT for word in _WORDS.findall(lead)) and not re.search(r"[^\sA-Za-z'=:,]", lead):
            at = match.start("new") if match.group("new") else match.start("new2")
            # its line ends where the text's line does, as a box's (a value on a line below it is a hedge: with the
            # line ending at the match, 'Not 5 but 6.\n\n**7**' paid 6; a mutation sample found it)
            return Candidate(new, at, at + len(new), new, kind=KIND)
    return None


def correction(text: str, end: int, value: str) -> Candidate | str | None:
    """After the final statement (ending at `end`, stating `value`): the correction that states a new answer (a
    Candidate of KIND, to be taken as the last statement), or RETRACTED when a correction only withdraws it, or
    None (see the module docstring). Reads TRAILER_CHARS after `end`, at most 32 openers."""
    limit = min(len(text), end + TRAILER_CHARS)
    found: Candidate | None = None
    withdrawn = False
    fences = text.count("```", 0, end) if "```" in text else 0
    for opener in islice(_OPENER.finditer(text, end, limit), 32):
        bare = opener.group("bare") is not None  # on the statement's own line a sentence is a hedge (around.py)
        if _skipped(text, opener, end, fences) or (bare and ("\n" not in text[end:opener.start()]
                                                            or _DISPLAY.match(text, opener.end()))):
            continue  # a display is read whole (rlvr.verifiers.math.displayed)
        start = _SKIP.match(text, opener.end(), limit).end()
        newline = text.find("\n", start, limit)
        line_end = newline if newline >= 0 else limit
        stop = value_end(text, start, line_end)
        strong, fresh = bool(opener.group("strong")), not (opener.group("strong") or opener.group("sentence"))
        clause, latest = text[start:stop], found.text if found else value
        lead = lead_end(clause.strip(_WRAPPERS)) if bare else 0  # 'Total: 4' is a label, no sentence
        if bare and (":" in clause[:lead] or not (_WORDED.search(text, opener.start(), start) or lead)):
            continue  # a bare value below the statement is a hedge (rlvr.verifiers.math.gaps), no sentence
        stated = _stated(clause, strong)
        if stated is not None and fresh and same(stated, latest):
            continue  # a new kind of opener restating the answer corrects nothing
        if stated is None and clause.rstrip(" \t$*").endswith("?"):  # 'Hmm, 3?' doubts the answer
            doubted = _stated(clause.rstrip(" \t$*").rstrip("?"), False)
            withdrawn = withdrawn or (doubted is not None and not same(doubted, latest))
            continue
        if stated is not None:  # words before a fresh value set it apart: no connective joins it
            alone = fresh and not opener.group("arrow") and _WORDED.search(text, opener.start(), start + 1) is not None
            found = Candidate(stated, start, stop, clause, kind=KIND, line_end=line_end, alone=alone)
            withdrawn = False
        elif opener.group("strong") and other_number(_POINTER.sub(" ", text[start:line_end]), latest):
            withdrawn = True  # another value, offered but not stated: the answer before it is withdrawn
    # a framed box or a display after it ('\\framebox{3}', '\\[3\\]'): one more statement
    found = later(text, found.end if found else end, limit, found.text if found else value) or found
    instead = _instead(text, found.end if found else end, limit, found.text if found else value)
    if instead is not None:
        return instead
    if withdrawn:
        return f"{RETRACTED} (a correction after it offers another value)"
    return found

