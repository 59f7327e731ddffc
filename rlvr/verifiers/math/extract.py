"""Final-answer extraction and the hedging check of the math verifier: strings only, no sympy.

Everything here runs in the trainer's process on every completion, so it is linear in the completion's
length (1 MB adversarial inputs take milliseconds) and never parses LaTeX; rlvr.verifiers.math.worker does
that in a separate process with a time budget.

Decisions (each one a line; the tests in tests/test_math_attacks.py, tests/test_math_statements.py and
tests/test_verifiers.py pin them):
- Thinking does not count (outside_thinking): every `<think>...</think>` block is reasoning, wherever it is (a
  second block after the answer too); text before a `</think>` with nothing open is reasoning (chat
  templates that prefill `<think>`, trl#6966), and an unclosed `<think>` makes everything after it reasoning.
- One rule for "the answer": the LAST answer statement outside reasoning is the final answer, whatever
  its kind: a complete `<answer>...</answer>` (inside it: its last statement, else its whole text), a complete
  `\\boxed{}`/`\\fbox{}`, an 'Answer:' / 'answer is' line, a '####' line. Kinds are not ranked: in 'The final
  answer is \\boxed{3}. Wait, I made an error: the total is 5. Final Answer: 5' the answer is 5, and in GSM8K's
  '... \\boxed{24} in May ... #### 72' it is 72. A box inside an 'Answer:' or '####' line is that line's value;
  what lies inside a box or an <answer> block belongs to it. An 'Answer:' / '####' line that states no value
  ('this answer is correct because ...', 'Final Answer: The final answer is' cut by the next marker) does not
  overrule an earlier statement; one holding a digit does ('The answer is therefore 4': rlvr.verifiers.math.lines).
  Without any statement: (mode strict) only a completion that is one plain number ('56', '$56$.':
  rlvr.verifiers.math.bare), (mode last_number) the last number, with the number before it when only connectives
  join them (a hedge: 'It is 3 or 4'), or (mode latex) the last LaTeX environment, bare fraction or plain number
  (rlvr.verifiers.math.latex). In mode latex, 'Answer:' lines and <answer> blocks are read as math-verify reads
  them (their first LaTeX environment, else their text without prose words). An 'Answer:' line's value is its
  first clause ('... is 12,000,023. I hope it is correct.' reads 12,000,023; rlvr.verifiers.math.around), and what
  stands around the final statement may retract or hedge it (_checked, around.py). A box
  whose braces never close is not an answer:
  `\\boxed{\\frac{1}{2}` never reads as 1/2 (nor does the latex fallback read its inside, or after an unclosed
  <answer>); one still open MAX_ANSWER_CHARS into its content is an over-long answer (unparseable), which keeps
  the brace scan bounded on 1 MB of braces.
- A correction in prose after the final statement ('Correction: 6', 'Oops, I miscounted;
  the total is 6') is the last statement, or withdraws the answer (rlvr.verifiers.math.corrections); struck-through
  text ('~~The answer is 5~~') is withdrawn (unstruck).
- HTML and LaTeX comments are blanked, statements in fenced code count only when none lies
  outside, and a box named as compared or mistaken is no statement (rlvr.verifiers.math.hidden); running text that
  rejects its last value right after another ('It is 5 and not 6.') states the other (_AND_NOT).
- A correction is not a hedge: an earlier, different statement separated from the last one by anything but
  connectives is overruled. A hedge is two candidates in one statement, or statements with only connectives
  between them (`\\boxed{3} \\boxed{4}`, 'Answer: 3' on one line and 'Answer: 4' on the next), or with a word that
  offers an alternative and none that corrects ('\\boxed{3} (if n is even), \\boxed{4}': _ALTERNATIVE); answer spam is
  more than MAX_DISTINCT_ANSWERS different declared answers. Both are checked in rlvr.verifiers.math.hedges,
  which says what counts; LaTeX environments and numbers (mode latex) are mostly reasoning, so only their final
  run counts for spam.
- Several answers where the reference lists several: a run of boxes (or environments,
  'Answer:' lines) joined only by commas and 'and' is one list answer when the reference is a list or a set
  with several items: `\\boxed{1}, \\boxed{2}` answers `\\{1, 2\\}`. Joined by 'or', it stays a hedge.
- Malformed LaTeX (checked in rlvr.verifiers.math.verifier.brace_problem): an answer whose `{` `}` do not balance
  (`\\frac12}`, `\\frac{1}{2`) is unparseable, though math-verify reads both as 1/2: a reward for it would
  teach the model broken LaTeX. `\\frac12` itself is valid LaTeX and reads as 1/2.
- Plain numbers (read in rlvr.verifiers.math.numbers) are compared exactly as fractions, never with a
  tolerance: 0.333 != 1/3, 1e-10 != 0, 0.0001 != 0.0002, 3.1416 != 3.14. Scientific notation (1e-10) is a
  plain number here (math-verify reads '1e-10' as e - 10). A percent 'X%' on one side reads as X/100 or as
  X (50% == 0.5 == 1/2 and 50% == 50, but 50 != 0.5); two percents compare as written (0.25% != 25%).
  Trailing units (`\\text{ cm}`, `^\\circ`, `\\$`) are dropped from a number when the other side has none or the
  same one (rlvr.verifiers.math.units), text that changes it is not (`5 \\text{ million}`;
  rlvr.verifiers.math.forms). A decimal reference is matched exactly too: 3.1416 and \\pi are both wrong for 3.14
  (a question that wants rounding states the precision, and its reference is the rounded value); a decimal
  answer to an exact reference (3.14 for \\pi, 0.333 for 1/3) is wrong (tolerance bait), unless it is a fraction
  printed at double precision (0.0833333333333333 for 1/12: rlvr.verifiers.math.forms.machine_rounding).
- A reference in several boxes joined by commas is one list, as a completion's is; an 'Answer:'
  line or <answer> block that names the asked variable and then states the value ('the largest $n$ is
  34') reads that value (rlvr.verifiers.math.latex.stated_value). Long completions: math_scan.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import Literal, get_args

from rlvr.verifiers.math.around import box_problem, denied, fallback_problem, qualified, trailer_problem
from rlvr.verifiers.math.bare import bare_number
from rlvr.verifiers.math.boxes import MAX_ANSWER_CHARS, box_spans, last_boxed  # noqa: F401  (re-exported)
from rlvr.verifiers.math.boxes import RECENT as _RECENT
from rlvr.verifiers.math.boxes import cut as _cut
from rlvr.verifiers.math.corrections import correction
from rlvr.verifiers.math.denials import denial_after, negated_before
from rlvr.verifiers.math.doubts import doubted
from rlvr.verifiers.math.emphasis import plain
from rlvr.verifiers.math.forms import counted_value
from rlvr.verifiers.math.hedges import answer_text, hedge_problem, top_level_items  # noqa: F401  (re-exported)
from rlvr.verifiers.math.hidden import NOT_THE_ANSWER, fenced, mentioned, unhidden
from rlvr.verifiers.math.latex import clean as _clean
from rlvr.verifiers.math.latex import connective as _connective
from rlvr.verifiers.math.latex import latex_level, list_gap, solves_nothing, stated_value
from rlvr.verifiers.math.lines import (
    ANSWER_MARK,
    HASH_ANSWER,
    HASH_MARK,
    LINE_KINDS,
    Candidate,
    marked_lines,
    states_value,
)
from rlvr.verifiers.math.numbers import as_number, canonical, last_number, number_before, number_readings  # noqa: F401  (re-exported: rlvr.verifiers.math.verifier and the tests use them)
from rlvr.verifiers.math.scan import nth_last, tail
from rlvr.verifiers.math.trailers import offered_after, one_sentence
from rlvr.verifiers.math.units import unit_around

Mode = Literal["strict", "last_number", "latex"]
MODES: tuple[str, ...] = get_args(Mode)

# The kinds a completion cut at max_new_tokens may be scored by: an answer the model stated as one. A
# fallback reading (the last number, the last LaTeX, a bare number, a prose correction) of a text that was cut off
# is the number the ramble happened to stop on; listed as allowed, so a new kind is a fallback until named here.
EXPLICIT_KINDS = frozenset({"answer_tag", "boxed", "answer_line", "hashes"})
NO_ANSWER = "no final answer found (expected \\boxed{}, 'Answer:' or '####')"
NO_ANSWER_OR_NUMBER = "no final answer found (no \\boxed{}, 'Answer:', '####' or number)"
NO_ANSWER_LATEX = "no final answer found (no \\boxed{}, 'Answer:', '####', LaTeX or readable last number)"
ONLY_IN_THINK = "final answer only inside <think>...</think>; reasoning does not count"

_MARKER = re.compile(r"####|\\boxed|\\fbox|<answer>")
_BOX_OR_TAG = re.compile(r"\\boxed|\\fbox|<answer>")
_LIST_WORD = re.compile(r",|\band\b")
_HEDGE_WORD = re.compile(r"\b(?:or|either|maybe|perhaps)\b", re.IGNORECASE)
# <answer> blocks read as completions of their own (up to RECENT statements of each kind), from the last back: reading
# RECENT of them so cost RECENT**2 statements, 0.25 s on 1 MB of boxed blocks. The RECENT - 16 before them are read as
# their whole cleaned text: enough to count different answers (spam), and no honest completion writes 17 blocks.
_ANSWER_BLOCKS = 16
_DELIMITED = ("answer_tag", "boxed", "latex")  # kinds whose extent is marked, unlike a line's
# Between two statements, a word that offers the second as an alternative ('\\boxed{3} (if n is even), \\boxed{4}',
# '\\boxed{3} -> \\boxed{4}'), unless a word corrects the first ('Wait, if we count the ends, \\boxed{4}').
_ALTERNATIVE = re.compile(r"\b(?:or|either|maybe|perhaps|possibly|alternative(?:ly|s)?|otherwise|if|unless|whereas|vs"
                          r"|versus|else)\b|->|=>|[→⇒⟹]|\\(?:to|Rightarrow|implies)(?![A-Za-z])", re.IGNORECASE)
# A value rejected right after the one it follows ('5 and not 6', '5, not 6', '5 but not 6'): the earlier one is stated
_AND_NOT = re.compile(r"[\d$)}]\s*(?:,\s*|\s+(?:and|but)\s+)not\s*\$?\s*\Z", re.IGNORECASE)
_CORRECTION = re.compile(r"\b(?:wait|actually|mistake|wrong|error|oops|hmm|re-?check\w*|redo|correct\w*|instead|rather"
                         r"|no|fix\w*|recalculat\w*|recomput\w*|let\s+me|sorry)\b", re.IGNORECASE)


@dataclass(frozen=True)
class FinalAnswer:
    text: str  # the final answer
    kind: str  # "answer_tag" | "boxed" | "answer_line" | "hashes" | "last_number" | "latex" | "bare_number"
    recent: tuple[str, ...]  # the last answers of that kind, final one last (spam check)
    run: tuple[str, ...]  # the final answer and the ones right before it with only connectives between
    listed: bool = False  # a run of several joined only by commas and 'and' (a list, not alternatives)
    written: str = ""  # the final statement as written (its unit: rlvr.verifiers.math.units)
    line: tuple[str, ...] = ()  # the boxes of its line that a comma or 'and' joins (_on_line), final one last
    problem: str = ""  # why it is no answer though found: retracted, hedged after it, part of an expression (around.py)


# ---------------------------------------------------------------- thinking
def strip_thinking(text: str) -> str:
    """The text after the last `</think>`, before an unclosed `<think>` (what tool calls and games read:
    rlvr.agents.tool_calls counts positions from the last `</think>`)."""
    close = text.rfind("</think>")
    if close >= 0:
        text = text[close + len("</think>"):]
    open_ = text.find("<think>")
    return text if open_ < 0 else text[:open_]


def outside_thinking(text: str) -> str:
    """The text outside every `<think>...</think>` block, the parts joined by blank lines (see the module docstring).
    A `<think>` inside an open block is ignored (a prefilled one written again). Linear: every find starts past
    the last one's result, and the next opener is searched again only once passed."""
    open_tag, close_tag = "<think>", "</think>"
    parts, pos, opener = [], 0, text.find(open_tag)
    while True:
        if 0 <= opener < pos:
            opener = text.find(open_tag, pos)
        stray = text.find(close_tag, pos, opener if opener >= 0 else len(text))
        if stray >= 0:  # a close with nothing open: all before it was reasoning (a prefilled <think>)
            parts, pos = [], stray + len(close_tag)
            continue
        if opener < 0:
            return "\n\n".join(part for part in parts + [text[pos:]] if part)
        parts.append(text[pos:opener])
        close = text.find(close_tag, opener + len(open_tag))
        if close < 0:
            return "\n\n".join(part for part in parts if part)
        pos = close + len(close_tag)


# ---------------------------------------------------------------- candidates of each kind
def _boxed(text: str) -> list[Candidate]:
    found = [Candidate(_cut(text, a, b), s, e) for s, a, b, e, _ in box_spans(text)]
    return [c for c in found if c.text]


def _answer_tags(text: str, mode: Mode) -> list[Candidate]:
    """Complete <answer> blocks, each read as its last statement (a run of alternatives inside it stays one: '<answer>
    \\boxed{3} or \\boxed{4}</answer>' is a hedge), else its whole text."""
    found, pos = [], nth_last(text, "<answer>")  # tags are paired from the last MAX_MARKS openers
    while (start := text.find("<answer>", pos)) >= 0:
        close = text.find("</answer>", start + len("<answer>"))
        if close < 0:
            break
        found.append((start, close))
        pos = close + len("</answer>")
    candidates, found = [], found[-_RECENT:]
    for start, close in found[:-_ANSWER_BLOCKS]:  # older blocks: their whole text, enough to count them as answers
        inner = _cut(text, start + len("<answer>"), close)
        if inner:
            candidates.append(Candidate(inner, start, close + len("</answer>"), inner))
    for start, close in found[-_ANSWER_BLOCKS:]:
        inner = text[start + len("<answer>"):close]
        final = _final(inner, mode, tags=False, fallback=False)
        answer = final.text if final is not None else _cut(inner, 0, len(inner), mode == "latex")
        if final is not None and len(final.run) > 1:
            answer = (", " if final.listed else " or ").join(final.run)
        written = final.written if final is not None else _cut(inner, 0, len(inner))
        answer = (final is None and mode != "latex" and (stated_value(answer) or counted_value(answer))) or answer
        if answer:
            candidates.append(Candidate(answer, start, close + len("</answer>"), written,
                                        problem=final.problem if final is not None else ""))
    return candidates


# ---------------------------------------------------------------- the final answer
def _adjacent(text: str, first: Candidate, second: Candidate, delimited: bool) -> bool:
    """Whether `second` directly follows `first` as an alternative: only connectives between them, or a word that offers
    an alternative and none that corrects (_ALTERNATIVE). An 'Answer:' value that is followed by more than connectives
    ('5. Hmm, 3 + 4 is 7') is no alternative joined by them."""
    gap = text[first.end:second.start]
    if first.end > second.start:
        return False
    if one_sentence(first, second):  # 'The answer is 3, the answer is 4.' (trailers.py)
        return True
    if len(gap) <= 200 and _ALTERNATIVE.search(gap) and not _CORRECTION.search(gap):
        return True
    if not _connective(gap, statements=True):
        return False
    return delimited or _connective(" ".join((first.raw or first.text).split()[1:]))


def _kinds(mode: Mode, tags: bool) -> list:
    refined = mode == "latex"
    kinds = [("answer_tag", lambda t: _answer_tags(t, mode))] if tags else []
    return kinds + [("boxed", _boxed), ("answer_line", lambda t: marked_lines(t, ANSWER_MARK, refined)),
                    ("hashes", lambda t: marked_lines(t, HASH_ANSWER if refined else HASH_MARK, refined))]


def _statements(text: str, mode: Mode, tags: bool) -> list[Candidate]:
    """The answer statements of every kind in text order, each once (see the module docstring): what lies inside a
    box or an <answer> block is dropped, a line holding a box (or another statement) gives way to it, which is then
    declared. Lines that state no value are dropped when another statement does."""
    found = sorted((replace(c, kind=kind, declared=kind != "boxed") for kind, find in _kinds(mode, tags)
                    for c in find(text)), key=lambda c: (c.start, -c.end))
    kept: list[Candidate] = []
    declaring = -1  # end of the last 'Answer:' or '####' line: statements before it lie inside it
    for candidate in found:
        if kept and candidate.start < kept[-1].end and kept[-1].kind not in LINE_KINDS:
            continue  # inside a box or an <answer> block, which reads its own inside
        if kept and candidate.start < kept[-1].end:
            kept.pop()  # a line holding a box: the box is the line's value
        kept.append(replace(candidate, declared=candidate.declared or candidate.start < declaring))
        if candidate.kind in LINE_KINDS:
            declaring = max(declaring, candidate.end)
    valued = [c for c in kept if states_value(c)]
    return _shown(text, (valued or kept)[-_RECENT:])


def _shown(text: str, statements: list[Candidate]) -> list[Candidate]:
    """The statements outside fenced code, unless all lie inside it, less the boxes named as compared or mistaken; when
    none is left, the last one, marked as no answer (rlvr.verifiers.math.hidden)."""
    spans = fenced(text) if "```" in text else []
    ends = [span[1] for span in spans]
    outside = [c for c in statements if not _inside(c.start, spans, ends)] or statements
    told = [c for c in outside if c.kind not in ("boxed", "answer_tag") or not mentioned(text, c.start)]
    return told or [replace(outside[-1], problem=NOT_THE_ANSWER)] if outside else outside


def _inside(at: int, spans: list[tuple[int, int]], ends: list[int]) -> bool:
    i = bisect_right(ends, at)
    return i < len(spans) and spans[i][0] <= at


def _with_run(text: str, candidates: list[Candidate]) -> FinalAnswer:
    """The last statement, with the run of those right before it that only connectives separate, and the declared
    answers before that run (the spam check counts them: rlvr.verifiers.math.hedges)."""
    run, listed = [candidates[-1]], True
    for previous in reversed(candidates[:-1]):
        if run[-1].alone or not _adjacent(text, previous, run[-1], delimited=previous.kind in _DELIMITED):
            break
        listed = listed and list_gap(text[previous.end:run[-1].start])
        run.append(previous)
    earlier = tuple(c.text for c in candidates[:len(candidates) - len(run)] if c.declared)
    final = candidates[-1]
    return FinalAnswer(final.text, final.kind, earlier + tuple(c.text for c in reversed(run)),
                       tuple(c.text for c in reversed(run)), listed and len(run) > 1, final.raw or final.text,
                       _on_line(text, candidates))


def _on_line(text: str, statements: list[Candidate]) -> tuple[str, ...]:
    """The boxes on the final box's line that gaps holding a comma or 'and', and no hedge word, join to it
    ('\\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1, 1)}'): one list where the reference lists several
    values (rlvr.verifiers.math.hedges.answer_text), and a reference's own list (extract_reference)."""
    line: list[Candidate] = []
    for statement in reversed(statements):
        gap = text[statement.end:line[-1].start] if line else ","
        if statement.kind != "boxed" or "\n" in gap or not _LIST_WORD.search(gap) or _HEDGE_WORD.search(gap):
            break
        line.append(statement)
    return tuple(c.text for c in reversed(line))


def _final(text: str, mode: Mode, tags: bool = True, fallback: bool = True) -> FinalAnswer | None:
    statements = _statements(text, mode, tags)
    if statements:  # a correction in prose after the last one states the answer, or withdraws it (corrections.py)
        corrected = correction(text, statements[-1].end, statements[-1].text)
        statements += [corrected] if isinstance(corrected, Candidate) else []
        final = _checked(text, _with_run(text, statements), statements[-1])
        return replace(final, problem=final.problem or corrected) if isinstance(corrected, str) else final
    if not fallback:
        return None
    if mode == "strict":  # a completion that is only a number ('56' to 'Give only the number'): bare.py
        number = bare_number(text)
        return None if number is None else FinalAnswer(number, "bare_number", (number,), (number,), written=number)
    if mode == "latex" and not _BOX_OR_TAG.search(text):  # a box or tag that never closed is no answer
        text = tail(text)  # the last environment or number is in the last paragraphs (math_scan)
        candidates = [Candidate(span.text, span.start, span.end, kind="latex")
                      for span in latex_level(text) if span.text]
        # Environments are mostly reasoning ('$x = 3$'): only the final run counts as answers (spam check).
        if len(candidates) > 1 and _AND_NOT.search(text, max(0, candidates[-1].start - 40), candidates[-1].start):
            candidates.pop()  # 'It is 5 and not 6.' states 5
        if not candidates:
            return None
        final, last = _with_run(text, candidates), candidates[-1]
        sign, unit = unit_around(text, last.start, last.end)  # '$5$ m long': a unit
        return replace(final, recent=final.run, written=sign + final.written + unit,
                       problem=fallback_problem(text, last.start, last.end) or negated_before(text, last.start)
                       or denial_after(text, last.start, last.end) or "")  # '$5$, which is impossible'
    window = tail(text)
    number = last_number(window) if mode == "last_number" and not solves_nothing(window) else None
    if number is None:
        return None
    at = window.rfind(number)
    before = number_before(window, at) if _AND_NOT.search(window, max(0, at - 40), at) else None  # 'It is 5 and not 6.'
    number, at = (before[0], window.rfind(before[0], 0, before[1])) if before else (number, at)
    sign, unit = unit_around(window, at, at + len(number))
    before = number_before(window, at)  # 'It is 3 or 4', '12 3', 'between 3 and 4': a run
    run = (before[0], number) if before and _connective(window[before[1]:at]) else (number,)
    end = at + len(number)
    return FinalAnswer(number, "last_number", run, run, written=sign + number + unit,
                       problem=fallback_problem(window, at, end) or negated_before(window, at)
                       or denial_after(window, at, end) or "")


def _checked(text: str, final: FinalAnswer, last: Candidate) -> FinalAnswer:
    """`final` with what stands around its statement (rlvr.verifiers.math.around): a box's neighbours, its percent
    sign and unit, and a retraction or hedge after it."""
    answer, written, problem = final.text, final.written, last.problem
    if last.kind in ("boxed", "answer_tag"):  # '\\boxed{5} million', '<answer>5</answer> million'
        why, percent = box_problem(text, last.start, last.end, last.kind == "answer_tag", final.text)
        sign, unit = unit_around(text, last.start, last.end)
        answer, written, problem = answer + percent, sign + written + percent + unit, problem or why or ""
    if last.kind == "boxed":  # 'The answer is not: \\boxed{5}', '\\textbf{not } \\boxed{5}'
        problem = problem or negated_before(text, last.start) or ""
    problem = problem or denied(text, last.start, last.end) or ""  # '\\boxed{5} is false', 'Answer: 5 fails'
    problem = problem or denial_after(text, last.start, last.end) or ""  # '\\boxed{5} is extraneous'
    if last.kind in ("boxed", "answer_tag"):  # 'I guess \\boxed{5}', '\\boxed{5}?'
        problem = problem or doubted(text, last.start, last.end) or ""
    problem = problem or trailer_problem(text, last.end, last.line_end, final.text) or ""
    problem = problem or offered_after(text, last.end, final.text) or ""  # '(3 if n is odd)'
    if last.kind in LINE_KINDS:  # 'Answer: 25 would be wrong', 'the lower bound is 25'
        problem = problem or qualified(text, last.start, last.end, 120) or ""
    return replace(final, text=answer, written=written, problem=problem)


def final_answer(completion: str, mode: Mode = "strict") -> FinalAnswer | None:
    """The final answer of a completion, reasoning excluded (see the module docstring: the last statement)."""
    return _final(unstruck(plain(unhidden(outside_thinking(completion)))), mode)  # emphasis.py, hidden.py


# Markdown strikethrough ('~~The answer is 5~~'): withdrawn text, read as blank. As GFM
# flanks it: '~~' opens before a non-space and closes after one, never inside a word, so LaTeX's '~' spacing
# ('x~~=~~5', '5~~\\text{cm}') strikes nothing; one paragraph at most, and no '~~' inside (linear).
_STRUCK = re.compile(r"(?<![^\s(*_])~~(?=[^\s~])(?:(?!\n[ \t]*\n)[^~]|~(?!~)){1,2000}?(?<=[^\s~])~~(?![\w~])")


def unstruck(text: str) -> str:
    """`text` with its struck-through spans blanked (see _STRUCK)."""
    return _STRUCK.sub(lambda m: " " * len(m.group()), text) if "~~" in text else text


def extract_answer(text: str, mode: Mode = "strict") -> str | None:
    found = final_answer(text, mode)
    return None if found is None else found.text


def extract_reference(reference: str) -> str | None:
    """The gold answer: marked the same way as completions, else the whole (plain) reference text. Several boxes
    joined by commas or 'and' are one list ('\\boxed{1}, \\boxed{2}' -> '1, 2'), as in completions; so are
    boxes on one line whose gaps hold a comma or 'and' among other words ('\\boxed{1} papers and \\boxed{2} bins' ->
    '1, 2'): a reference states its answer, it does not correct itself. 'no no no' joins nothing."""
    found = _final(reference, "strict")
    if found is None and _MARKER.search(reference):  # '#### ' or '\\boxed{' with nothing readable after it
        return None
    if found is not None and found.listed:
        return ", ".join(found.run)
    several = found is not None and len(set(found.line)) > 1
    answer = _clean(reference) if found is None else ", ".join(found.line) if several else found.text
    return answer or None
