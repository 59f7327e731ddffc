"""The device rule: every torch tensor factory call in rlvr/ names its device, or says on its line why
it makes a host tensor on purpose (HOST_MARKER).

Why: CI has no GPU. On the one CPU device of a test, `torch.zeros(n)` lands where the policy is; on a GPU it lands
on the CPU, and the first op that combines it with a CUDA tensor crashes (types.length_order did).
`*_like` and `x.new_*` calls are not factories here: they take their device from x. The dynamic check of the same
class of bug is tests/test_device_trap.py.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

RLVR = Path(__file__).resolve().parent.parent / "rlvr"
# torch.<name>(...) calls that make a tensor (or a generator) on the default device when no device= is given
FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "arange", "range", "tensor", "as_tensor", "asarray", "rand", "randn",
    "randint", "randperm", "linspace", "logspace", "eye", "empty_strided", "scalar_tensor", "sparse_coo_tensor",
    "tril_indices", "triu_indices", "from_numpy", "frombuffer", "from_file", "Generator"})
# `# host: <why>` on a line of the call, or in the comment lines right above it: a host (CPU) tensor on purpose,
# e.g. built on the host from Python lists and moved to the policy's device once
HOST_MARKER = re.compile(r"#.*\bhost: *\S")


def _factory_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch" \
            and func.attr in FACTORIES:
        return func.attr
    return None


def _comments_above(lines: list[str], lineno: int) -> list[str]:
    """The block of comment-only lines right above line `lineno` (1-based): a marker there covers the call too."""
    above = lineno - 2
    while above >= 0 and lines[above].lstrip().startswith("#"):
        above -= 1
    return lines[above + 1:lineno - 1]


def offenders(source: str, filename: str = "<snippet>") -> list[str]:
    """'file:line: torch.name(...)' for each factory call with neither device= nor the host marker on its lines."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        name = _factory_name(node) if isinstance(node, ast.Call) else None
        if name is None or any(k.arg == "device" for k in node.keywords):
            continue
        if any(HOST_MARKER.search(line) for line in lines[node.lineno - 1:node.end_lineno] + _comments_above(
                lines, node.lineno)):
            continue
        found.append(f"{filename}:{node.lineno}: torch.{name}(...) names no device= and has no '# host: <why>'")
    return sorted(found, key=lambda s: int(s.split(":")[1]))


def test_every_factory_call_in_rlvr_names_its_device_or_is_marked_host():
    files = sorted(RLVR.rglob("*.py"))
    assert len(files) > 50  # the walk found the package
    found = [o for path in files for o in offenders(path.read_text(), str(path.relative_to(RLVR.parent)))]
    assert not found, "tensor factory calls without a device (pass device=, or mark '# host: <why>'):\n" + \
        "\n".join(found)


SNIPPET = '''
import torch
a = torch.zeros(3)
b = torch.zeros(3, device=x.device)
c = torch.tensor([1, 2], dtype=torch.long)  # host: a list of Python ints, indexed by policy rows
d = torch.full(
    (2, 3), 0.5,
    dtype=torch.float32)
e = torch.full(
    (2, 3), 0.5,  # host: built on the host, moved by .to() below
    dtype=torch.float32)
f = torch.zeros_like(a) + a.new_zeros(3) + torch.cat([a, a])
g = torch.Generator().manual_seed(1)
h = torch.arange(4)  # [N] positions (a comment, not the marker)
i = torch.randn(2, **kw)
j = torch.empty(0)  # host:
# host: a marker in the comment lines right above covers the call
# (a second comment line)
k = torch.ones(2)
# host: but not across a line of code
m = 1
n = torch.ones(2)
'''


def test_the_rule_reports_each_offending_call_with_file_and_line():
    found = offenders(SNIPPET, "x.py")
    assert [f.split(": ")[0] for f in found] == ["x.py:3", "x.py:6", "x.py:13", "x.py:14", "x.py:15", "x.py:16",
                                                 "x.py:22"]
    assert found[0] == "x.py:3: torch.zeros(...) names no device= and has no '# host: <why>'"
    assert "torch.Generator" in found[2]
