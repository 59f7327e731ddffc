"""An episode's later turn: rlvr's shared-opening prefill (rollout/prefill.py) against prefilling every row's whole
context, which is what a loop that calls transformers' `generate` on each conversation does (TRL's multi-turn
rollouts without vLLM). Same model, same contexts, same seed, in one process; prints seconds per turn, the ratio,
and the tokens sampled (equal work: the same seed samples the same tokens on both paths).

    .venv/bin/python bench/episode_turns.py [--prompts 4] [--group 8] [--tokens 48] [--repeats 3]

Contexts: calculator level-2 prompts (two worked examples: ~400 tokens), G sampled first turns each, then one tool
result, as the second turn of `rlvr train task.name=calculator` sees them.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rlvr.rollout.hf as hf  # noqa: E402
from rlvr.config.run import load_config  # noqa: E402
from rlvr.model.load import load_model, load_tokenizer  # noqa: E402
from rlvr.rollout.base import SamplingParams  # noqa: E402
from rlvr.tasks import build_task  # noqa: E402

SPLIT = hf.split_contexts


def second_turn_contexts(engine, tokenizer, prompts: int, group: int, tokens: int) -> list[list[int]]:
    task = build_task(load_config(None, ["task.name=calculator", "task.level=2"]).task)
    firsts = [tokenizer(text, add_special_tokens=False)["input_ids"]
              for text in hf.render_prompts(tokenizer, task.eval_prompts(prompts))]
    turns = engine.continue_tokens(firsts, group, SamplingParams(0.7, 1.0, tokens, seed=1))
    result = tokenizer("<|im_end|>\n<|im_start|>user\n12<|im_end|>\n<|im_start|>assistant\n",
                       add_special_tokens=False)["input_ids"]
    return [firsts[i // group] + turn.ids + result for i, turn in enumerate(turns)]


def timed(engine, contexts: list[list[int]], sampling: SamplingParams, shared: bool) -> tuple[float, int]:
    hf.split_contexts = SPLIT if shared else (lambda contexts: None)
    start = time.perf_counter()
    turns = engine.continue_tokens(contexts, 1, sampling)
    return time.perf_counter() - start, sum(len(t.ids) for t in turns)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = load_config(None, [])
    torch.set_num_threads(config.threads or torch.get_num_threads())
    model, tokenizer = load_model(config.model, trainable=False), load_tokenizer(config.model)
    engine = hf.HFRolloutEngine(model, tokenizer)
    contexts = second_turn_contexts(engine, tokenizer, args.prompts, args.group, args.tokens)
    sampling = SamplingParams(0.7, 1.0, args.tokens, seed=2)
    times: dict[bool, list[float]] = {True: [], False: []}
    sampled: dict[bool, int] = {}
    for repeat in range(args.repeats):
        for shared in ((True, False) if repeat % 2 == 0 else (False, True)):  # both orders
            seconds, sampled[shared] = timed(engine, contexts, sampling, shared)
            times[shared].append(seconds)
    ours, whole = statistics.median(times[True]), statistics.median(times[False])
    lengths = sorted(len(c) for c in contexts)
    print(f"{len(contexts)} rows, contexts {lengths[0]}-{lengths[-1]} tokens, up to {args.tokens} new tokens")
    print(f"shared openings : {ours:6.2f} s/turn  ({sampled[True]} tokens sampled)")
    print(f"whole contexts  : {whole:6.2f} s/turn  ({sampled[False]} tokens sampled)")
    print(f"ratio rlvr / whole-context prefill: {ours / whole:.2f}")


if __name__ == "__main__":
    main()
