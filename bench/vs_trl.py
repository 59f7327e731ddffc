"""rlvr against Hugging Face TRL's GRPOTrainer at the same work: same model, prompts, G,
lengths, temperature, beta, epsilon, aggregation, learning rate and reward, alternating the two in one
invocation, each side in a fresh child process (so each peak RSS is its own and neither warms the other's
caches). Prints per-phase times, s/step, completion tokens/s, peak RSS, the training reward of both sides, and
the ratios rlvr / TRL.

    pip install -e '.[bench]'        # TRL is a bench-only extra, never a runtime dependency of rlvr
    .venv/bin/python bench/vs_trl.py [--steps 8] [--rounds 1] [--model embedded:SmolLM2-135M-Instruct]
    .venv/bin/python bench/vs_trl.py --device cuda --dtype bfloat16 --prompts-per-step 8 --max-new 128  # a GPU

On a GPU both sides train in the same precision: fp32, or bf16 mixed precision (TRL's bf16=True:
fp32 weights and optimizer state, bf16 autocast; rlvr's model.dtype=bfloat16 with its default fp32 master
weights), and the memory column is the peak GPU memory allocated by torch instead of the peak RSS.

The work: the 200 prompts "What is 7 times 8? End with 'Answer: <number>'." (single-digit + and x,
rendered by rlvr's qa task with task.one_shot=false, and the same chat messages handed to TRL), 2 prompts x
G 8 a step, <= 48 new tokens, T 1.0, top-p 1, beta 0.04 (k3), PPO clip 0.2, loss "grpo" (sequence mean, then
mean over the group), lr 1e-5 constant, AdamW betas (0.9, 0.99), gradient clipping 1.0, mu 1, one micro-batch
of 16, fp32 on CPU. Reward: rlvr's own math verifier in last_number mode on both sides, so a reward means the
same thing. Verification runs in the trainer process on both sides (rlvr reward.workers=0), so the peak RSS
of each side is one process's whole footprint.

TRL's settings, chosen to be its fastest on this CPU: gradient checkpointing off (on by default in TRL 1.x,
it recomputes the forward in the backward), fp32 (bf16 is ~600x slower on this CPU), no torch.compile,
dataloader workers 0, completions not logged, transformers' default (dynamic) KV cache in generate. Both sides
run with the same allocator (--allocator; default tcmalloc, which the `rlvr` command preloads and which also
speeds TRL's step up).

The first step of each side is warm-up (allocator, lazy imports) and is left out of the medians.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TRL_ROWS, G, LR, BETA, EPS, SEED = 512, 8, 1e-5, 0.04, 0.2, 0


@dataclass(frozen=True)
class Work:
    """What both sides are asked to do (the default CPU work)."""

    prompts_per_step: int = 2
    max_new: int = 48
    device: str = "cpu"
    dtype: str = "float32"
    rlvr_extra: tuple[str, ...] = ()  # more rlvr overrides (rlvr's side only: e.g. a decode setting under study)

    def args(self) -> list[str]:
        extra = [a for o in self.rlvr_extra for a in ("--rlvr-set", o)]
        return ["--prompts-per-step", str(self.prompts_per_step), "--max-new", str(self.max_new),
                "--device", self.device, "--dtype", self.dtype, *extra]


def write_prompts(path: Path, seed: int = SEED) -> None:
    """All 200 single-digit + and x questions, shuffled, as a qa JSONL. (The issue's figures used 512 rows; the qa
    loader drops repeated questions, so 200 distinct ones are what any such file trains on.)"""
    rows = [(a, b, times) for a in range(10) for b in range(10) for times in (False, True)]
    random.Random(seed).shuffle(rows)
    with path.open("w") as out:
        for a, b, times in rows:
            question = f"What is {a} {'times' if times else 'plus'} {b}?"
            out.write(json.dumps({"question": question, "answer": str(a * b if times else a + b)}) + "\n")


def rlvr_overrides(model_dir: str, prompts: Path, steps: int, out: Path, work: Work = Work()) -> list[str]:
    return [f"model.name_or_path={model_dir}", "task.name=qa", f"task.path={prompts}", "task.one_shot=false",
            "task.answer_mode=last_number", f"model.device={work.device}", f"model.dtype={work.dtype}",
            f"rollout.prompts_per_step={work.prompts_per_step}", f"rollout.group_size={G}",
            f"rollout.max_new_tokens={work.max_new}", "rollout.temperature=1.0", "rollout.top_p=1.0",
            f"algorithm.beta={BETA}", "algorithm.kl_estimator=k3", f"algorithm.clip_epsilon={EPS}",
            "algorithm.aggregation=sequence_mean", "algorithm.updates_per_batch=1", f"optimizer.lr={LR}",
            f"optimizer.micro_batch_size={work.prompts_per_step * G}", "reward.workers=0", "eval.at_end=false",
            "rollout.dynamic_sampling.enabled=false",  # TRL samples each step's prompts once: the same work
            "group_view=false",  # the dashboard's extra forward of G rows a step (~3 %): a diagnostic TRL has not
            f"max_steps={steps}", f"seed={SEED}", f"output_dir={out}", *work.rlvr_extra]


def peak_memory_bytes(device: str) -> int:
    """Peak RSS on the CPU; on a GPU the peak memory torch allocated there (what bounds batch and model size)."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.max_memory_allocated()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def timed_rlvr_steps(config, run_dir: Path, prepare=None, keep_open: bool = False) -> list[dict]:
    """rlvr's GRPO steps, timed by phase (also bench/scaling.py's); `prepare(run)` may adjust the run first;
    keep_open leaves the run's engine and verifier pool running (the caller closes it)."""
    from rlvr.grpo.loop import _close
    from rlvr.grpo.setup import setup
    from rlvr.grpo.step import grpo_step

    run = setup(config, run_dir)
    if prepare is not None:
        prepare(run)
    steps_out = []
    try:
        for step in range(1, config.max_steps + 1):
            start = time.perf_counter()
            record, *_ = grpo_step(run, step)
            took = time.perf_counter() - start
            t = {k[5:-2]: v for k, v in record.items() if k.startswith("time/")}
            steps_out.append({"s": took, "reward": record["reward_mean"], "length": record["completion_length"],
                              "tokens": record["completion_length"] * config.batch_size,
                              "prompt_tokens": record["prompt_length"] * config.batch_size // config.rollout.group_size,
                              "generate": t["rollout"], "score": t["logprobs"] + t["verify_wait"] + t["advantages"],
                              "update": t["train"] + t["sync"]})
    finally:
        if not keep_open:
            _close(run)
    return steps_out


def child_rlvr(model_dir: str, prompts: Path, steps: int, work: Work) -> dict:
    from rlvr.config.run import load_config

    out = Path(tempfile.mkdtemp(prefix="vs-trl-rlvr-"))
    config = load_config(None, rlvr_overrides(model_dir, prompts, steps, out / "run", work))
    size = {}
    steps_out = timed_rlvr_steps(config, out / "run", lambda run: size.update(
        params=sum(p.numel() for p in run.models.policy.parameters())))
    return {"side": "rlvr", "steps": steps_out, "peak_rss": peak_memory_bytes(work.device), **size}


def update_flops(result: dict) -> float | None:
    """FLOP a second of rlvr's update: 6 x parameters a trained token (forward 2, backward 4), each token
    once (the prompt once per group, as the update computes it; the completions' real tokens), over the update's
    seconds; the median over the steps after the first. None for TRL, whose update is not split out so."""
    if "params" not in result:
        return None
    steps = result["steps"][1:] or result["steps"]
    return statistics.median(6 * result["params"] * (s["prompt_tokens"] + s["tokens"]) / s["update"] for s in steps)


def random_model_dir(arch: str, tokenizer_model: str, device: str) -> str:
    """Random weights of the shape `arch` (model.init=random), saved once with the tokenizer of `tokenizer_model`, so
    that both sides load the same weights (shapes without pretrained weights)."""
    import torch

    from rlvr.config.run import load_config
    from rlvr.model.load import load_model, load_tokenizer, save_model

    config = load_config(None, [f"model.name_or_path={tokenizer_model}", "model.init=random",
                                f"model.architecture={arch}", f"model.device={device}"]).model
    target = Path(tempfile.mkdtemp(prefix=f"vs-trl-{arch}-")) / "model"
    model = load_model(config, trainable=False)
    save_model(model, load_tokenizer(config), target)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return str(target)


class _Timer:
    """Wraps a bound method of the TRL trainer and adds up the time spent in it during the current step."""

    def __init__(self, trainer, name: str):
        self.seconds, inner = 0.0, getattr(trainer, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(trainer, name, timed)

    def take(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


def trl_dataset(model_dir: str, prompts: Path, work: Work):
    """The same chat messages rlvr's qa task renders (system turn left to the chat template on both sides)."""
    from datasets import Dataset

    from rlvr.config.run import load_config
    from rlvr.tasks import build_task

    config = load_config(None, rlvr_overrides(model_dir, prompts, 1, Path(tempfile.mkdtemp()), work))
    task = build_task(config.task)
    # rlvr's own stream (uniform with replacement over its train split, the hashed 90 %): TRL shuffles what it gets
    stream = itertools.islice(task.train_prompts(SEED), TRL_ROWS)
    rows = [{"prompt": [dict(m) for m in p.messages], "answer": p.reference} for p in stream]
    return Dataset.from_list(rows)


def math_reward():
    from rlvr.verifiers.math.verifier import MathVerifier

    verifier = MathVerifier(mode="last_number", timeout_s=5.0)

    def reward(completions, answer, **_) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [verifier.verify(text, ref).score for text, ref in zip(texts, answer)]

    return reward


def child_trl(model_dir: str, prompts: Path, steps: int, work: Work) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    out = tempfile.mkdtemp(prefix="vs-trl-trl-")
    args = GRPOConfig(
        output_dir=out, max_steps=steps, per_device_train_batch_size=work.prompts_per_step * G, num_generations=G,
        gradient_accumulation_steps=1, max_completion_length=work.max_new, temperature=1.0, top_p=1.0, top_k=0,
        beta=BETA, epsilon=EPS, loss_type="grpo", scale_rewards="group", num_iterations=1, learning_rate=LR,
        lr_scheduler_type="constant", adam_beta2=0.99, weight_decay=0.0, max_grad_norm=1.0,
        gradient_checkpointing=False, use_cpu=work.device == "cpu", bf16=work.dtype == "bfloat16", fp16=False,
        torch_compile=False,
        dataloader_num_workers=0, log_completions=False, logging_steps=1, save_strategy="no", report_to="none",
        seed=SEED, disable_dropout=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)  # bf16=True: fp32 master weights
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    trainer = GRPOTrainer(model=model, reward_funcs=[math_reward()], args=args,
                          train_dataset=trl_dataset(model_dir, prompts, work), processing_class=tokenizer)
    generate, score = _Timer(trainer, "_generate"), _Timer(trainer, "_generate_and_score_completions")
    steps_out: list[dict] = []
    logs: list[dict] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *_, **__):
            self.start = time.perf_counter()

        def on_step_end(self, *_, **__):
            took, gen, both = time.perf_counter() - self.start, generate.take(), score.take()
            steps_out.append({"s": took, "generate": gen, "score": both - gen, "update": took - both})

        def on_log(self, _args, _state, _control, logs_=None, **kwargs):
            logs.append(dict(kwargs.get("logs") or logs_ or {}))

    trainer.add_callback(Clock())
    trainer.train()
    per_step = [entry for entry in logs if "reward" in entry]
    for row, entry in zip(steps_out, per_step):
        length = entry.get("completions/mean_length", float("nan"))
        row.update(reward=entry["reward"], length=length, tokens=length * work.prompts_per_step * G)
    return {"side": "trl", "steps": steps_out, "peak_rss": peak_memory_bytes(work.device)}


def summary(result: dict) -> dict:
    """Medians after the warm-up step; reward = mean over all steps (each side's own samples)."""
    steps = result["steps"][1:] or result["steps"]
    med = {k: statistics.median(s[k] for s in steps) for k in ("s", "generate", "score", "update")}
    tokens_per_s = statistics.median(s["tokens"] / s["s"] for s in steps)
    lengths = [s["length"] for s in result["steps"]]
    return {**med, "s_min": min(s["s"] for s in steps), "s_max": max(s["s"] for s in steps),
            "tokens_per_s": tokens_per_s, "peak_gb": result["peak_rss"] / 1e9,
            "reward": statistics.mean(s["reward"] for s in result["steps"]),
            "reward_last_half": statistics.mean(s["reward"] for s in result["steps"][len(result["steps"]) // 2:]),
            "length_range": (min(lengths), max(lengths)), "n": len(result["steps"])}


def child_env(allocator: str) -> dict[str, str]:
    """Both sides get the same allocator: tcmalloc (what the `rlvr` command preloads, rlvr/cli/allocator.py; it speeds
    TRL up too) or glibc's malloc."""
    from rlvr.cli.allocator import find_tcmalloc

    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    library = find_tcmalloc() if allocator == "tcmalloc" else None
    if allocator == "tcmalloc" and library is None:
        raise SystemExit("--allocator tcmalloc: libtcmalloc_minimal.so.4 not found (apt-get install "
                         "libtcmalloc-minimal4), or pass --allocator system")
    return {**env, "LD_PRELOAD": library} if library else env


def run_child(side: str, model_dir: str, prompts: Path, steps: int, allocator: str, work: Work) -> dict:
    command = [sys.executable, __file__, "--child", side, "--model-dir", model_dir, "--prompts", str(prompts),
               "--steps", str(steps), *work.args()]
    done = subprocess.run(command, capture_output=True, text=True, env=child_env(allocator))
    if done.returncode != 0:
        raise SystemExit(f"{side} child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_table(results: dict[str, list[dict]], work: Work = Work()) -> None:
    rows = {side: [summary(r) for r in runs] for side, runs in results.items()}
    memory = "peak GPU memory" if work.device.startswith("cuda") else "peak RSS"
    print(f"{work.device} {work.dtype}, {work.prompts_per_step} prompts x G {G}, <= {work.max_new} new tokens; "
          f"peak GB = {memory}")
    print(f"{'':<6}{'s/step':>8}{'(min-max)':>14}{'generate':>10}{'score':>8}{'update':>8}{'tok/s':>8}"
          f"{'peak GB':>9}{'reward':>8}{'2nd half':>9}{'len':>10}")
    for side, summaries in rows.items():
        for s in summaries:
            spread, lengths = f"({s['s_min']:.1f}-{s['s_max']:.1f})", "{:.0f}-{:.0f}".format(*s["length_range"])
            print(f"{side:<6}{s['s']:>8.2f}{spread:>14}{s['generate']:>10.2f}"
                  f"{s['score']:>8.2f}{s['update']:>8.2f}{s['tokens_per_s']:>8.1f}{s['peak_gb']:>9.2f}"
                  f"{s['reward']:>8.3f}{s['reward_last_half']:>9.3f}{lengths:>10}")
    rates = [f for f in map(update_flops, results.get("rlvr", [])) if f is not None]
    if rates:
        print(f"rlvr update: {statistics.median(rates) / 1e12:.2f} TFLOP/s useful (6 x "
              f"{results['rlvr'][0]['params'] / 1e6:.1f}M parameters x trained tokens / update s)")
    if rows.get("rlvr") and rows.get("trl"):
        mine, theirs = ({k: statistics.median(s[k] for s in rows[side]) for k in rows[side][0]
                         if k != "length_range"} for side in ("rlvr", "trl"))
        print(f"rlvr / TRL: s/step {mine['s'] / theirs['s']:.2f} (goal <= 0.33), generate "
              f"{mine['generate'] / theirs['generate']:.2f}, update {mine['update'] / theirs['update']:.2f}, "
              f"{memory} {mine['peak_gb'] / theirs['peak_gb']:.2f} (goal <= 0.6), tokens/s "
              f"{mine['tokens_per_s'] / theirs['tokens_per_s']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1, help="alternations of the two sides (order flips)")
    parser.add_argument("--model", default="embedded:SmolLM2-135M-Instruct",
                        help="the model, or with --arch the model whose tokenizer both sides use")
    parser.add_argument("--arch", help="random weights of this shape instead (model.architecture)")
    parser.add_argument("--only", choices=["rlvr", "trl"], help="run one side (e.g. to profile it)")
    parser.add_argument("--allocator", choices=["tcmalloc", "system"], default="tcmalloc",
                        help="memory allocator of both sides' processes (default: tcmalloc, as `rlvr` uses)")
    parser.add_argument("--json", type=Path, help="also write every child's raw per-step results here")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="both sides' device")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="bfloat16: mixed precision on both sides (fp32 weights and optimizer state)")
    parser.add_argument("--prompts-per-step", type=int, default=Work.prompts_per_step)
    parser.add_argument("--max-new", type=int, default=Work.max_new, help="completion length cap (both sides)")
    parser.add_argument("--rlvr-set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra override for rlvr's side only (repeatable), e.g. "
                             "rollout.decode_attention=matmul")
    parser.add_argument("--child", choices=["rlvr", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--prompts", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = Work(args.prompts_per_step, args.max_new, args.device, args.dtype, tuple(args.rlvr_set))
    if args.child:
        child = child_rlvr if args.child == "rlvr" else child_trl
        print(json.dumps(child(args.model_dir, args.prompts, args.steps, work)))
        return
    from rlvr.model.load import resolve_model_path

    # converts the embedded GGUF once (cached); both sides load it (or with --arch: random weights of that shape)
    model_dir = random_model_dir(args.arch, args.model, args.device) if args.arch else resolve_model_path(args.model)
    prompts = Path(tempfile.mkdtemp(prefix="vs-trl-")) / "prompts.jsonl"
    write_prompts(prompts)
    sides = [args.only] if args.only else ["rlvr", "trl"]
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for round_ in range(args.rounds):
        for side in sides if round_ % 2 == 0 else sides[::-1]:
            results[side].append(run_child(side, model_dir, prompts, args.steps, args.allocator, work))
            print(f"round {round_ + 1}: {side} done", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(results))
    print_table(results, work)


if __name__ == "__main__":
    main()
