"""The agent commands docs/agents.md gives, run as written, with the held-out evaluation before and after.

    .venv/bin/python bench/agents_as_shipped.py                       # every command, ~30 min each on 2 cores
    .venv/bin/python bench/agents_as_shipped.py --only calculator     # those whose preset name has a word
    .venv/bin/python bench/agents_as_shipped.py --list                # the commands it found, nothing run

It reads the opening section of docs/agents.md ("Agents that act") for lines `rlvr train configs/agents/NAME.yaml`
(the shipped presets: what makes a small model work lives in what the command loads, never in a paragraph), and
for each:
1. evaluates the embedded base model on the preset's task and held-out split (`rlvr eval embedded PRESET`),
2. runs the command verbatim from the repository root (the preset bounds its own time with max_minutes, then
   evaluates the final model on the held-out split: that evaluation, in the run's eval.jsonl, is the "after"),
3. only when the run has no such evaluation, evaluates it (`rlvr eval RUN`, the run's own config),
then prints one table: pass@1 and greedy before and after, the paired change of pass@1 over the same problems with
2 standard errors, the valid-call share before and after, and the command's minutes (training and its evaluation).
The JSON of every evaluation and a summary go to --output (default bench/data/agents_as_shipped/<date>/). Every
agent figure in the docs comes from this script, with its date and commit. A stopped bench, run again with the same
--output, goes on where it stopped.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RLVR = ROOT / ".venv" / "bin" / "rlvr"
_COMMAND = re.compile(r"^(rlvr train (configs/agents/[\w.-]+\.ya?ml))\s*(?:#.*)?$")
PAGE = ROOT / "docs" / "agents.md"
SECTION = "# Agents that act"


def shipped_commands(page: str) -> list[tuple[str, str]]:
    """(command, preset path) of each `rlvr train configs/agents/...` line in the agents page's opening section (up
    to its first `## ` heading), in order."""
    start = page.find(SECTION)
    if start < 0:
        raise SystemExit(f"{PAGE} has no {SECTION!r} section")
    end = page.find("\n## ", start + len(SECTION))
    found = []
    for line in page[start:end if end > 0 else None].splitlines():
        match = _COMMAND.match(line.strip())
        if match and match.group(1) not in [c for c, _ in found]:
            found.append((match.group(1), match.group(2)))
    return found


def paired(after: list[float], before: list[float]) -> tuple[float, float]:
    """(mean difference, its standard error) over the same problems (as rlvr.evaluation.voting.paired_difference)."""
    diffs = [a - b for a, b in zip(after, before)]
    mean = sum(diffs) / len(diffs)
    variance = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return mean, (variance / len(diffs)) ** 0.5


def _run(command: list[str], log: Path) -> None:
    with log.open("w") as out:
        done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed (exit {done.returncode}); see {log}")


def _new_run(before: set[Path]) -> Path:
    made = [p for p in (ROOT / "runs").glob("*") if p.is_dir() and p not in before]
    if len(made) != 1:
        raise SystemExit(f"expected one new run directory under runs/, found {len(made)}")
    return made[0]


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


def _own_evaluation(run: Path, after: Path) -> bool:
    """Copy the run's end-of-run evaluation (its eval.jsonl, written by the command itself with the preset's eval
    section: the same prompts, samples and temperature as `rlvr eval RUN`) to `after`; False without one."""
    rows = (run / "eval.jsonl").read_text().splitlines() if (run / "eval.jsonl").is_file() else []
    last = json.loads(rows[-1]) if rows else {}
    if "per_problem_pass@1" not in last:
        return False
    after.write_text(json.dumps(last, indent=1))
    return True


def measure(command: str, preset: str, out: Path) -> dict:
    """One preset's row. Each stage leaves a file in `out` and is skipped when it is there (a stopped bench goes on
    where it stopped): NAME-base.json, NAME-run.json (the run and its minutes), NAME-after.json."""
    name = Path(preset).stem
    base, done, after = out / f"{name}-base.json", out / f"{name}-run.json", out / f"{name}-after.json"
    if not base.is_file():
        _run([str(RLVR), "eval", "embedded", preset, "--output", str(base)], out / f"{name}-base.log")
    if not done.is_file():
        runs_before = set((ROOT / "runs").glob("*")) if (ROOT / "runs").is_dir() else set()
        started, commit = time.monotonic(), _commit()  # the code the run loads (a commit made meanwhile is not it)
        _run([str(RLVR), *command.split()[1:]], out / f"{name}-train.log")  # verbatim, but for the venv's rlvr
        made = _new_run(runs_before)
        done.write_text(json.dumps({"run": str(made.relative_to(ROOT)), "minutes": (time.monotonic() - started) / 60,
                                    "commit": commit, "date": datetime.date.today().isoformat()}))
    record = json.loads(done.read_text())
    run, minutes = ROOT / record["run"], record["minutes"]
    if not after.is_file() and not _own_evaluation(run, after):  # the preset's eval.at_end=false: evaluate here
        _run([str(RLVR), "eval", str(run), "--output", str(after)], out / f"{name}-after.log")
    b, a = json.loads(base.read_text()), json.loads(after.read_text())
    change, se = paired(a["per_problem_pass@1"], b["per_problem_pass@1"])
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    return {"command": command, "run": str(run.relative_to(ROOT)), "commit": record.get("commit"),
            "date": record.get("date"),
            "minutes": minutes, "steps": len(rows),
            "training_minutes": rows[-1]["elapsed_s"] / 60 if rows else 0.0,
            "problems": a["problems"], "samples": a["samples_per_problem"],
            "pass@1": [b["pass@1"], a["pass@1"]], "greedy": [b.get("greedy"), a.get("greedy")],
            "change": change, "se": se, "beyond_2se": change - 2 * se > 0,
            "valid_call_share": [b.get("episode/valid_call_share"), a.get("episode/valid_call_share")],
            "components": {name: [correct_share(b, name), correct_share(a, name)] for name in components(a)}}


def components(evaluation: dict) -> list[str]:
    """The scored components of an evaluation ('code', 'environment', ...), from its outcome counts."""
    return sorted({key.split("/")[0] for key in evaluation.get("outcomes", {})})


def correct_share(evaluation: dict, name: str) -> float | None:
    """The share of samples one component called CORRECT (success needs every gated one: evaluate.correct_mask)."""
    counts = {k: v for k, v in evaluation.get("outcomes", {}).items() if k.startswith(name + "/")}
    return counts.get(f"{name}/correct", 0) / sum(counts.values()) if counts else None


def table(rows: list[dict]) -> str:
    cell = lambda pair: " -> ".join("-" if v is None else f"{v:.3f}" for v in pair)  # noqa: E731
    lines = ["| command | pass@1 | paired change ± 2 SE | greedy | valid-call share | training (command) "
             "| commit, date |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = "" if r["beyond_2se"] else " (not beyond 2 SE)"
        lines.append(f"| `{r['command']}` | {cell(r['pass@1'])} | {r['change']:+.3f} ± {2 * r['se']:.3f}{mark} | "
                     f"{cell(r['greedy'])} | {cell(r['valid_call_share'])} | {r['steps']} steps in "
                     f"{r.get('training_minutes', 0.0):.1f} min ({r['minutes']:.1f} min) | "
                     f"{r.get('commit') or '-'}, {r.get('date') or '-'} |")
    several = [r for r in rows if len(r.get("components", {})) > 1]
    notes = [f"- `{r['command']}`, each component's CORRECT share: " + "; ".join(
        f"{name} {cell(pair)}" for name, pair in r["components"].items()) for r in several]
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated words; keep presets whose name has one")
    parser.add_argument("--list", action="store_true", help="print the commands found and stop")
    parser.add_argument("--output", type=Path, default=None, help="folder for the JSON (default bench/data/...)")
    args = parser.parse_args(argv)
    words = [w for w in args.only.split(",") if w]
    commands = [(c, p) for c, p in shipped_commands(PAGE.read_text())
                if not words or any(w in Path(p).stem for w in words)]
    if args.list or not commands:
        print("\n".join(c for c, _ in commands) or "no command matched")
        return 0 if commands else 2
    commit = _commit()
    day = datetime.date.today().isoformat()
    out = args.output or ROOT / "bench" / "data" / "agents_as_shipped" / day
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for command, preset in commands:
        rows.append(measure(command, preset, out))
        print(table(rows[-1:]), flush=True)
    (out / "summary.json").write_text(json.dumps({"date": day, "commit": commit, "rows": rows}, indent=1))
    print(f"\n{day} (bench at commit {commit}), held-out split of each preset (its eval section):\n" + table(rows))
    return 0 if all(r["beyond_2se"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
