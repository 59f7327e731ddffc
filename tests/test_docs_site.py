"""The docs site: docs/configuration.md is the typed config as `rlvr config --markdown` prints it, and
`mkdocs build --strict` (mkdocs.yml, scripts/mkdocs_hooks.py) builds README.md and docs/ with no broken link,
anchor or file link and no page left out of the nav."""
from __future__ import annotations

import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest

from rlvr.cli.config import PAGE_COMMAND, config_rows, markdown_page
from rlvr.cli.main import main
from rlvr.config.run import RunConfig
from test_config_cli import leaf_keys

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"


def test_the_configuration_page_is_the_typed_config():
    """Catches a description, default or key changed in rlvr/config/ without the page regenerated (and a page
    edited by hand)."""
    assert PAGE.read_text(encoding="utf-8") == markdown_page(), f"docs/configuration.md is behind: run `{PAGE_COMMAND}`"


def test_the_page_command_prints_the_page(capsys):
    """`rlvr config --markdown` is the page byte for byte (no extra newline); with a section it is one error."""
    assert main(["config", "--markdown"]) == 0
    assert capsys.readouterr().out == markdown_page()
    assert main(["config", "rollout", "--markdown"]) == 2
    assert "--markdown prints every section" in capsys.readouterr().err


class _Cells(HTMLParser):
    """The text of each <td> of a rendered page, per row."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_every_key_renders_once_with_its_own_type_default_and_description():
    """Rendered as the site renders it (Python-Markdown's tables), each key is one row whose cells read back as the
    listing's text: catches a section or the top-level keys left out, a row twice, and an escape that shows or
    splits a cell (a pipe in `str | null`, `<think>` read as a tag, `*` as emphasis, a backslash eaten)."""
    markdown = pytest.importorskip("markdown")  # Python-Markdown, the site's renderer (mkdocs installs it)
    parser = _Cells()
    parser.feed(markdown.markdown(markdown_page(), extensions=["tables"]))
    rendered = {}
    for cells in parser.rows:
        if cells:
            assert len(cells) == 4, cells
            assert cells[0] not in rendered, f"{cells[0]} listed twice"
            rendered[cells[0]] = cells[1:]
    assert list(rendered) == [k for k in leaf_keys(RunConfig) if "." not in k] + \
        [k for k in leaf_keys(RunConfig) if "." in k]  # the top-level keys first, then the sections in order
    for row in config_rows(RunConfig):
        want = [row.type, row.default, row.description]
        assert [cell.replace("`", "") for cell in rendered[row.key]] == [w.replace("`", "") for w in want], row.key


def test_a_description_with_markup_renders_as_written():
    """The escapes on the awkward cases one by one (expected texts written out by hand)."""
    from rlvr.cli.config import _cell

    markdown = pytest.importorskip("markdown")
    cases = {"a | b": "a | b", "`x | y` and `z`": "`x | y` and z", "<think> then *x*": "<think> then *x*",
             "\\boxed or _emph_ name_or_path": "\\boxed or _emph_ name_or_path", "one ` tick": "one ` tick"}
    for text, shown in cases.items():
        parser = _Cells()
        parser.feed(markdown.markdown(f"| a |\n|---|\n| {_cell(text)} |\n", extensions=["tables"]))
        assert html.unescape(parser.rows[-1][0]) == shown, (text, _cell(text))


def _build(root: Path, site: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("mkdocs")  # the `test` extra installs both (pyproject.toml); under CI=true a skip fails
    pytest.importorskip("material")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2.0, not a finding
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_site_builds_in_strict_mode(tmp_path):
    """Catches a broken link or anchor in README.md or docs/, a link to a file that is gone, a page under docs/
    missing from mkdocs.yml's nav (or listed there and missing), and README no longer the home page."""
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, f"mkdocs build --strict:\n{done.stderr[-4000:]}"
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="data/"' in home  # README's docs/data.md, as the site has it
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()


@pytest.fixture
def docs_copy(tmp_path) -> Path:
    """The repository as mkdocs sees it, with docs/, README.md and mkdocs.yml copied so that a test can break them."""
    copy = tmp_path / "repo"
    copy.mkdir()
    for item in ROOT.iterdir():
        if item.name in ("docs", "README.md", "mkdocs.yml"):
            (shutil.copytree if item.is_dir() else shutil.copy)(item, copy / item.name)
        elif not item.name.startswith("."):
            (copy / item.name).symlink_to(item)
    return copy


def test_strict_mode_fails_on_each_kind_of_fault(docs_copy, tmp_path):
    """The checks are on (mkdocs.yml's validation, the hook's file check): one build with a fault of each kind
    names all of them. Catches a check turned down to info, or the hook passing a missing file silently."""
    readme = docs_copy / "README.md"
    faults = ("\n[a page](docs/datas.md), [a heading](docs/verifiers.md#no-such-heading), [a file](bench/gone.py), "
              "[a heading outside docs](CONTRIBUTING.md#no-such-section)\n")
    readme.write_text(readme.read_text(encoding="utf-8") + faults, encoding="utf-8")
    (docs_copy / "docs" / "unlisted.md").write_text("# Not in the nav\n", encoding="utf-8")
    done = _build(docs_copy, tmp_path / "site")
    assert done.returncode != 0
    for finding in ["'datas.md', but the target is not found", "does not contain an anchor '#no-such-heading'",
                    "README.md links to 'bench/gone.py', which is not a file of the repository",
                    "links to 'CONTRIBUTING.md#no-such-section', but CONTRIBUTING.md has no heading with that anchor",
                    "not included in the \"nav\" configuration"]:
        assert finding in done.stderr, finding
    assert re.search(r"unlisted\.md", done.stderr)


def _hooks():
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page, link, repo_url, site_link", [
    ("index.md", "[a](docs/data.md#options)", None, "[a](data.md#options)"),  # README's link into docs/
    ("index.md", "![i](docs/img/report.png)", None, "![i](img/report.png)"),
    ("index.md", "[c](rlvr/errors.py)", "https://github.com/o/rlvr",
     "[c](https://github.com/o/rlvr/blob/main/rlvr/errors.py)"),
    ("index.md", "[c](rlvr/errors.py)", None, "c"),  # no repo_url: the text, not a link that is dead in the site
    ("index.md", "[w](https://example.org/x.md) [s](#commands)", None, "[w](https://example.org/x.md) [s](#commands)"),
    ("data.md", "[r](../README.md#commands)", None, "[r](index.md#commands)"),  # a page's link back to README
    ("data.md", "[v](verifiers.md#code)", None, "[v](verifiers.md#code)"),
    ("data.md", "[k](../configs/grpo.yaml)", "https://github.com/o/rlvr/",
     "[k](https://github.com/o/rlvr/blob/main/configs/grpo.yaml)"),
    ("index.md", "```\n[a](docs/data.md)\n```", None, "```\n[a](docs/data.md)\n```"),  # code is not a link
])
def test_the_hook_moves_links_from_where_github_reads_them_to_the_site(page, link, repo_url, site_link):
    """Catches README's docs/ prefix kept (a dead link in the site), a page's ../README.md not mapped to the home
    page, a code link left relative or given the wrong address, and a link rewritten inside a code block."""
    config = SimpleNamespace(repo_url=repo_url, config_file_path=str(ROOT / "mkdocs.yml"))
    page_object = SimpleNamespace(file=SimpleNamespace(src_uri=page))
    assert _hooks().on_page_markdown(link, page_object, config, None) == site_link
