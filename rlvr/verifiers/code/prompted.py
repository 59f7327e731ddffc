"""A reference's "prompt": the code the answer completes, as HumanEval gives a signature and docstring.

Chat models answer HumanEval with the whole function in a fenced block; base models, and the benchmark's original
protocol (Chen et al. 2021), continue the prompt with the function's body. Both are read:
  * code that defines the entry point at the start of a line (`def entry(` / `async def entry(`) is the whole
    function; it runs after the prompt, so the prompt's imports and helpers (HumanEval/38's `encode_cyclic`) are
    there for it exactly as for a continuation, and its own definition replaces the prompt's docstring-only one;
  * any other code is the body continuing the prompt, run as prompt + code. A body whose first line starts at
    column 0 (a fenced body: extract_code dedents a block) is indented four spaces first, the prompt's own
    indentation (every HumanEval prompt ends inside its entry function).
A text search, not `ast`: the answer is untrusted and only the sandbox ever compiles it (code/session.py); code
that does not parse fails there either way.
"""
from __future__ import annotations

import re
import textwrap

BODY_INDENT = "    "  # HumanEval's prompts indent the entry function's body by four spaces


def defines(code: str, entry: str) -> bool:
    """Whether `code` defines `entry` at the start of a line (the whole function, not a body)."""
    return re.search(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(entry)}[ \t]*\(", code, re.MULTILINE) is not None


def after_prompt(prompt: str, code: str, entry: str) -> str:
    """The program an answer makes with its prompt: the prompt then the whole function, or the prompt continued by
    the body (see the module docstring)."""
    head = prompt if prompt.endswith("\n") else prompt + "\n"
    if defines(code, entry):
        return head + "\n" + code
    first = next((line for line in code.splitlines() if line.strip()), "")
    return head + (code if first[:1].isspace() else textwrap.indent(code, BODY_INDENT))
