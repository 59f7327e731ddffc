"""Project words only: the code, docs, tests and tools speak of what the project does, never of how its work was
organised. Issue numbers live in CHANGELOG.md and commit messages; labels of work stages and paths on one
developer's disk belong to no reader. A scan over every text file of the repository's own parts, with an
allow-list whose every entry says why, and a self-test that the scan finds a planted line of each kind. User pages
(README.md, CONTRIBUTING.md, docs/*.md) are also kept free of the labels of review rounds: they say what the code
does; which review found a rule is history, kept in the dated lab notes under docs/notes/."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["rlvr", "tests", "bench", "scripts", "configs", "examples", "docs", "README.md", "CONTRIBUTING.md",
           "pyproject.toml", "mkdocs.yml", ".ci"]
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ".js", ".css", ".html", ".json", ".cfg", ".ini"}
EXEMPT = {Path(__file__).resolve()}  # this file names what it looks for; CHANGELOG.md is not scanned at all

KINDS = {
    # "issue 48", "Issue #9", "issues 23-28", "issue#12", "Issue-12"
    "issue number": re.compile(r"\bissues?(?:\s+#?|#|-)\d+", re.IGNORECASE),
    # "(#23)", "knowing the run #24": a number after '#' in prose. Not '####' (GSM8K's answer marker), not a hex
    # colour ('#777;' in CSS is skipped below), not an anchor, a word or a regex's '|' before it ('PR#566',
    # 'page.md#x', '|#160'), and not after "issue" (counted as an issue number once).
    "#number": re.compile(r"(?<![\w#&/|'\"\\])(?<![Ii]ssue )(?<![Ii]ssues )(?<!PR )#\d{1,5}(?![\w#])"),
    # labels of the project's own work stages
    "stage word": re.compile(r"\bstop(?:\s+|-)\d+\b|\bsessions?(?:\s+|-)\d+\b|\bthis session\b|\bwaves?(?:\s+|-)\d+\b",
                             re.IGNORECASE),
    # who reviewed a feature, rather than what it does (the history is in the dated notes under docs/notes/)
    "review label": re.compile(r"\bred[ -]teams?\b|\bfresh[ -]eyes\b", re.IGNORECASE),
    # absolute paths on a developer's disk
    "developer path": re.compile(r"(?<![\w.])/(?:work|root)/|(?<![\w.])/(?:home|Users)/[a-z_][\w-]*",
                                 re.IGNORECASE),
}

# User pages only: labels of the review rounds that hardened a feature ("the second red team", "fourth round",
# "round 3", "fresh eyes"). Test names keep them ('test_the_second_red_teams_findings': '_' joins words, so no match).
PAGE_KINDS = {
    "review round": re.compile(
        r"\bred[ -]teams?\b|\b(?:first|second|third|fourth|fifth|sixth)\s+(?:rounds?|red[ -]teams?|pass(?:es)?)\b"
        r"|\bround\s+\d+\b|\bfresh[ -]eyes\b", re.IGNORECASE),
}
USER_PAGES = ["README.md", "CONTRIBUTING.md", "docs/*.md"]  # docs/notes/ is the lab notes' history: not a user page

# (kind, pattern of the matched line, why it stays). Each must still match something, so a stale entry fails.
ALLOWED = [
    ("issue number", r"Math-Verify issue #14",
     "a public issue of the math-verify project, cited for the behaviour it documents"),
]
SKIP_SUFFIX_KINDS = {(".css", "#number"), (".js", "#number")}  # colours and selectors, no prose


def findings(text: str, suffix: str = ".py", user_page: bool = False, history: bool = False
             ) -> list[tuple[int, str, str]]:
    """(line number, kind, line) of every match in `text` that no allow-list entry covers; `user_page` adds the
    kinds that only user pages are kept free of; `history` (the lab notes) may say who reviewed what."""
    kinds = {**KINDS, **PAGE_KINDS} if user_page else KINDS
    kinds = {k: v for k, v in kinds.items() if not (history and k == "review label")}
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for kind, pattern in kinds.items():
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
            files += [p for p in sorted(path.rglob("*")) if p.is_file() and (p.suffix in SUFFIXES or name == ".ci")
                      and not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(path).parts)]
    return [p for p in files if p.resolve() not in EXEMPT]


def user_pages() -> set[Path]:
    return {p.resolve() for pattern in USER_PAGES for p in ROOT.glob(pattern) if p.is_file()}


def test_no_issue_numbers_stage_words_or_developer_paths():
    faults, pages = [], user_pages()
    for path in scanned_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        history = path.relative_to(ROOT).parts[:2] == ("docs", "notes")
        for number, kind, line in findings(text, path.suffix, path.resolve() in pages, history):
            faults.append(f"{path.relative_to(ROOT)}:{number}: {kind}: {line[:120]}")
    assert faults == [], ("project words only (issue numbers go to CHANGELOG.md and commit messages; which review "
                          "found what goes to a dated note in docs/notes/):\n" + "\n".join(faults))


def test_every_allow_list_entry_is_still_needed():
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in scanned_files())
    assert [allowed for _, allowed, _ in ALLOWED if not re.search(allowed, text)] == []


def test_the_scan_finds_a_planted_line_of_each_kind():
    planted = "\n".join([
        "x = 1  # fixed in " + "issue 48",
        '"""Exact resume (' + "issue #9" + ')."""',
        "# knowing the run (" + "#24" + ")",
        "planted: " + "stop 7",
        "measured in " + "session 4",
        "planted: " + "this session",
        "added in " + "wave 2",
        "planted: " + "/work/" + "example.md",
        "open('" + "/root/" + ".bashrc')",
        "cd " + "/home/" + "alice/rlvr",
        "see " + "Issue-12" + " and " + "issue#13",
        "the run (" + "#1234" + ")",
        "planted: " + "Stop 7" + ", " + "stop-8" + ", " + "Session 4" + ", " + "Wave 2",
        "ls " + "/Users/" + "alice",
        "cd " + "/home/" + "alice",
        "sudo ls " + "/root/" + "x",
        "# found by the " + "red team" + "; " + "Fresh-eyes" + " finding J",
    ])
    found = findings(planted)
    assert sorted({number for number, _, _ in found}) == list(range(1, 18))
    assert findings(planted.splitlines()[-1], history=True) == []  # a lab note may say who found it
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


def test_user_pages_are_readme_contributing_and_docs_but_not_the_lab_notes():
    pages = {p.relative_to(ROOT).as_posix() for p in user_pages()}
    assert {"README.md", "CONTRIBUTING.md", "docs/verifiers.md", "docs/results.md"} <= pages
    assert [p for p in pages if p.startswith("docs/notes/")] == []
    # the lab notes are still scanned for the other kinds
    assert any(p.relative_to(ROOT).parts[:2] == ("docs", "notes") for p in scanned_files())


def test_the_scan_finds_review_round_labels_in_user_pages_only():
    planted = "\n".join([
        "found by the " + "red team",
        "### Third " + "red team: emphasis",
        "Left after the fifth " + "round (each a judgement call)",
        "the second " + "red-team's findings",
        "a " + "second pass" + " over the corpus",
        "in " + "Round 3" + " we added",
        "## 3. An attack by " + "fresh eyes",
        "five " + "red teams' findings included",
    ])
    found = findings(planted, ".md", user_page=True)
    assert sorted({number for number, _, _ in found}) == list(range(1, 9))
    assert set(PAGE_KINDS) <= {kind for _, kind, _ in found}
    # code names no review either ("red team", "fresh eyes"); "fifth round", "second pass", "Round 3" have other
    # meanings there (dynamic sampling's rounds, an update's passes); a lab note may name any of them
    assert [number for number, _, _ in findings(planted, ".md")] == [1, 2, 4, 7, 8]
    assert findings(planted, ".md", history=True) == []


def test_what_is_no_review_label_passes_in_a_user_page():
    clean = "\n".join([
        "`q::test_the_second_red_teams_findings`, `around::test_hedges_the_red_team_found`",
        "rounds to 3 decimals; the first rung of the curriculum",
        "a second sample; it passes the first test; a round of 2 rollouts",
        "bench/vs_trl.py --steps 8 --rounds 2",  # a command's option
        "vLLM PR #37082 proposes it; text[stop - 1]; os.listdir('/root') in a sandbox probe",
        "independent reviewers attacked the verifier from its claims",
    ])
    assert findings(clean, ".md", user_page=True) == []
