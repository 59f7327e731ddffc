"""The commands in the docs run: every `rlvr ...` line inside a fenced code block of README.md and
docs/*.md parses with the CLI's own parser and its config validates, as a dry run (no model loads, nothing trains);
every Python block is a file that a test runs, runs here, or is listed as not run with the reason.

Placeholders, the rules: an argument under runs/ or named RUN / RUN_DIR is a run directory a user made earlier, so
the test makes one there (the default config.yaml and a final/ model folder; for runs/.../final, the run around that
model folder) in a scratch directory, where
configs/ is the repository's; a name in SUBSTITUTE (a file of the reader's own) is replaced by a shipped one; a
line in SKIP is not run, with the reason.
"""
from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlvr.cli.args import config_from_args, run_config
from rlvr.cli.config import config_rows, select
from rlvr.cli.main import parse
from rlvr.config.run import RunConfig
from rlvr.errors import UserFacingError
from rlvr.evaluation.target import check_model_target, resolve_target
from rlvr.pipeline.spec import load_recipe

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SUBSTITUTE = {"my.yaml": "configs/grpo.yaml"}  # README's torchrun line: the reader's own config file
SKIP: dict[str, str] = {}  # a command line, exactly as the doc has it -> why it cannot run as a dry run
NOT_RUN: dict[str, str] = {}  # a Python block's first line -> why it is not run
_PROGRAM = re.compile(r"(^|[\s;&|$])(\S*/)?rlvr(\s|$)|-m\s+rlvr(\s|$)")
_RUN_DIR = re.compile(r"^(runs/\S+|RUN|RUN_DIR)$")


def fenced_blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """(line number of the first line inside, info string, lines) of each ``` or ~~~ block."""
    blocks, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*(```+|~~~+)\s*(\S*)", line)
        if fence and current is None:
            current = (number + 1, fence[2], [])
        elif fence and line.strip().startswith(fence[1]) and not fence[2]:
            blocks.append(current)
            current = None
        elif current is not None:
            current[2].append(line)
    return blocks


def shell_lines(first: int, lines: list[str]) -> list[tuple[int, str]]:
    """(line number, logical line): lines ending in a backslash are joined to the next, as the shell does."""
    joined, start, parts = [], None, []
    for number, line in enumerate(lines, first):
        start = number if not parts else start
        parts.append(line[:-1] if line.endswith("\\") else line)
        if not line.endswith("\\"):
            joined.append((start, " ".join(p.strip() for p in parts)))
            parts = []
    return joined


def drop_comment(line: str) -> str:
    """The line up to its first `#` that starts a word outside quotes (`task.answer_field=####` keeps its #)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def rlvr_argv(line: str) -> list[str] | None:
    """The arguments after `rlvr`, `.venv/bin/rlvr` or `-m rlvr` in a shell line; None if it runs no rlvr."""
    line = drop_comment(line)
    if not _PROGRAM.search(line):
        return None
    words = shlex.split(line)
    segment: list[str] = []
    for word in [*words, "&&"]:
        if word not in ("&&", "||", ";", "|"):
            segment.append(word)
            continue
        while segment and (segment[0].endswith("$") or re.match(r"^[A-Z_][A-Z0-9_]*=", segment[0])):
            segment = segment[1:]  # a prompt (`head$`) or an environment variable
        segment = _unwrapped(segment)
        if segment and (segment[0] == "rlvr" or segment[0].endswith("/rlvr")):
            return segment[1:]
        if "-m" in segment[:-1] and segment[segment.index("-m") + 1] == "rlvr":
            return segment[segment.index("-m") + 2:]
        segment = []
    return None


# programs that run the command after them: `/usr/bin/time -v rlvr ...`, `timeout 600 rlvr ...`, `nohup rlvr ...`
_WRAPPERS = {"time": {"-v", "-p"}, "timeout": set(), "nohup": set(), "nice": {"-n"}, "env": set(), "sudo": {"-E"}}


def _unwrapped(segment: list[str]) -> list[str]:
    """`segment` without the wrapper programs in front of the command and their options (timeout's duration)."""
    while segment and segment[0].rsplit("/", 1)[-1] in _WRAPPERS:
        options, segment = _WRAPPERS[segment[0].rsplit("/", 1)[-1]], segment[1:]
        while segment and (segment[0] in options or segment[0].startswith("-") or re.fullmatch(r"[\d.]+[smh]?",
                                                                                              segment[0])):
            segment = segment[1:]
    return segment


def doc_commands() -> list[tuple[str, str, list[str]]]:
    """(where, line, argv) of every rlvr command in a fenced block of the docs."""
    found = []
    for path in DOC_FILES:
        for first, _info, lines in fenced_blocks(path.read_text(encoding="utf-8")):
            for number, line in shell_lines(first, lines):
                argv = rlvr_argv(line)
                if argv is not None:
                    found.append((f"{path.relative_to(ROOT)}:{number}", line, argv))
    return found


def _eval_like(args: argparse.Namespace) -> None:
    if args.command == "eval":
        from rlvr.cli.eval import eval_config

        eval_config(args)
    else:
        resolve_target(args.model, args.task, args.overrides)
        check_model_target(args.model)


# The dry run of each command: what it checks before any model loads, and nothing after.
DRY_RUNS = {
    "train": run_config, "sft": run_config,
    "sample": lambda a: config_from_args(a.config, a.overrides),
    "control": lambda a: config_from_args(a.config, a.overrides),
    "verify": lambda a: _verifier_named(a.verifier, config_from_args(a.config, a.overrides)),
    "eval": _eval_like, "generate": _eval_like,
    "recipe": lambda a: load_recipe(a.recipe, a.overrides),
    "config": lambda a: select(config_rows(RunConfig), a.section),
    "report": lambda a: None, "dashboard": lambda a: None,  # run directories only, made by the rule above
}


def _verifier_named(name: str, config: RunConfig) -> None:
    """`rlvr verify --verifier NAME`: a name the command knows (built as it would be, which loads no model)."""
    from rlvr.cli.verify import STATE_VERIFIER, build_verifier

    if name != STATE_VERIFIER:
        build_verifier(name, config.task)


def dry_run(argv: list[str], scratch: Path) -> None:
    """Parse `argv` as `rlvr` does and validate its config; any problem raises AssertionError with its message."""
    argv = [SUBSTITUTE.get(arg, arg) for arg in argv]
    for arg in argv:
        if _RUN_DIR.match(arg) and arg.endswith("/final"):  # a run's model folder, given as a model
            fake_run(scratch / arg.removesuffix("/final"))
        elif _RUN_DIR.match(arg):
            fake_run(scratch / arg)
    try:
        args = parse(argv)
    except SystemExit:
        raise AssertionError("the CLI's parser refuses it (its message is on stderr above)") from None
    assert args.command in DRY_RUNS, f"no dry run for `rlvr {args.command}`: add one to DRY_RUNS"
    try:
        DRY_RUNS[args.command](args)
    except UserFacingError as err:
        raise AssertionError(f"rlvr: error: {err}") from None


def fake_run(path: Path) -> None:
    """A run directory as `rlvr train` leaves it, for the checks that read one: config.yaml, final/config.json."""
    (path / "final").mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text(yaml.safe_dump(RunConfig().model_dump(mode="json")), encoding="utf-8")
    (path / "final" / "config.json").write_text("{}", encoding="utf-8")


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("where, line, argv", [pytest.param(*found, id=found[0]) for found in doc_commands()])
def test_a_command_in_the_docs_parses_and_its_config_validates(where, line, argv, scratch):
    """Catches a renamed key or flag, a removed preset file, a bad value, a command that no longer exists."""
    if line in SKIP:
        pytest.skip(SKIP[line])
    try:
        dry_run(argv, scratch)
    except AssertionError as err:
        raise AssertionError(f"{where}: `{line.strip()}`: {err} (a placeholder? SUBSTITUTE or SKIP in {__name__}.py)"
                             ) from None


def test_the_scan_finds_each_shape_of_command_line():
    """Catches a scan that finds nothing (every command test would then pass unseen): a prompt, an environment
    variable, torchrun's -m, a comment, `&&`, a quoted override, and lines that run no rlvr."""
    shapes = {
        "bash scripts/setup.sh && .venv/bin/rlvr train      # set up, then train": ["train"],
        "head$    .venv/bin/rlvr train configs/cluster/ray.yaml": ["train", "configs/cluster/ray.yaml"],
        ".venv/bin/torchrun --nproc_per_node 2 -m rlvr train a.b=1   # or fsdp2": ["train", "a.b=1"],
        "HF_HUB_OFFLINE=1 rlvr eval embedded --n 2": ["eval", "embedded", "--n", "2"],
        "rlvr train 'task.instruction=Put it in \\boxed{}.' task.answer_field=####": [
            "train", "task.instruction=Put it in \\boxed{}.", "task.answer_field=####"],
        "rlvr: error: trl.jsonl: no column 'answer' (TRL's layout)": None,
        "# every node: pip install 'rlvr[ray]'": None,
        ".venv/bin/python bench/mutate_change.py --paths rlvr/verifiers rlvr": None,
        "/usr/bin/time -v .venv/bin/rlvr train model.lora.enabled=true": ["train", "model.lora.enabled=true"],
        "timeout 600 nohup rlvr eval embedded": ["eval", "embedded"],
    }
    for line, argv in shapes.items():
        assert rlvr_argv(line) == argv, line
    assert shell_lines(7, ["rlvr train a=1 \\", "    b=2", "rlvr config"]) == [(7, "rlvr train a=1 b=2"),
                                                                              (9, "rlvr config")]
    found = {where: argv for where, _line, argv in doc_commands()}
    assert found["README.md:4"] == ["train"]
    assert any(argv[:2] == ["train", "my.yaml"] for argv in found.values())  # torchrun's continued line
    assert len(found) >= 25


@pytest.mark.parametrize("argv, says", [
    (["train", "rollout.group_sizes=4"], "group_sizes"),  # a renamed key
    (["train", "configs/nothere.yaml"], "does not exist"),  # a preset that is gone
    (["train", "rollout.group_size=0"], "group_size"),  # a value out of range
    (["trian"], "parser refuses"),  # a command that does not exist
    (["eval", "embedded", "--sizes", "3"], "parser refuses"),  # a flag that does not exist
    (["eval", "runs/r", "--k", "9"], "--k 9"),  # a check of the command itself, on a made run directory
    (["verify", "--verifier", "maths", "--input", "x.jsonl"], "unknown verifier 'maths'"),
    (["recipe", "r2"], "r2"),
    (["config", "rollout.nope"], "rollout.nope"),
])
def test_the_dry_run_refuses_a_broken_command(argv, says, scratch):
    """Each way a documented command can break is caught, with the CLI's own message."""
    with pytest.raises(AssertionError, match=re.escape(says)):
        dry_run(argv, scratch)


def python_blocks() -> list[tuple[str, str]]:
    return [(f"{path.relative_to(ROOT)}:{first}", "\n".join(lines) + "\n") for path in DOC_FILES
            for first, info, lines in fenced_blocks(path.read_text(encoding="utf-8")) if info in ("python", "py")]


@pytest.mark.parametrize("where, code", [pytest.param(*found, id=found[0]) for found in python_blocks()])
def test_a_python_block_in_the_docs_runs_or_says_why_not(where, code, tmp_path):
    """A block that is a file of examples/ verbatim is run by a test that names that file; any other runs here
    (a minute at most) unless NOT_RUN gives the reason. Catches a block edited away from its example file."""
    examples = {path.read_text(encoding="utf-8"): path for path in (ROOT / "examples").glob("*.py")}
    if code in examples:
        tests = [path for path in (ROOT / "tests").glob("test_*.py") if path.name != Path(__file__).name]
        assert any(examples[code].name in path.read_text(encoding="utf-8") for path in tests), where
        return
    if code.splitlines()[0] in NOT_RUN:
        pytest.skip(NOT_RUN[code.splitlines()[0]])
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, f"{where}: the block fails:\n{done.stderr[-2000:]}"
