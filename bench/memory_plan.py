"""The start-of-run memory plan against the measured peak RSS of `rlvr train` (goal: within 30 %).

    .venv/bin/python bench/memory_plan.py [--steps N] [dotted.key=value ...]

Runs `rlvr train output_dir=<tmp> [max_steps=N] [overrides]` as a child process (it re-executes itself under tcmalloc
with the same pid, rlvr/cli/allocator.py) and measures:
- its peak RSS from os.wait4 (ru_maxrss: the largest of the trainer and its reaped children, the trainer here);
- the per-step peak_memory_gb of metrics.jsonl (the trainer's ru_maxrss at the end of each step);
- the phase of the peak: the child's VmRSS sampled every SAMPLE_S seconds, each sample tagged with the log's last
  line and whether "saved final checkpoint" had been written (the final evaluation follows it), so the largest
  sample says whether the peak came during the training steps or the final evaluation.
The plan is computed in this process for the same config (model config from the cached converted model, prompt
lengths from the task's own prompts) and printed with the ratio estimate / measured.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SAMPLE_S = 0.25


def plan_for(overrides: list[str]):
    from transformers import AutoConfig

    from rlvr.config.rules import with_dynamic_sampling_decided
    from rlvr.config.run import load_config
    from rlvr.grpo.memory_plan import plan_memory, run_prompt_tokens
    from rlvr.model.load import load_tokenizer, resolve_model_path
    from rlvr.tasks import build_task

    config = with_dynamic_sampling_decided(load_config(None, overrides), 1)  # as setup() decides it
    model_config = AutoConfig.from_pretrained(resolve_model_path(config.model.name_or_path))
    prompt_tokens = run_prompt_tokens(build_task(config.task), load_tokenizer(config.model), config)
    return plan_memory(config, model_config, config.model.device, prompt_tokens=prompt_tokens), prompt_tokens


def vm_rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def log_state(path: Path) -> tuple[str, bool]:
    """(the log's last line, whether the final checkpoint was saved: the final evaluation runs after it)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "", False
    lines = text.strip().splitlines()
    return (lines[-1] if lines else ""), "saved final checkpoint" in text


def sample(pid: int, log: Path, found: dict, done: threading.Event) -> None:
    """Largest VmRSS seen, the log line that preceded it and whether the final evaluation had begun."""
    while not done.is_set():
        rss = vm_rss(pid)
        if rss is not None and rss > found.get("rss", 0):
            line, final = log_state(log)
            found.update(rss=rss, after=line[:90], final=final)
        time.sleep(SAMPLE_S)


def run_child(overrides: list[str], work: Path) -> tuple[int, float, dict]:
    """(ru_maxrss bytes, wall seconds, largest sample) of `rlvr train` with the overrides."""
    rlvr = Path(sys.executable).parent / "rlvr"
    log = work / "log.txt"
    start = time.monotonic()
    with log.open("w") as out:
        child = subprocess.Popen([str(rlvr), "train", f"output_dir={work / 'run'}", *overrides], stdout=out,
                                 stderr=subprocess.STDOUT)
        found: dict = {}
        done = threading.Event()
        watcher = threading.Thread(target=sample, args=(child.pid, log, found, done), daemon=True)
        watcher.start()
        _, status, usage = os.wait4(child.pid, 0)
        done.set()
        watcher.join()
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"rlvr train failed (exit {child.returncode}); its log: {log}\n{log.read_text()[-2000:]}")
    return usage.ru_maxrss * 1024, time.monotonic() - start, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, help="max_steps of the run (default: the config's)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory (checkpoints: ~2 GB)")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value overrides for `rlvr train`")
    args = parser.parse_args()
    overrides = args.overrides + ([f"max_steps={args.steps}"] if args.steps else [])
    from rlvr.grpo.memory_plan import GB, plan_lines

    plan, prompt_tokens = plan_for(overrides)
    print(f"config: {' '.join(overrides) or 'defaults'}; longest prompt {prompt_tokens} tokens")
    for line in plan_lines(plan, None):
        print(line)
    print("phases: " + ", ".join(f"{p.name} {p.bytes / GB:.2f}" for p in plan.phases) + " GB")
    work = Path(tempfile.mkdtemp(prefix="memory-plan-"))
    peak, wall, found = run_child(overrides, work)
    steps = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines()]
    per_step = [(r["step"], r["peak_memory_gb"]) for r in steps if r.get("peak_memory_gb") is not None]
    top_step, top_gb = max(per_step, key=lambda x: x[1]) if per_step else (None, 0.0)
    training = max(p.bytes for p in plan.phases if p.name != "evaluation")
    print(f"measured ({wall / 60:.1f} min): peak RSS {peak / GB:.2f} GB (wait4 ru_maxrss); steps' peak_memory_gb "
          f"{' '.join(f'{gb:.2f}' for _, gb in per_step)} (max {top_gb:.2f} by step {top_step})")
    phase = "final evaluation" if found.get("final") else "training steps"
    print(f"largest RSS sample {found.get('rss', 0) / GB:.2f} GB, during the {phase} (log before it: "
          f"{found.get('after', '')!r})")
    print(f"ratio estimate / measured: whole run {plan.peak / peak:.2f} (plan's peak phase: {plan.peak_phase}); "
          f"training steps {training / (top_gb * GB):.2f} (goal: whole run within 0.70-1.30)")
    if args.keep:
        print(f"run directory: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
