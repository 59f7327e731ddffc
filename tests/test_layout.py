"""The layout of rlvr stays findable: the import contracts of pyproject.toml ([tool.importlinter]) hold,
no modules (and no subpackages) import each other in a circle, and ruff finds nothing.

An import circle is counted whichever way it is spelled: at module level, inside a function (a "lazy" import),
under `if TYPE_CHECKING:`, as `importlib.import_module("rlvr.x.y")` with the name written out (grimp does not see
those; a command loaded that way once hid a circle), or as a built-in task's entry in
rlvr/config/task_catalog.py (rlvr.tasks imports each when the task is built). Each still says that two modules
cannot be understood, tested or moved one without the other, which is what the layout is for.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent

# Circles that are being cut elsewhere. Each entry says why it is here and goes when that change lands; an entry
# whose circle is gone fails the test, so that it is deleted rather than left to excuse a new circle.
ALLOWED_CYCLES: list[frozenset[str]] = []


def _run(*command: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_hold():
    """Every contract in pyproject.toml, through import-linter's own entry point; its report is the message."""
    lint = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    done = _run(sys.executable, "-c", lint)
    assert done.returncode == 0, f"import contracts broken (pyproject.toml):\n{done.stdout}{done.stderr}"
    assert "0 broken" in done.stdout  # the contracts were read and checked, not skipped


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # cache_dir=None: a stale cache would hide a circle just made; building the graph takes about a second
    return grimp.build_graph("rlvr", cache_dir=None)


def circles(imports: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected groups of more than one node: a node is in one with every node it reaches and that
    reaches it back. `imports` maps each node to the nodes it imports directly."""
    reach = {}
    for start in imports:
        seen, todo = set(), list(imports[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(imports.get(node, ()))
        reach[start] = seen
    groups = {frozenset({a, *(b for b in reach[a] if a in reach[b])}) for a in imports}
    return {group for group in groups if len(group) > 1}


def _describe(circle: frozenset[str], imports: dict[str, set[str]]) -> str:
    edges = sorted(f"{a} -> {b}" for a in circle for b in imports[a] & circle)
    return f"{sorted(circle)}: " + ", ".join(edges)


def importlib_imports(source: str, modules: set[str]) -> set[str]:
    """The rlvr modules a source may import through importlib: when it calls `import_module` (as
    `importlib.import_module` or imported by name), every string in it that names one of `modules`, whether passed
    directly (`import_module("rlvr.cli.sft")`) or kept in a list the call walks (how rlvr/cli/main.py once loaded
    its commands)."""
    tree = ast.parse(source)
    calls = [call for call in ast.walk(tree) if isinstance(call, ast.Call) and (call.func.attr if isinstance(
        call.func, ast.Attribute) else getattr(call.func, "id", None)) in ("import_module", "__import__")]
    if not calls:
        return set()
    names = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    for call in calls:  # import_module(".sft", "rlvr.cli"): the name the call resolves to
        written = [a.value if isinstance(a, ast.Constant) else None for a in call.args[:2]]
        if len(written) == 2 and isinstance(written[0], str) and written[0].startswith(".") and written[1]:
            names.add(importlib.util.resolve_name(written[0], written[1]))
    return names & modules


def _all_imports(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """grimp's direct imports, plus the importlib imports with a written-out name and the task catalogue's."""
    from rlvr.config.task_catalog import BUILTIN_TASKS

    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    for module in graph.modules:
        path = ROOT / Path(*module.split("."))
        file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        imports[module] |= importlib_imports(file.read_text(encoding="utf-8"), set(imports)) - {module}
    imports["rlvr.tasks"] |= {task.where.partition(":")[0] for task in BUILTIN_TASKS.values()}
    return imports


def test_no_module_imports_itself_through_others(graph):
    imports = _all_imports(graph)
    found = circles(imports)
    new = [_describe(c, imports) for c in found - set(ALLOWED_CYCLES)]
    assert not new, "modules that import each other (cut the circle; see tests/test_layout.py):\n" + "\n".join(new)
    gone = [sorted(c) for c in set(ALLOWED_CYCLES) - found]
    assert not gone, f"allowed circles that no longer exist; delete their ALLOWED_CYCLES entries: {gone}"


def test_no_subpackage_imports_itself_through_others(graph):
    """The same one level up: rlvr.X imports rlvr.Y and rlvr.Y imports rlvr.X, whichever modules do it."""
    imports: dict[str, set[str]] = {}
    for m, imported in _all_imports(graph).items():
        imports.setdefault(_package(m), set()).update(_package(n) for n in imported if _package(n) != _package(m))
    found = [_describe(c, imports) for c in circles(imports)]
    assert not found, "subpackages that import each other:\n" + "\n".join(found)


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])  # rlvr.grpo.loop -> rlvr.grpo; rlvr.types stays itself


def test_ruff_finds_nothing():
    """`ruff check` with pyproject.toml's [tool.ruff] rules; its findings are the message."""
    done = _run(sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                "rlvr", "tests", "bench", "scripts")
    assert done.returncode == 0, f"ruff check rlvr tests bench scripts:\n{done.stdout}{done.stderr}"


def test_circles_finds_what_it_should():
    """The search itself: a two-node and a three-node circle are found, a chain and a self-import are not."""
    imports = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a", "f"}, "g": set()}
    assert circles(imports) == {frozenset({"a", "b"}), frozenset({"c", "d", "e"})}


def test_an_importlib_import_of_a_written_out_name_counts():
    """A module name passed to import_module, or listed for it in a tuple, counts, whether importlib is named or
    not; a name in a module that never calls import_module does not, nor does a string naming no module. Catches a
    search that drops either spelling, or that ignores names kept in a list (the circle the commands' move once
    made)."""
    modules = {"rlvr.cli.sft", "rlvr.cli.sample", "rlvr.cli.main"}
    direct = "import importlib\nimportlib.import_module('rlvr.cli.sft')\n"
    listed = ("from importlib import import_module\nCOMMANDS = ('rlvr.cli.sample', 'rlvr.nope')\n"
              "for name in COMMANDS:\n    import_module(name)\n")
    assert importlib_imports(direct, modules) == {"rlvr.cli.sft"}
    assert importlib_imports(listed, modules) == {"rlvr.cli.sample"}
    assert importlib_imports("NAME = 'rlvr.cli.main'\nopen(NAME)\n", modules) == set()
    # the other spellings of a dynamic import: the builtin, and a name relative to a package
    assert importlib_imports("__import__('rlvr.cli.sft')\n", modules) == {"rlvr.cli.sft"}
    assert importlib_imports("import importlib\nimportlib.import_module('.sample', 'rlvr.cli')\n", modules) == {
        "rlvr.cli.sample"}


def test_every_task_in_the_catalogue_is_a_module_that_exists(graph):
    """The catalogue's entries are import edges of rlvr.tasks (above); one naming no module would add none."""
    from rlvr.config.task_catalog import BUILTIN_TASKS

    assert {task.where.partition(":")[0] for task in BUILTIN_TASKS.values()} <= set(graph.modules)


def test_the_old_entry_point_still_trains():
    """Scripts written before the layout import rlvr.recipes.grpo.train: it must be the loop's own train,
    not a copy that could drift. Catches a shim that re-implements or drops the re-export."""
    from rlvr.grpo.loop import train
    from rlvr.recipes.grpo import train as old_train

    assert old_train is train
