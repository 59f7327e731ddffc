"""Format and behaviour verifiers: reward the shape of a completion, not its correctness.

"format" checks the DeepSeek-R1 layout `<think>...</think><answer>...</answer>` (R1 paper, section 2.2.2:
a format reward alongside the accuracy reward). "think_format" checks `<think>...</think>` then a free-form
answer. "tag_count" gives partial credit per tag, as open-r1's tag_count_reward does. "answer_format"
checks that the last line is `Answer: <number>`, the layout our default task instruction asks for.
"language" scores the share of the completion's letters written in the expected script (the R1 paper's
language-consistency reward, section 2.3.2, measured by script rather than by word lists).

Chat templates that prefill `<think>` in the prompt (Qwen3, DeepSeek-R1 distills) produce completions that
start inside the think block; a format reward that wants `<think>` in the completion then scores every
sample 0 (trl#6966). `think_prefilled=True` reads such completions as if they began with `<think>`, and
then treats a `<think>` in the completion as a second, duplicated one.

Both are written with str.count/find and anchored, single-pass regexes, so a 1 MB adversarial completion
costs linear time. A one-regex version like `^<think>.*?</think>\\s*<answer>.*?</answer>$` backtracks
over every `</think>` and is quadratic on inputs that repeat the tags without closing the answer.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter

from rlvr.types import Outcome, Verdict
from rlvr.verifiers.base import error_verdict

_TAGS = ("<think>", "</think>", "<answer>", "</answer>")
_ANSWER_LINE = re.compile(r"Answer:[ \t]*-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?[ \t]*\.?")


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def think_answer_problems(text: str) -> list[str]:
    """What keeps `text` from being `<think>..</think> <answer>..</answer>`; empty list when it is."""
    counts = {tag: text.count(tag) for tag in _TAGS}
    missing = [tag for tag, n in counts.items() if n == 0]
    if missing:
        return [f"missing {', '.join(missing)}"]
    duplicated = [f"{tag} x{n}" for tag, n in counts.items() if n > 1]
    if duplicated:
        return [f"duplicated {', '.join(duplicated)}"]
    open_think, close_think, open_answer, close_answer = (text.find(tag) for tag in _TAGS)
    if not open_think < close_think < open_answer < close_answer:
        return ["tags out of order (expected <think>, </think>, <answer>, </answer>)"]
    problems = []
    if text[:open_think].strip():
        problems.append(f"text before <think>: {_short(text[:open_think].strip())}")
    between = text[close_think + len("</think>"):open_answer]
    if between.strip():
        problems.append(f"text between </think> and <answer>: {_short(between.strip())}")
    if not text[open_answer + len("<answer>"):close_answer].strip():
        problems.append("empty <answer>")  # an empty answer would earn the format reward for nothing
    after = text[close_answer + len("</answer>"):]
    if after.strip():
        problems.append(f"text after </answer>: {_short(after.strip())}")
    return problems


def _prefill(text: str, think_prefilled: bool) -> tuple[str, list[str]]:
    """The completion as if `<think>` opened it, when the prompt did (trl#6966); plus what is wrong with that."""
    if not think_prefilled:
        return text, []
    if "<think>" in text:
        return text, ["duplicated <think> (the prompt already opened the think block)"]
    return "<think>" + text, []


class FormatVerifier:
    """`<think>...</think>` then `<answer>...</answer>`, one of each, only whitespace outside them."""

    name = "format"

    def __init__(self, think_prefilled: bool = False):
        self.think_prefilled = think_prefilled  # the chat template put `<think>` in the prompt

    def verify(self, completion: str, reference: str = "") -> Verdict:
        try:
            text, problems = _prefill(completion, self.think_prefilled)
            problems = problems or think_answer_problems(text)
        except Exception as err:  # e.g. a non-str completion: total, never raise
            return error_verdict("format verifier failed", err)
        if problems:
            return Verdict(Outcome.WRONG, 0.0, "; ".join(problems))
        return Verdict(Outcome.CORRECT, 1.0, "think/answer format ok")


class AnswerLineVerifier:
    """The last non-empty line is `Answer: <number>` (ints, decimals, negatives, 3/4, 1,234)."""

    name = "answer_format"

    def verify(self, completion: str, reference: str = "") -> Verdict:
        try:
            body = completion.rstrip()
            if not body:
                return Verdict(Outcome.WRONG, 0.0, "empty completion (expected a final 'Answer: <number>' line)")
            last_line = body[body.rfind("\n") + 1:].strip()
            if _ANSWER_LINE.fullmatch(last_line):
                return Verdict(Outcome.CORRECT, 1.0, "ends with an 'Answer: <number>' line")
            return Verdict(Outcome.WRONG, 0.0, f"last line is not 'Answer: <number>': {_short(last_line)}")
        except Exception as err:
            return error_verdict("answer_format verifier failed", err)


# ---------------------------------------------------------------- think, then answer
def think_then_answer_problems(text: str) -> list[str]:
    """What keeps `text` from being one non-empty `<think>..</think>` block followed by a non-empty answer."""
    counts = {tag: text.count(tag) for tag in ("<think>", "</think>")}
    wrong = [f"{tag} x{n}" for tag, n in counts.items() if n != 1]
    if wrong:
        return [f"expected one <think> and one </think>, found {', '.join(wrong)}"]
    open_think, close_think = text.find("<think>"), text.find("</think>")
    if close_think < open_think:
        return ["</think> before <think>"]
    problems = []
    if text[:open_think].strip():  # also catches tags inside a code fence: the fence comes first
        problems.append(f"text before <think>: {_short(text[:open_think].strip())}")
    if not text[open_think + len("<think>"):close_think].strip():
        problems.append("empty <think> block")
    if not text[close_think + len("</think>"):].strip():
        problems.append("no answer after </think>")
    return problems


class ThinkFormatVerifier:
    """One non-empty `<think>...</think>` block first, then a non-empty answer (any layout)."""

    name = "think_format"

    def __init__(self, think_prefilled: bool = False):
        self.think_prefilled = think_prefilled

    def verify(self, completion: str, reference: str = "") -> Verdict:
        try:
            text, problems = _prefill(completion, self.think_prefilled)
            problems = problems or think_then_answer_problems(text)
        except Exception as err:
            return error_verdict("think_format verifier failed", err)
        if problems:
            return Verdict(Outcome.WRONG, 0.0, "; ".join(problems))
        return Verdict(Outcome.CORRECT, 1.0, "think block then answer")


class TagCountVerifier:
    """0.25 for each of `<think>`, `</think>`, `<answer>`, `</answer>` that occurs exactly once.

    The shaping reward of open-r1's tag_count_reward (src/open_r1/rewards.py), which counts the tags with
    their surrounding newlines ("<think>\\n", "\\n</think>\\n", ...); we count the bare tags, so the score
    does not depend on line breaks that the "format" verifier does not require either. With
    `think_prefilled`, the right count of `<think>` in the completion is 0 (the prompt holds it).
    """

    name = "tag_count"

    def __init__(self, think_prefilled: bool = False):
        self.think_prefilled = think_prefilled

    def verify(self, completion: str, reference: str = "") -> Verdict:
        try:
            wanted = {tag: 1 for tag in _TAGS}
            if self.think_prefilled:
                wanted["<think>"] = 0
            counts = {tag: completion.count(tag) for tag in _TAGS}
        except Exception as err:
            return error_verdict("tag_count verifier failed", err)
        score = 0.25 * sum(counts[tag] == n for tag, n in wanted.items())
        detail = ", ".join(f"{tag} x{counts[tag]}" + ("" if counts[tag] == n else f" (want {n})")
                           for tag, n in wanted.items())
        return Verdict(Outcome.CORRECT if score == 1.0 else Outcome.WRONG, score, detail)


# ---------------------------------------------------------------- language consistency
# Names accepted for a script, besides Unicode's own script words ("latin", "cyrillic", "greek", ...).
_SCRIPT_ALIASES = {
    "english": "latin", "french": "latin", "german": "latin", "spanish": "latin", "italian": "latin",
    "portuguese": "latin", "vietnamese": "latin", "indonesian": "latin", "turkish": "latin", "polish": "latin",
    "russian": "cyrillic", "ukrainian": "cyrillic", "bulgarian": "cyrillic", "serbian": "cyrillic",
    "chinese": "cjk", "japanese": "cjk", "korean": "cjk", "han": "cjk", "hiragana": "cjk", "katakana": "cjk",
    "hangul": "cjk", "persian": "arabic", "farsi": "arabic", "urdu": "arabic", "hindi": "devanagari",
    "marathi": "devanagari", "nepali": "devanagari", "hebrew": "hebrew", "greek": "greek", "thai": "thai",
}
# Han, kana and Hangul form one group: Japanese mixes Han and kana in every sentence, and telling languages
# that share a script apart is beyond a script check.
_CJK_WORDS = frozenset({"CJK", "HIRAGANA", "KATAKANA", "HANGUL", "IDEOGRAPHIC"})
_SCRIPT_WORDS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARABIC", "HEBREW", "DEVANAGARI", "BENGALI", "THAI",
                           "ARMENIAN", "GEORGIAN", "TAMIL", "TELUGU", "KANNADA", "MALAYALAM", "GUJARATI",
                           "GURMUKHI", "ETHIOPIC", "KHMER", "LAO", "MYANMAR", "SINHALA", "TIBETAN"})
# Not prose: LaTeX commands, $...$ math, XML-style tags, fenced code. Their letters are Latin in any language.
_NOT_PROSE = re.compile(r"```.*?(?:```|$)|\$[^$\n]*\$|\\[A-Za-z]+|</?[A-Za-z_][\w-]*>", re.DOTALL)


@functools.lru_cache(maxsize=65536)
def script_of(char: str) -> str | None:
    """The script of a letter ('latin', 'cyrillic', 'cjk', ...), from its Unicode name; None if not a letter."""
    if not char.isalpha():
        return None
    if char.isascii():
        return "latin"
    words = unicodedata.name(char, "").replace("-", " ").split()[:3]
    for word in words:
        if word in _CJK_WORDS:
            return "cjk"
        if word in _SCRIPT_WORDS:
            return word.lower()
    return words[0].lower() if words else "unknown"


def script_shares(text: str) -> tuple[dict[str, float], int]:
    """Share of the text's prose letters in each script, and the number of letters counted."""
    per_script: dict[str, int] = {}
    for char, n in Counter(_NOT_PROSE.sub(" ", text)).items():
        script = script_of(char)
        if script is not None:
            per_script[script] = per_script.get(script, 0) + n
    total = sum(per_script.values())
    return ({script: n / total for script, n in per_script.items()} if total else {}), total


def expected_script(reference: str) -> str | None:
    """A script name or alias given as the reference ('latin', 'Russian'), else the main script of the
    reference text itself (pass the prompt as the reference); None when it has no letters."""
    name = reference.strip().lower()
    if name in _SCRIPT_ALIASES:
        return _SCRIPT_ALIASES[name]
    if name.upper() in _SCRIPT_WORDS or name == "cjk":
        return name
    shares, _ = script_shares(reference)
    return max(shares, key=shares.get) if shares else None


class LanguageVerifier:
    """Share of the completion's letters in the expected script; CORRECT when it is at least `threshold`.

    `verify(completion, reference)` receives the task's reference answer, not the prompt, so the expected
    script comes from (first match wins): the `script` given to the constructor (a task setting), a
    reference that names a script or language ("latin", "cyrillic", "cjk", "russian", ...), or the script
    most of the reference text's letters are in. Letters of LaTeX commands, $...$ math, tags and fenced code
    are not counted: they are Latin whatever language the prose is in. Reasoning inside <think> counts, as in
    the R1 paper, whose language-consistency reward targets exactly the chain of thought.
    """

    name = "language"

    def __init__(self, script: str | None = None, threshold: float = 0.95):
        self.script = None if script is None else expected_script(script)
        if script is not None and self.script is None:
            raise ValueError(f"unknown script {script!r}")
        self.threshold = threshold

    def verify(self, completion: str, reference: str = "") -> Verdict:
        try:
            script = self.script or expected_script(reference)
            if script is None:
                return error_verdict(f"no script to expect: reference {_short(reference)} names none and "
                                     "has no letters", scorable=False)
            shares, letters = script_shares(completion)
        except Exception as err:
            return error_verdict("language verifier failed", err)
        if not letters:
            return Verdict(Outcome.UNPARSEABLE, 0.0, "no letters in the completion")
        share = shares.get(script, 0.0)
        others = ", ".join(f"{s} {v:.0%}" for s, v in sorted(shares.items(), key=lambda kv: -kv[1]) if s != script)
        detail = f"{share:.1%} of {letters} letters in {script}" + (f" (also {others})" if others else "")
        return Verdict(Outcome.CORRECT if share >= self.threshold else Outcome.WRONG, share, detail)
