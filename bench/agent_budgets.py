"""Time budgets of episodes: the wall-clock of one turn of 32 rows whose every tool call loops,
against the turn budget (episode.turn_time_limit_s), with the rows' calls on a pool of episode.tool_workers threads;
and the old behaviour (rows one after another, each call its own limit, no turn budget) when --old asks for it,
else its time computed (rows x calls x tool limit: every call runs to its limit).

    .venv/bin/python bench/agent_budgets.py [--rows 32] [--calls 3] [--turn-s 1.0] [--tool-s 0.5]
                                            [--workers 32 4] [--env loop|code] [--old]

--env loop (default): an in-process tool that blocks until the bench ends (no CPU used while it "loops").
--env code: code_agent's own environment, every call run_python("while True: pass") in the bubblewrap sandbox (the
adversarial case); the call's own limit is the task's (tool_time_limit_s, plus the sandbox's start and clean-up).
No model runs: every row samples the same scripted turn (the embedded tokenizer's ids), then answers. Each line is
one `EpisodeRunner.generate` (the turn of calls, then the answer turn), so it includes parsing and tokenizing (ms).
The last line is the last turn (max_turns 1) of an environment that does not score its state: its calls are not
run, so it takes no tool time at all.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.agents.episodes import EpisodeRunner  # noqa: E402
from rlvr.agents.protocol import Budgets, ModelTurn, Observation, ToolSpec  # noqa: E402
from rlvr.agents.tool_calls import run_calls  # noqa: E402
from rlvr.config.run import ModelConfig, load_config  # noqa: E402
from rlvr.model.load import load_tokenizer  # noqa: E402
from rlvr.rollout.base import SampledTurn, SamplingParams  # noqa: E402
from rlvr.tasks import build_task  # noqa: E402
from rlvr.types import Prompt  # noqa: E402

LOOP = ToolSpec("loop", "never returns", {"type": "object", "properties": {}, "additionalProperties": False})
PROMPT = Prompt("bench/0", ({"role": "user", "content": "Loop."},), "1")
RELEASE = threading.Event()  # set at the end: the abandoned tool threads then return


class LoopEpisode:
    def __init__(self, limit_s: float):
        self.limit_s = limit_s

    def respond(self, turn: ModelTurn) -> Observation:
        return run_calls(turn, {"loop": RELEASE.wait}, self.limit_s)

    def final_state(self) -> str:
        return ""


class LoopEnvironment:
    name, tools, scores_state = "loop", (LOOP,), False  # as the calculator and code_agent: the answer is scored

    def __init__(self, limit_s: float):
        self.limit_s = limit_s

    def start(self, prompt: Prompt) -> LoopEpisode:
        return LoopEpisode(self.limit_s)

    def score_state(self, final_state: str, prompt: Prompt) -> None:
        return None


class ScriptedEngine:
    """Every live row samples `turns[i]` in the i-th call (its ids, then end of turn)."""

    def __init__(self, tokenizer, turns: list[str]):
        self.turns = [tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                      for text in turns]

    def continue_tokens(self, contexts, group_size, sampling):
        ids = self.turns.pop(0)
        return [SampledTurn(list(ids), [0.0] * len(ids), True) for _ in range(len(contexts) * group_size)]


def environment_and_call(args):
    """(environment, one call's text, the call's own limit, how long one call ran before: to its limit for the
    blocking tool, to the sandbox's kill for the code tool)."""
    if args.env == "loop":
        call = '<tool_call>{"name": "loop", "arguments": {}}</tool_call>'
        return LoopEnvironment(args.tool_s), call, args.tool_s, args.tool_s
    config = load_config(None, ["task.name=code_agent", f"episode.tool_time_limit_s={args.tool_s}"])
    environment = build_task(config.task).environment(config.episode)
    call = {"name": "run_python", "arguments": {"code": "while True: pass"}}
    text = f"<tool_call>{json.dumps(call)}</tool_call>"
    return environment, text, environment.thread_limit_s, environment.sandbox.time_limit_s


def one_turn(tokenizer, args, workers: int, turn_s: float, max_turns: int = 2) -> tuple[float, list, str]:
    """Seconds of one generate, the rows' stop reasons, and what the first row's calls answered."""
    environment, text, limit_s, _ = environment_and_call(args)
    budgets = Budgets(max_turns, 10_000, 100_000, limit_s, turn_time_limit_s=turn_s,
                      episode_time_limit_s=max(turn_s, 1e9), tool_workers=workers)
    engine = ScriptedEngine(tokenizer, [text * args.calls, "Answer: 1"])
    runner = EpisodeRunner(engine, tokenizer, environment, budgets)
    started = time.perf_counter()
    batch = runner.generate([PROMPT], args.rows, SamplingParams())
    took, records = time.perf_counter() - started, batch.turns.records
    answers = [m["content"] for m in records[0].messages if m["role"] != "assistant"]
    return took, [r.stop_reason for r in records], " | ".join(answers[:1]).replace("\n", " | ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--calls", type=int, default=3, help="looping calls per row in the turn")
    parser.add_argument("--turn-s", type=float, default=1.0, help="episode.turn_time_limit_s")
    parser.add_argument("--tool-s", type=float, default=0.5, help="episode.tool_time_limit_s")
    parser.add_argument("--workers", type=int, nargs="+", default=[32, 4], help="episode.tool_workers to try")
    parser.add_argument("--env", choices=("loop", "code"), default="loop")
    parser.add_argument("--old", action="store_true", help="also run the old behaviour (rows x calls x limit s)")
    args = parser.parse_args()
    tokenizer = load_tokenizer(ModelConfig())
    _, _, limit_s, ran_s = environment_and_call(args)
    print(f"{args.rows} rows x {args.calls} looping calls ({args.env}), call limit {limit_s:g} s, "
          f"turn budget {args.turn_s:g} s")
    print(f"{'run':<44} {'seconds':>8} {'expected':>9}")
    try:
        for workers in args.workers:
            took, _, answer = one_turn(tokenizer, args, workers, args.turn_s)
            waves = math.ceil(args.rows / workers)
            print(f"{f'tool_workers={workers}':<44} {took:>8.2f} {f'<= {waves * args.turn_s + 1:g}':>9}  {answer}")
        old = args.rows * args.calls * ran_s
        if args.old:
            took, _, _ = one_turn(tokenizer, args, 1, 1e9)
            print(f"{'old: one after another, no turn budget':<44} {took:>8.2f} {f'~{old:g}':>9}")
        else:
            print(f"{'old: one after another (computed)':<44} {'-':>8} {f'~{old:g}':>9}")
        took, reasons, _ = one_turn(tokenizer, args, args.workers[0], args.turn_s, max_turns=1)
        print(f"{'last turn (max_turns 1): calls not run':<44} {took:>8.2f} {'~0':>9}  stop: {sorted(set(reasons))}")
    finally:
        RELEASE.set()


if __name__ == "__main__":
    main()
