"""Project words only: the code, docs, tests and tools speak of what the project does, never of how its work was
organised. Issue numbers live in CHANGELOG.md and commit messages; labels of work stages and paths on one
developer's disk belong to no reader. A scan over every text file of the repository's own parts, with an
allow-list whose every entry says why, and a self-test that the scan finds a planted line of each kind."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["rlvr", "tests", "bench", "scripts", "configs", "examples", "docs", "README.md", "CONTRIBUTING.md"]
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ".js", ".css", ".html", ".json", ".cfg", ".ini"}
EXEMPT = {Path(__file__).resolve()}  # this file names what it looks for; CHANGELOG.md is not scanned at all

KINDS = {
    # "issue 48", "Issue #9", "issues 23-28"
    "issue number": re.compile(r"\b[Ii]ssues?\s+#?\d+"),
    # "(#23)", "knowing the run #24": a number after '#' in prose. Not '####' (GSM8K's answer marker), not a hex
    # colour ('#777;' in CSS is skipped below), not an anchor, a word or a regex's '|' before it ('PR#566',
    # 'page.md#x', '|#160'), and not after "issue" (counted as an issue number once).
    "#number": re.compile(r"(?<![\w#&/|'\"\\])(?<![Ii]ssue )(?<![Ii]ssues )#\d{1,3}(?![\w#])"),
    # labels of the project's own work stages
    "stage word": re.compile(r"\bstop\s+\d+\b|\bsessions?\s+\d+\b|\bthis session\b|\bwaves?\s+\d+\b"),
    # absolute paths on a developer's disk
    "developer path": re.compile(r"(?<![\w.])/(?:work|root)/|(?<![\w.])/home/[a-z_][\w-]*/"),
}

# (kind, pattern of the matched line, why it stays). Each must still match something, so a stale entry fails.
ALLOWED = [
    ("issue number", r"Math-Verify issue #14",
     "a public issue of the math-verify project, cited for the behaviour it documents"),
]
SKIP_SUFFIX_KINDS = {(".css", "#number"), (".js", "#number")}  # colours and selectors, no prose


def findings(text: str, suffix: str = ".py") -> list[tuple[int, str, str]]:
    """(line number, kind, line) of every match in `text` that no allow-list entry covers."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for kind, pattern in KINDS.items():
            if (suffix, kind) in SKIP_SUFFIX_KINDS or not pattern.search(line):
                continue
            if any(k == kind and re.search(allowed, line) for k, allowed, _ in ALLOWED):
                continue
            found.append((number, kind, line.strip()))
    return found


def scanned_files() -> list[Path]:
    files = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in SUFFIXES
                      and not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(ROOT).parts)]
    return [p for p in files if p.resolve() not in EXEMPT]


def test_no_issue_numbers_stage_words_or_developer_paths():
    faults = []
    for path in scanned_files():
        for number, kind, line in findings(path.read_text(encoding="utf-8", errors="replace"), path.suffix):
            faults.append(f"{path.relative_to(ROOT)}:{number}: {kind}: {line[:120]}")
    assert faults == [], "project words only (issue numbers go to CHANGELOG.md and commit messages):\n" + "\n".join(
        faults)


def test_every_allow_list_entry_is_still_needed():
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in scanned_files())
    assert [allowed for _, allowed, _ in ALLOWED if not re.search(allowed, text)] == []


def test_the_scan_finds_a_planted_line_of_each_kind():
    planted = "\n".join([
        "x = 1  # fixed in " + "issue 48",
        '"""Exact resume (' + "issue #9" + ')."""',
        "# knowing the run (" + "#24" + ")",
        "seen in CI at " + "stop 39",
        "measured in " + "session 4",
        "the rate counts only " + "this session" + "'s work",
        "added in " + "wave 2",
        "facts in " + "/work/" + "shared/sandbox-facts.md",
        "open('" + "/root/" + ".bashrc')",
        "cd " + "/home/" + "alice/rlvr",
    ])
    found = findings(planted)
    assert [number for number, _, _ in found] == list(range(1, 11))
    assert {kind for _, kind, _ in found} == set(KINDS)


def test_what_is_not_a_reference_passes():
    clean = "\n".join([
        "#### 42",  # GSM8K's final-answer marker
        "see [verifiers](verifiers.md#math) and open-r1 PR#566",
        "colour = '#777'",
        "Math-Verify issue #14 documents it",
        "the first rung of the curriculum; a reward hack's session of tool calls",
        "bwrap binds /usr and /tmp; ~/.cache/huggingface holds the hub's files",
    ])
    assert findings(clean) == []
