"""Worker of tests/test_distributed.py, run as one process or under torchrun (`python -m torch.distributed.run
--nproc_per_node 2 tests/distributed_worker.py MODEL_DIR STRATEGY:AGGREGATION[,...] OUT_DIR`).

For each STRATEGY:AGGREGATION (one launch runs several, to pay the start-up once): three optimizer steps on
fixed, pre-made train batches (the same on every rank, each rank keeping its share of whole groups), then the
full parameters are written to OUT_DIR/STRATEGY-AGGREGATION.pt by rank 0. The batches are made here instead of
sampled, so the comparison with the single-process run tests the update path alone: global denominators, the
sum of the ranks' gradients, the reduced logged totals. Under FSDP2 it first decodes with different lengths
on the two ranks (a collective inside decoding would hang) and checks the tokens against an unsharded copy.
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch

from rlvr.algorithms.loss import LossSpec
from rlvr.algorithms.objectives import ClipRange
from rlvr.config.run import load_config
from rlvr.distributed.context import init_distributed, shutdown
from rlvr.distributed.state import savable
from rlvr.distributed.wrap import DistributedEngine, ShardedLM, distribute_policy
from rlvr.model.load import load_model, load_tokenizer
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.training.update import UpdateSettings, train_step
from rlvr.types import Prompt, TrainBatch

PROMPTS, G, C, P, STEPS = 4, 2, 6, 5, 3  # 4 prompts x G=2 = 8 rows per step; 2 ranks keep 2 prompts each


def fixed_batch(step: int, vocab: int) -> TrainBatch:
    """A deterministic batch with rows of different lengths (so the ranks' token counts differ)."""
    g = torch.Generator().manual_seed(100 + step)
    rows = PROMPTS * G
    lengths = torch.randint(1, C + 1, (rows,), generator=g)
    mask = (torch.arange(C)[None, :] < lengths[:, None]).float()
    return TrainBatch(prompt_ids=torch.randint(3, vocab, (PROMPTS, P), generator=g),
                      prompt_mask=torch.ones(PROMPTS, P, dtype=torch.long),
                      prompt_index=torch.arange(rows) // G,
                      completion_ids=torch.randint(3, vocab, (rows, C), generator=g), completion_mask=mask,
                      advantages=torch.randn(rows, generator=g),
                      old_logprobs=None, ref_logprobs=-3.0 + 0.5 * torch.randn(rows, C, generator=g) * mask)


def share(batch: TrainBatch, rank: int, world: int) -> TrainBatch:
    """Rank r's prompts [r*n, (r+1)*n) and their G rows each (what draw_batch does with the prompt list)."""
    n = PROMPTS // world
    rows = slice(rank * n * G, (rank + 1) * n * G)
    return TrainBatch(batch.prompt_ids[rank * n:(rank + 1) * n], batch.prompt_mask[rank * n:(rank + 1) * n],
                      batch.prompt_index[rows] - rank * n, batch.completion_ids[rows], batch.completion_mask[rows],
                      batch.advantages[rows], None, batch.ref_logprobs[rows])


def decode_check(wrapped, plain, tokenizer, rank: int) -> bool:
    """FSDP2: greedy decoding, 3 tokens on rank 0 and 9 on rank 1, equals the unsharded copy's."""
    prompts = [Prompt(f"p{rank}", ({"role": "user", "content": f"{rank + 2} + 3 ="},), "5")]
    sampling = SamplingParams(temperature=0.0, max_new_tokens=3 + 6 * rank)
    sharded = DistributedEngine(HFRolloutEngine(ShardedLM(wrapped), tokenizer), wrapped).generate(prompts, 1, sampling)
    # The stop token could end a row early: compare ids up to the shorter of the two.
    reference = HFRolloutEngine(plain, tokenizer).generate(prompts, 1, sampling)
    width = min(sharded.completion_ids.shape[1], reference.completion_ids.shape[1])
    return bool(torch.equal(sharded.completion_ids[:, :width], reference.completion_ids[:, :width]))


def run(ctx, model_dir: str, strategy: str, aggregation: str) -> dict:
    config = load_config(None, [f"model.name_or_path={model_dir}"])
    model, tokenizer = load_model(config.model, trainable=True), load_tokenizer(config.model)
    trainer, wrapped, decoded = model, None, None
    if ctx.enabled:
        plain = copy.deepcopy(model) if strategy == "fsdp2" else None
        wrapped = distribute_policy(model, strategy, ctx)
        trainer = wrapped.trainer
        if strategy == "fsdp2":
            decoded = ctx.gather(decode_check(wrapped, plain, tokenizer, ctx.rank))
    # SGD, no clipping: Adam's update and a clipped gradient are nearly invariant to the gradient's scale, so
    # they would hide a wrong loss scaling; SGD moves the parameters by exactly lr x gradient.
    optimizer = torch.optim.SGD([p for p in trainer.parameters() if p.requires_grad], lr=0.5)
    spec = LossSpec("ppo_clip", ClipRange(0.2, 0.2, 3.0), aggregation, "k3", 0.04, 0.0)
    settings = UpdateSettings(spec, 1.0, 2, 1e9, C, None, ctx)  # 2 rows per micro-batch: accumulation on each rank
    stats = []
    for step in range(STEPS):
        batch = fixed_batch(step, model.config.vocab_size)
        local = share(batch, ctx.rank, ctx.world_size) if ctx.enabled else batch
        s = train_step(trainer, local, optimizer, settings)
        stats.append([s.loss, s.policy_loss, s.kl, s.clip_fraction, s.entropy, s.grad_norm])
    gathered_weights, _ = savable(wrapped, None)  # FSDP2: the full weights, gathered from the shards
    state = gathered_weights.state if gathered_weights is not None else dict(model.named_parameters())  # tied: once
    return {"params": {k: v.detach().cpu().clone() for k, v in state.items()}, "stats": stats, "decoded": decoded,
            "world": ctx.world_size}


def main(model_dir: str, specs: str, out_dir: str) -> None:
    ctx = init_distributed("gloo")
    for item in specs.split(","):
        strategy, aggregation = item.split(":")
        result = run(ctx, model_dir, strategy, aggregation)
        if ctx.is_main:
            torch.save(result, Path(out_dir) / f"{strategy}-{aggregation}.pt")
    shutdown(ctx)


if __name__ == "__main__":
    main(*sys.argv[1:4])
