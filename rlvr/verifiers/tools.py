"""Tool-call verifier ("tool_call"): the completion is one JSON value matching a schema or a function signature.

The reference is a JSON string, one of:
  {"schema": {<JSON Schema>}}
      the completion is any JSON document valid under the schema;
  {"function": {"name": "get_weather", "parameters": {<JSON Schema>}}}   (OpenAI's tools format; a
      top-level "type": "function" is ignored; no "parameters" means any object)
      the completion is one call {"name": "get_weather", "arguments": {...}} with no other keys;
      "arguments" may also be a JSON-encoded string, as OpenAI's API returns it;
  either with "expected": {...}: the exact document (schema form) or arguments (function form), compared
      with types kept (true != 1; 1 == 1.0, as JSON has one number type).

Reading the completion: reasoning in <think>...</think> is dropped (rlvr.verifiers.math.extract.strip_thinking);
then the JSON is the content of exactly one <tool_call>...</tool_call> block (Qwen / Hermes format), else of
exactly one ``` / ```json fence, else the whole remaining text. Prose outside the block or fence is allowed.

Strict by construction (the seeds' "tool calling with strict schemas"): validation is jsonschema's, with
format checking on, for the schema's own $schema draft (2020-12 when it names none); `additionalProperties:
false` makes extra keys WRONG. Not JSON or no single call -> UNPARSEABLE. Schema violations, a wrong
function name, extra or missing call keys and expected-value mismatches -> WRONG, with jsonschema's message.
A reference that is not JSON, not of the forms above, holds an invalid schema or a $ref that cannot be
resolved -> ERROR with scorable=False: the reference is at fault (open-r1 PR#566). Remote $refs are never
fetched (jsonschema >= 4.18 retrieves nothing unless given a retriever).

Sizes: a JSON payload over MAX_JSON_CHARS, or nested deeper than MAX_DEPTH, is UNPARSEABLE before
validation: json's C parser recurses per level and jsonschema validates in pure Python.
"""
from __future__ import annotations

import json
import re
from typing import Any

from rlvr.types import Outcome, Verdict
from rlvr.verifiers.base import error_verdict
from rlvr.verifiers.math.extract import strip_thinking

MAX_JSON_CHARS = 100_000  # a tool call is a few hundred bytes; 100 kB validates in milliseconds
MAX_DEPTH = 64  # nesting levels of the parsed JSON
_CACHE_SIZE = 256  # compiled references kept per verifier
_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)


class BadReference(ValueError):
    """The reference, not the completion, is at fault."""


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_payload(completion: str) -> tuple[str | None, str]:
    """(the JSON text of the one tool call, "") or (None, why there is none)."""
    text = strip_thinking(completion)
    opens, closes = text.count("<tool_call>"), text.count("</tool_call>")
    if opens or closes:
        start, end = text.find("<tool_call>"), text.find("</tool_call>")
        if opens != 1 or closes != 1 or end < start:
            return None, (f"expected one <tool_call>...</tool_call> block, found {opens} <tool_call>, "
                          f"{closes} </tool_call>")
        return text[start + len("<tool_call>"):end], ""
    fences = [m.group(1) for _, m in zip(range(2), _FENCE.finditer(text))]
    if len(fences) > 1:
        return None, "several code fences: expected one tool call"
    return (fences[0] if fences else text), ""


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def parse_json(text: str) -> tuple[Any, str]:
    """(value, "") or (None, why the text is not usable JSON)."""
    if len(text) > MAX_JSON_CHARS:
        return None, f"JSON payload has {len(text)} chars (limit {MAX_JSON_CHARS})"
    try:
        value = json.loads(text)
    except RecursionError:
        return None, f"JSON nested too deeply (limit {MAX_DEPTH})"
    except ValueError as err:  # JSONDecodeError, and int strings over Python's digit limit
        return None, f"not JSON: {_short(str(err))}"
    if _depth(value) > MAX_DEPTH:
        return None, f"JSON nested too deeply (limit {MAX_DEPTH})"
    return value, ""


def same_json(a: Any, b: Any) -> bool:
    """Deep equality with JSON types kept: booleans are not numbers, ints and floats are one number type."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b


class _Reference:
    """A parsed, checked reference: a validator, the function name (function form) and expected values."""

    def __init__(self, reference: str):
        import jsonschema

        try:
            spec = json.loads(reference)
        except (TypeError, ValueError) as err:
            raise BadReference(f"reference is not JSON: {_short(str(err))}") from None
        if not isinstance(spec, dict) or ("schema" in spec) == ("function" in spec):
            raise BadReference('reference must hold exactly one of "schema" or "function"')
        self.function = spec.get("function")
        if self.function is not None:
            if not isinstance(self.function, dict) or not isinstance(self.function.get("name"), str):
                raise BadReference('reference "function" needs a string "name"')
            schema = self.function.get("parameters", {"type": "object"})
        else:
            schema = spec["schema"]
        self.expected = spec.get("expected")
        if not isinstance(schema, (dict, bool)):
            raise BadReference(f"schema must be an object or a boolean, not {type(schema).__name__}")
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as err:
            raise BadReference(f"invalid schema in reference: {_short(err.message)}") from None
        self.validator = cls(schema, format_checker=cls.FORMAT_CHECKER)


class ToolCallVerifier:
    """Valid JSON matching the reference's schema or function signature; see the module docstring."""

    name = "tool_call"

    def __init__(self) -> None:
        self._references: dict[str, _Reference | BadReference] = {}  # a group shares one reference

    def verify(self, completion: str, reference: str) -> Verdict:
        try:
            spec = self._reference(reference)
            if isinstance(spec, BadReference):
                return error_verdict(str(spec), scorable=False)
            return self._verify(completion, spec)
        except BadReference as err:  # found only while validating, e.g. a $ref to nowhere
            return error_verdict(str(err), scorable=False)
        except Exception as err:  # total: never raise, never reward by accident
            return error_verdict("tool_call verifier failed", err)

    def _reference(self, reference: str) -> _Reference | BadReference:
        if not isinstance(reference, str):
            return BadReference(f"reference must be a JSON string, not {type(reference).__name__}")
        spec = self._references.get(reference)
        if spec is None:
            try:
                spec = _Reference(reference)
            except BadReference as err:
                spec = err
            if len(self._references) >= _CACHE_SIZE:
                self._references.clear()
            self._references[reference] = spec
        return spec

    def _verify(self, completion: str, spec: _Reference) -> Verdict:
        if not isinstance(completion, str):
            return error_verdict(f"completion must be str, not {type(completion).__name__}")
        payload, problem = json_payload(completion)
        value, problem = parse_json(payload) if payload is not None else (None, problem)
        if problem:
            return Verdict(Outcome.UNPARSEABLE, 0.0, problem)
        if spec.function is not None:
            value, problem = self._arguments(value, spec.function["name"])
            if problem:
                return Verdict(Outcome.WRONG, 0.0, problem)
        problem = self._violation(spec, value)
        if problem:
            return Verdict(Outcome.WRONG, 0.0, problem)
        what = f"call to {spec.function['name']}" if spec.function is not None else "JSON document"
        return Verdict(Outcome.CORRECT, 1.0, f"valid {what}")

    @staticmethod
    def _arguments(call: Any, name: str) -> tuple[Any, str]:
        """The arguments of a {"name", "arguments"} call to `name`, or why `call` is not one."""
        if not isinstance(call, dict):
            return None, f'expected one call {{"name": ..., "arguments": {{...}}}}, not a {type(call).__name__}'
        keys = set(call)
        if keys != {"name", "arguments"}:
            extra, missing = sorted(keys - {"name", "arguments"}), sorted({"name", "arguments"} - keys)
            return None, f"call keys: extra {extra}, missing {missing}"
        if call["name"] != name:
            return None, f"called {_short(repr(call['name']), 40)}, expected {name!r}"
        arguments = call["arguments"]
        if isinstance(arguments, str):  # OpenAI's API encodes arguments as a JSON string
            arguments, problem = parse_json(arguments)
            if problem:
                return None, f"arguments string: {problem}"
        return arguments, ""

    @staticmethod
    def _violation(spec: _Reference, value: Any) -> str:
        """jsonschema's best message for why `value` fails, or a mismatch with the expected value; "" if none."""
        import jsonschema
        from referencing.exceptions import Unresolvable

        try:
            error = jsonschema.exceptions.best_match(spec.validator.iter_errors(value))
        except Unresolvable as err:
            raise BadReference(f"schema $ref cannot be resolved: {_short(str(err))}") from None
        if error is not None:
            where = "arguments" if spec.function is not None else "document"
            return f"{where}{error.json_path.removeprefix('$')}: {_short(error.message, 200)}"
        if spec.expected is not None and not same_json(value, spec.expected):
            return f"valid, but not the expected value {_short(json.dumps(spec.expected), 120)}"
        return ""
