"""`rlvr config [SECTION]`: every config key with its type, default and description (issue 48, item 4).

Read from the typed config itself (rlvr/config/run.py RunConfig and the sections it composes), so the listing is
the defaults the code runs with: dotted keys as a command line writes them (`rollout.max_new_tokens=64`), nested
sections flattened (`rollout.dynamic_sampling.enabled`), values in the YAML spelling an override takes (null, true,
[1, 4]). Torch-free, like `--help`.
"""
from __future__ import annotations

import argparse
import difflib
import json
import types
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from rlvr.config.base import ConfigError
from rlvr.config.run import RunConfig

POINTER = "Every key, with its type, default and description: `rlvr config [SECTION]` (e.g. `rlvr config rollout`)."
_BOUNDS = ((annotated_types.Ge, "ge", ">="), (annotated_types.Gt, "gt", ">"), (annotated_types.Le, "le", "<="),
           (annotated_types.Lt, "lt", "<"))


@dataclass(frozen=True)
class KeyRow:
    key: str  # dotted, as an override writes it
    type: str
    default: str
    description: str


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="list every config key with its type, default and description",
                       description="Every key that a YAML config file or a dotted.key=value override can set, with "
                                   "its type, default and description.")
    p.add_argument("section", nargs="?", help="only this section (rollout, rollout.dynamic_sampling, ...) or key")
    p.set_defaults(func=cmd_config)


def point_to_config(sub: argparse._SubParsersAction) -> None:
    """Every command that takes dotted.key=value overrides says in its --help where the keys are listed."""
    for parser in sub.choices.values():
        if any(action.dest == "overrides" for action in parser._actions):
            parser.epilog = f"{parser.epilog}\n\n{POINTER}" if parser.epilog else POINTER


def cmd_config(args: argparse.Namespace) -> int:
    print(table(select(config_rows(RunConfig), args.section)))
    return 0


def config_rows(model: type[BaseModel], prefix: str = "") -> list[KeyRow]:
    """One row per settable key of `model`, its sections flattened in declaration order."""
    rows = []
    for name, field in model.model_fields.items():
        section = _section(field.annotation)
        if section is not None:
            rows += config_rows(section, f"{prefix}{name}.")
        else:
            rows.append(KeyRow(f"{prefix}{name}", field_type(field), value_text(_default(field)),
                               " ".join((field.description or "").split())))
    return rows


def sections(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[str]:
    """The dotted names of every section and nested section ("rollout", "rollout.dynamic_sampling", ...)."""
    names = []
    for name, field in model.model_fields.items():
        section = _section(field.annotation)
        if section is not None:
            names += [f"{prefix}{name}", *sections(section, f"{prefix}{name}.")]
    return names


def select(rows: list[KeyRow], section: str | None) -> list[KeyRow]:
    """The rows of a section (its nested sections included) or the one row of a key; else one error that lists the
    sections."""
    if section is None:
        return rows
    chosen = [row for row in rows if row.key == section or row.key.startswith(f"{section}.")]
    if chosen:
        return chosen
    known = sections()
    close = difflib.get_close_matches(section, known + [row.key for row in rows], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"unknown config section {section!r}{hint}; sections: {', '.join(known)} (or a key, e.g. "
                      "max_steps)")


def table(rows: list[KeyRow]) -> str:
    """Aligned columns; a long type or default pushes its line's description right rather than being cut."""
    header = KeyRow("KEY", "TYPE", "DEFAULT", "DESCRIPTION")
    widths = [max(len(r.key) for r in [header, *rows]), min(24, max(len(r.type) for r in [header, *rows])),
              min(16, max(len(r.default) for r in [header, *rows]))]
    lines = []
    for r in [header, *rows]:
        cells = [r.key.ljust(widths[0]), r.type.ljust(widths[1]), r.default.ljust(widths[2]), r.description]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def field_type(field: FieldInfo) -> str:
    """`int >= 1`, `float > 0, <= 1`, `{auto,sdpa,matmul}`, `str | null`, `list[int]`."""
    bounds = [f"{sign} {value_text(getattr(m, attr))}" for m in field.metadata for kind, attr, sign in _BOUNDS
              if isinstance(m, kind)]
    text = type_text(field.annotation)
    if not bounds:
        return text
    base, optional = text.removesuffix(" | null"), text.endswith(" | null")  # the bounds are the value's, not null's
    return f"{base} {', '.join(bounds)}" + (" | null" if optional else "")


def type_text(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return type_text(args[0])
    if origin is Literal:
        return "{" + ",".join(value_text(a) for a in args) + "}"
    if origin in (Union, types.UnionType):
        kept = [type_text(a) for a in args if a is not type(None)]
        return " | ".join(kept + (["null"] if type(None) in args else []))
    if origin in (list, tuple, dict):
        return f"{origin.__name__}[{', '.join(type_text(a) for a in args)}]"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def value_text(value: Any) -> str:
    """A value as a `key=value` override writes it (YAML): null, true, 1e-05, [1, 4], {math: 1.0} as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if _reads_back(value) else json.dumps(value, ensure_ascii=False)  # a YAML double-quoted string
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return repr(value)


def _reads_back(text: str) -> bool:
    """Whether `key=text` gives back `text` bare: YAML reads it as that very string (not null, a number, a list, a
    mapping, nor an error, as ': ' in "End with 'Answer: <number>'." is) and no edge whitespace is stripped."""
    try:
        return bool(text) and text == text.strip() and yaml.safe_load(text) == text
    except yaml.YAMLError:
        return False


def _default(field: FieldInfo) -> Any:
    return field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]


def _section(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
