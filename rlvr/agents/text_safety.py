"""Text the model controls, on its way into tool calls, file names and observations.

A filesystem call {"path": "\\ud800"} (a JSON escape for half of a UTF-16 surrogate pair) was echoed
into the observation; the fast tokenizer raised TypeError on the lone surrogate in chat.EnvironmentTurn.ids and
the training run died. The protocol says nothing a model writes raises. Three guards, outermost first:

  * calls (tool_calls._one_call): a call whose JSON holds a lone surrogate in any string, key or value, is one
    malformed call, for every tool of every environment. I-JSON (RFC 7493, sec. 2.1) requires strings of valid
    Unicode; UTF-8 cannot encode such a string, so no tool could store, run or print it.
  * names (fs_tree): a file or folder name holds no control character (C0, DEL, C1), no line or paragraph
    separator and no surrogate: a name with a newline listed as two entries in `ls`.
  * observations (chat.EnvironmentTurn.ids, the one place an environment's text becomes token ids): `shown`
    escapes lone surrogates and the control characters other than tab, newline and carriage return, as
    Python's repr writes them (`\\x00`, `\\x1b`, `\\ud800`), so tokenizing never raises on any str. NUL and the
    other control characters are escaped although SmolLM2's byte-level tokenizer encodes them: other
    tokenizers' normalizers drop them (BERT's clean_text) or map them to an unknown token, so the ids would not
    say what the environment said, and terminals and log viewers act on them (a file's "\\x1b[2J").

File contents keep NUL and control characters (a file holds any text; the JSON state escapes them) and reach
the model escaped through `cat`'s observation; a lone surrogate in a file's text is refused (fs_tree.write), so
the final state always encodes as UTF-8. Backslashes are not escaped: a shown "\\x00" may be those four
characters. The escaping is for reading, not a reversible encoding (tracebacks and code keep their backslashes).
"""
from __future__ import annotations

import re
from typing import Any

# Cc (C0 without tab, newline, carriage return; DEL; C1) and Cs: escaped in what the model reads
_UNSHOWN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
# Cc, Zl, Zp and Cs: never in a name (str.splitlines breaks a line at each of them, or they cannot be encoded)
_NOT_IN_NAMES = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # repr's escape of the character (never a quote here): "\\x00", "\\n", "\\ud800"


def shown(text: str) -> str:
    """An observation as the model reads it: lone surrogates and control characters but tab, newline and carriage
    return escaped (module docstring). Total on str; text without them is returned unchanged."""
    return _UNSHOWN.sub(_escape, text)


def shown_name(text: str) -> str:
    """A path or name inside a message: every character a name may not hold escaped, newlines and tabs too, so
    an error about the path "a\\nb" stays one line."""
    return _NOT_IN_NAMES.sub(_escape, text)


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a file or folder because of a character it holds, or None."""
    bad = _NOT_IN_NAMES.search(name)
    if bad is None:
        return None
    return f"it holds {_escape(bad)}; a name holds no control character, line break or lone surrogate"


def lone_surrogate(text: str) -> str | None:
    """The first lone surrogate of `text`, escaped ("\\ud800"), or None. A Python str built by decoding UTF-8
    never holds one; json.loads makes one from a "\\ud800" escape not followed by its low half."""
    bad = _SURROGATE.search(text)
    return None if bad is None else _escape(bad)


def unicode_problem(value: Any) -> str | None:
    """Why a parsed JSON value is not I-JSON text (a string, key or value, holds a lone surrogate), or None.
    Iterative: the value may be nested as deep as the parser allows."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and (bad := lone_surrogate(item)) is not None:
            return (f"not valid Unicode: a string holds the lone surrogate {bad} (write a character outside the "
                    f"BMP as the character itself or as its pair of escapes)")
    return None


def clip(text: str, limit: int = 300) -> str:
    """text cut to `limit` characters, "..." marking the cut: an error message quoting a 100 kB argument would
    fill the episode's token budget with it."""
    return text if len(text) <= limit else text[:limit - 3] + "..."
