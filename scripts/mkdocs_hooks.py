"""MkDocs hooks of the docs site (mkdocs.yml): README.md is its home page, and a relative link written
for GitHub works in the site too.

The pages keep plain relative links, as GitHub resolves them from the file that holds them: README.md links to
`docs/data.md`, a page under docs/ to `../rlvr/config/run.py`. In the site README becomes index.md at the top of
docs/, so its links into docs/ lose the `docs/` prefix; a link to a file outside docs/ (code, configs, bench) is
checked here (a missing file is a warning, so `mkdocs build --strict` fails on it) and then points at the file on
GitHub when mkdocs.yml sets repo_url, or becomes its plain text when it does not. Links between pages, anchors,
pages left out of the nav are MkDocs' own checks (mkdocs.yml's validation section).
"""
from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

HOME = "README.md"  # the repository file that the site shows as index.md
DOCS = "docs"
# under "mkdocs.": its warnings are the ones --strict counts
log = logging.getLogger("mkdocs.hooks.rlvr_docs")
_LINK = re.compile(r"(?P<text>!?\[[^\]\n]*\])\((?P<target>[^)\s]+)(?P<title>\s+\"[^\"\n]*\")?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_EXTERNAL = re.compile(r"^([a-z][a-z0-9+.-]*:|//|#|/)", re.IGNORECASE)  # a scheme, mailto:, an anchor, absolute


def on_files(files, config):
    if files.get_file_from_path("index.md") is not None:
        log.warning(f"{DOCS}/index.md: the home page is {HOME} (scripts/mkdocs_hooks.py); delete {DOCS}/index.md")
        return files
    files.append(File.generated(config, "index.md", content=_repo(config).joinpath(HOME).read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    source = HOME if page.file.src_uri == "index.md" else f"{DOCS}/{page.file.src_uri}"
    lines, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        lines.append(line if fenced else _LINK.sub(lambda m: _rewrite(m, source, page.file.src_uri, config), line))
    return "\n".join(lines)


def _rewrite(match: re.Match, source: str, page_uri: str, config) -> str:
    target = match["target"]
    if _EXTERNAL.match(target):
        return match[0]
    path, hash_, anchor = target.partition("#")
    in_repo = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
    if in_repo == HOME:
        in_repo = f"{DOCS}/index.md"
    if in_repo.startswith(f"{DOCS}/"):  # a page or image of the site: relative to where the page lands
        relative = posixpath.relpath(in_repo.removeprefix(f"{DOCS}/"), posixpath.dirname(page_uri) or ".")
        return f"{match['text']}({relative}{hash_}{anchor}{match['title'] or ''})"
    if in_repo.startswith("..") or not _repo(config).joinpath(in_repo).exists():
        log.warning(f"{source} links to {target!r}, which is not a file of the repository")
        return match[0]
    if anchor and in_repo.endswith(".md") and anchor not in _anchors(_repo(config).joinpath(in_repo)):
        log.warning(f"{source} links to {target!r}, but {in_repo} has no heading with that anchor")
    if not config.repo_url:
        return match["text"].removeprefix("!")[1:-1]
    url = f"{config.repo_url.rstrip('/')}/blob/main/{in_repo}{hash_}{anchor}"
    return f"{match['text']}({url}{match['title'] or ''})"


def _anchors(file: Path) -> set[str]:
    """The GitHub anchors of a Markdown file's headings (lower case, punctuation dropped, spaces to '-'), for links
    into a repository file outside docs/, which MkDocs does not check."""
    headings, fenced = [], False
    for line in file.read_text(encoding="utf-8").splitlines():
        fenced = not fenced if _FENCE.match(line) else fenced
        if not fenced and line.startswith("#"):
            headings.append(line.lstrip("#").strip())
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def _repo(config) -> Path:
    return Path(config.config_file_path).resolve().parent
