"""`rlvr config [SECTION]`: every config key with its type, default and description.

Read from the typed config itself (rlvr/config/run.py RunConfig and the sections it composes), so the listing is
the defaults the code runs with: dotted keys as a command line writes them (`rollout.max_new_tokens=64`), nested
sections flattened (`rollout.dynamic_sampling.enabled`), values in the YAML spelling an override takes (null, true,
[1, 4]). Torch-free, like `--help`.
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import types
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from rlvr.config.base import ConfigError
from rlvr.config.run import RunConfig

PAGE_COMMAND = "rlvr config --markdown > docs/configuration.md"
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
    p.add_argument("--markdown", action="store_true", help=f"the whole listing as a Markdown page ({PAGE_COMMAND})")
    p.set_defaults(func=cmd_config)


def point_to_config(sub: argparse._SubParsersAction) -> None:
    """Every command that takes dotted.key=value overrides says in its --help where the keys are listed."""
    for parser in sub.choices.values():
        if any(action.dest == "overrides" for action in parser._actions):
            parser.epilog = f"{parser.epilog}\n\n{POINTER}" if parser.epilog else POINTER


def cmd_config(args: argparse.Namespace) -> int:
    if args.markdown and args.section is not None:
        raise ConfigError(f"--markdown prints every section (the page of `{PAGE_COMMAND}`); leave out "
                          f"{args.section!r}")
    print(markdown_page() if args.markdown else table(select(config_rows(RunConfig), args.section)), end=(
        "" if args.markdown else "\n"))
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


# docs/configuration.md's text above the tables; the tables are read from the typed config.
PAGE_INTRO = f"""# Configuration

<!-- Generated from the typed config (rlvr/config/*.py) by `{PAGE_COMMAND}`:
edit the descriptions there and run that command; tests/test_docs_site.py fails while this page is behind. -->

Every key a run reads, with its type, default and description, grouped by section. A key's value is, the later
one winning:

1. its default (below, held in `rlvr/config/` and nowhere else);
2. a YAML file given first on the command line, holding the same sections as mappings (`configs/` has presets);
3. `dotted.key=value` overrides after it, each value read as YAML (`null`, `true`, `1e-5`, `[1, 2]`,
   `{{math: 1.0, format: 0.2}}`; quote one that holds spaces or brackets for the shell).

```yaml
max_steps: 50
rollout:
  group_size: 4
  dynamic_sampling:
    enabled: false
```

```bash
rlvr train configs/dapo.yaml max_steps=50 rollout.group_size=4 'task.train_levels=[1, 2]'
rlvr config rollout                      # one section in the terminal, as on this page
rlvr config rollout.dynamic_sampling     # a nested section (or one key: rlvr config max_steps)
```

An unknown key, a wrong type or an impossible combination is refused before any model loads, with the key and
what is allowed; a run writes the config it resolved to `RUN/config.yaml`, which `--resume` reads back.
"""


def markdown_page(model: type[BaseModel] = RunConfig) -> str:
    """docs/configuration.md: PAGE_INTRO, the top-level keys, then one table per section with its docstring."""
    rows = config_rows(model)
    parts = [PAGE_INTRO, "## Top-level keys\n", _markdown_table([row for row in rows if "." not in row.key])]
    for name, field in model.model_fields.items():
        section = _section(field.annotation)
        if section is not None:
            doc = " ".join((section.__dict__.get("__doc__") or "").split())
            parts += [f"## {name}\n", *([f"{_cell(doc)}\n"] if doc else []), _markdown_table(select(rows, name))]
    return "\n".join(parts)


def _markdown_table(rows: list[KeyRow]) -> str:
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r.key}` | {_escape(r.type)} | {_code(r.default)} | {_cell(r.description)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text for a Markdown table cell that GitHub and Python-Markdown (the site) render alike: its `code` spans
    kept, the rest escaped. A pipe inside a code span splits GitHub's cell, and its escape shows in the site's."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no spans
        return _escape(text)
    return "".join(_code(part) if index % 2 else _escape(part) for index, part in enumerate(parts))


def _code(text: str) -> str:
    return f"`{text}`" if text.strip() and not re.search(r"[|`]", text) else _escape(f"`{text}`")


def _escape(text: str) -> str:
    """Backslash before what Markdown would read as markup: a pipe, `*`, a backtick, a backslash, `_` at a word's
    edge (emphasis; `name_or_path` is none); `<` as an entity, since `<think>` would be an HTML tag."""
    text = re.sub(r"([\\`*|])", r"\\\1", text)
    return re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", text).replace("<", "&lt;")
