"""A truncated completion's explicit answer that may itself have been cut: an
`Answer:` line or `####` whose value runs to the very end of the cut text may be a prefix of the number the model
was writing ("Answer: 1" of 12, "Answer: 0." of 0.5). Boxes and <answer> tags are not read until their closing
delimiter is written, so a cut one is no answer already."""
from __future__ import annotations

import re

CUT_KINDS = frozenset({"answer_line", "hashes"})
CUT_ANSWER = "the final answer runs to the end of the cut text, so it may have been cut mid-value"
# the value ended: punctuation closing it, then a space and more text ('42. So'), or a space and a whole word, one
# the cut did not end ('Answer: 4 hund' may have been 4 hundred, 'Answer: 4 doz' 4 dozen)
_ENDED = re.compile(r"[^\w\s]+\s+\S|\S*\s+[^\w\s]*\w+\W")
# where a final answer begins: a box, a tag, '####', or 'answer' followed by ':', '=', a verb or the cut ('Final
# answer:', 'the answer is'); not the word inside '</answer>' nor 'answer' in prose ('this answer helps')
_STARTS = re.compile(r"\\boxed|\\fbox|<answer>|####|(?<![</\w])answer(?=\s*(?:[:=]|(?:is|was|would|will|should|must)"
                     r"\b|\Z))", re.IGNORECASE)


def cut_mid_answer(completion: str, final) -> bool:
    """True when `final` (an extract.FinalAnswer of `completion`, a text cut at max_new_tokens) is an answer line or
    `####` value with nothing after it before the cut: neither a line break nor more text after a space."""
    if _next_answer_started(completion, [span for span in (final.written, final.text) if span]):
        return True
    if final.kind not in CUT_KINDS:
        return False
    line = completion[completion.rfind("\n") + 1:]
    head, low = completion[:len(completion) - len(line)], line.lower()
    anchor = max(low.rfind("####"), low.rfind("answer"))
    spans = [span for span in (final.written, final.text) if span]
    if anchor < 0 and any(span in head for span in spans):
        return False  # written on an earlier line (the last line has no answer marker): a line break follows it
    for span in spans:
        start = line.find(span, max(anchor, 0))
        if start >= 0:
            inner = span.find(final.text)
            end = start + (inner + len(final.text) if inner >= 0 else len(span))
            return _ENDED.match(line[end:]) is None
    # found on no line with a marker: a line break follows it when it was written earlier; found nowhere (the
    # reading normalised it beyond recognition), it is taken as possibly cut rather than trusted
    return not any(span in head for span in spans)


def _next_answer_started(completion: str, spans: list[str]) -> bool:
    """Whether the cut text's last answer marker holds none of the final answer's text: the model had begun another
    answer when it was cut ('\\boxed{4} ... Actually the answer is', '\\boxed{4}\\n\\boxed{5'), so the earlier one
    may not be its final answer."""
    last = None
    for last in _STARTS.finditer(completion):
        pass
    return last is not None and not any(span in completion[last.end():] for span in spans)
