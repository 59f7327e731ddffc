"""Rollout throughput: rlvr's sampler (prompt prefilled once, KV cache copied to its G samples) against
transformers' `generate(num_return_sequences=G)` (what TRL uses without vLLM), same model, same prompts,
same sampling settings, in one process. Prints completions/s for each and the ratio.

    .venv/bin/python bench/rollout_prefix_sharing.py [--prompts 4] [--group 8] [--max-new-tokens 32] [--repeats 3]
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch

from rlvr.config.run import RunConfig
from rlvr.model.load import load_model, load_tokenizer
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.tasks import build_task


def time_it(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = RunConfig()
    model, tokenizer = load_model(config.model, trainable=False), load_tokenizer(config.model)
    engine = HFRolloutEngine(model, tokenizer)
    prompts = list(itertools.islice(build_task(config.task).train_prompts(0), args.prompts))
    ids, mask = engine.encode(prompts)
    # min_new_tokens = max_new_tokens on both sides: equal work whatever the samples say.
    sampling = SamplingParams(1.0, 1.0, args.max_new_tokens)
    engine.stop_ids = [-1]  # never stop early, so both generate exactly max_new_tokens

    def ours():
        engine.sample(ids, mask, args.group, sampling)

    @torch.no_grad()
    def hf_generate():
        model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                       max_new_tokens=args.max_new_tokens, min_new_tokens=args.max_new_tokens,
                       num_return_sequences=args.group, pad_token_id=tokenizer.pad_token_id)

    ours(), hf_generate()  # warm-up
    n = args.prompts * args.group
    t_ours, t_hf = time_it(ours, args.repeats), time_it(hf_generate, args.repeats)
    print(f"prompt tokens {ids.shape[1]} (padded), {args.prompts} prompts x G={args.group}, "
          f"{args.max_new_tokens} new tokens each, {torch.get_num_threads()} threads")
    print(f"rlvr sampler          {t_ours:7.2f} s  {n / t_ours:7.1f} completions/s")
    print(f"transformers generate {t_hf:7.2f} s  {n / t_hf:7.1f} completions/s")
    print(f"speed-up (generate time / rlvr time): {t_hf / t_ours:.2f}x")


if __name__ == "__main__":
    main()
