"""The GRPO run: `train` claims the run directory, `setup` (setup.py) builds the run once, then the loop repeats
`grpo_step` (step.py: prompts -> rollouts -> rewards -> advantages -> loss -> update -> sync) and logs,
evaluates and checkpoints between steps; `_close` stops the engine and the verifier pool.

Which family member runs (estimator, objective, aggregation, KL placement, dynamic sampling, curriculum, critic)
is decided once, in the StepPlan (plan.py).
"""
from __future__ import annotations

import json
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

from rlvr.checkpoint import resume
from rlvr.checkpoint.rundir import disk_use_line
from rlvr.checkpoint.state import MODEL_DIR, STATE_FILE, rng_state
from rlvr.checkpoint.stop import GracefulStop
from rlvr.checkpoint.store import Checkpoint, checkpoint_name
from rlvr.config.run import RunConfig, dump_config
from rlvr.distributed.checks import check_supported
from rlvr.distributed.context import DistContext, from_env, init_distributed, shutdown
from rlvr.distributed.state import rank_rngs, savable
from rlvr.evaluation.evaluate import EvalResult, evaluate
from rlvr.evaluation.sets import evaluation_prompts
from rlvr.grpo import stages
from rlvr.grpo.run_plan import start_of_run_lines
from rlvr.grpo.setup import Run, setup
from rlvr.grpo.step import grpo_step
from rlvr.metrics.diagnostics import Diagnostics, RunFacts
from rlvr.model.architectures import note_random_run
from rlvr.model.load import save_model
from rlvr.rewards.functions import RewardFuncs, sort_passed, with_functions
from rlvr.rollout.pipelined import saved_cursor
from rlvr.training.guards import check_skips


def run_eval(run: Run, step: int) -> EvalResult:
    c = run.config
    # torchrun: every rank evaluates (under FSDP2 each decode needs all ranks to gather); rank 0 writes.
    # eval.sets: built (and checked) once by setup; otherwise the task's held-out prompts, as `rlvr eval` reads them
    prompts = run.eval_prompts if run.eval_prompts is not None else evaluation_prompts(c, run.task)
    result = evaluate(run.feed.engine, run.rewarder, prompts, c.eval, c.rollout.max_new_tokens,
                      progress=run.logger.progress, reflection_phrases=c.reflection_phrases)
    if run.ranks.is_main:
        with (run.run_dir / "eval.jsonl").open("a") as f:
            f.write(json.dumps({"step": step, **result.as_json()}) + "\n")
    run.logger.message(f"eval @ step {step}: {result.summary()}")
    return result


def train(config: RunConfig, run_dir: Path | str | None = None, reward_funcs: RewardFuncs | None = None) -> Path:
    """Run GRPO up to config.max_steps; returns the final model directory (the run directory with
    checkpoint.save_final=none), or the checkpoint written when a SIGTERM/SIGINT stopped the run early.

    A fresh run directory (run_dir, else config.output_dir, else a new runs/<date-time>) must be new or empty;
    it is claimed before any model loads and removed again if the run fails before writing anything. With
    checkpoint.resume the run continues from its newest complete checkpoint instead (rlvr/checkpoint/).
    reward_funcs: TRL-style reward functions added to the reward, a list (weight 1 each) or {function: weight};
    config.yaml records those it can as reward.functions (rlvr/rewards/functions.py).
    """
    passed = sort_passed(reward_funcs)
    config = with_functions(config, passed.recorded)
    rank, world, local = from_env()  # torchrun's settings are checked before any process group or model
    check_supported(config, DistContext(rank, world, local, None))
    ranks = init_distributed(config.distributed.backend)
    try:
        final = resume.run_in_directory(config, Path(run_dir) if run_dir is not None else None,
                                        partial(setup, ranks=ranks, passed=passed), _train_loop,
                                        close=_close, ranks=ranks)
    except BaseException:
        shutdown(ranks, finished=False)
        raise
    shutdown(ranks)
    return final


def _close(run: Run) -> None:
    try:
        run.service.close()
        if hasattr(run.feed.engine, "close"):  # an engine process, vLLM or a Ray actor
            run.feed.engine.close()
    finally:
        run.logger.close()  # the steps' bar, TensorBoard's event file, the W&B run


def _parts(run: Run) -> resume.Parts:
    m = run.models
    return resume.Parts(m.lora or m.policy, m.tokenizer, run.optim.optimizer, run.optim.scheduler,
                        run.feed.prompt_stream, run.feed.curriculum, m.critic)


def _train_loop(run: Run, checkpoint: Checkpoint | None) -> Path:
    config, run_dir = run.config, run.run_dir
    first, guard = 1, {"consecutive_skips": 0, "skipped_steps": 0}
    if checkpoint is not None:
        parts = _parts(run)
        state = resume.restore(checkpoint, parts, lambda: run.task.train_prompts(config.seed), run_dir, run.ranks)
        if run.models.lora is not None:  # restore() loaded the merged weights, which do not give the adapter back
            run.models.lora.restore_adapter(checkpoint.path / MODEL_DIR)
        run.feed.prompt_stream, run.logger.start = parts.prompt_stream, time.monotonic() - state.elapsed_s
        stages.push_weights(run.feed, state.step)  # the engine loaded the base model; it must sample the checkpoint's
        first = state.step + 1
        guard = {"consecutive_skips": state.consecutive_skips, "skipped_steps": state.skipped_steps}
        run.logger.message(f"resumed at step {state.step} from {checkpoint.path} ({state.prompts_drawn} prompts "
                           "drawn so far)")
    random_line = []  # model.init=random says so first, in the log and the run directory
    if run.ranks.is_main:
        dump_config(config, run_dir / "config.yaml")
        random_line = note_random_run(run_dir, config.model, run.models.policy)
    for line in random_line + start_of_run_lines(config, run.models.policy.config, run.task, run.models.tokenizer):
        run.logger.message(line)
    started = time.monotonic()
    diagnostics = Diagnostics(RunFacts.of(config))  # "is it working?" lines, knowing the run
    done_at = config.max_steps
    if first <= done_at and _out_of_time(run, config.max_minutes, (run_dir / "final" / "config.json").is_file()):
        run.logger.message(f"the run already used max_minutes={config.max_minutes:g}; raise it to go on")
        return run_dir / "final"
    with GracefulStop(say=run.logger.message) as stop:
        for step in range(first, config.max_steps + 1):
            record, samples, group = grpo_step(run, step)
            check_skips(record, guard, config.checkpoint.max_consecutive_skips, run_dir,
                        hint=" and check the rewards for NaN")
            timed_out = _out_of_time(run, config.max_minutes)
            last = step == config.max_steps or timed_out  # a stop during the last step simply finishes the run below
            if config.eval.every and step % config.eval.every == 0 and not last:
                # held-out accuracy next to the training reward in the same row: reward hacking shows as reward
                # rising while eval/pass@1 does not
                record.update(run_eval(run, step).metrics())
            _log_step(run, diagnostics, step, record, samples, group)
            # torchrun: a signal may reach the ranks in different steps; all stop after the same one
            stopping = bool(run.ranks.max([float(stop.requested)])[0])
            if (stopping and not last) or (config.save_every and step % config.save_every == 0 and not last):
                saved = _save(run, step, guard)
                if stopping:
                    run.logger.message(resume.stop_message(run_dir, step, stop.signal_name or "SIGTERM", started))
                    return saved
            if timed_out and step < config.max_steps:
                done_at = step
                run.logger.message(f"max_minutes={config.max_minutes:g} reached after step {step}: ending the run")
                break
    if first > config.max_steps and (run_dir / "final" / "config.json").is_file():
        run.logger.message(f"the run already reached max_steps={config.max_steps}; set a larger max_steps to go on")
        return run_dir / "final"
    final = _save_final(run, guard, done_at)
    if config.eval.at_end:  # after the final model is safe on disk; an eval-only row closes the curve
        run.logger.log_eval(done_at, run_eval(run, done_at).metrics())
    if run.ranks.is_main:
        state = run_dir / resume.CHECKPOINTS / checkpoint_name(done_at) / STATE_FILE
        resume.mark_finished(run_dir, done_at, config.max_steps)  # what a resume of this run reads as "finished"
        run.logger.message(disk_use_line(run_dir, state if config.checkpoint.save_final == "full" else None))
    return final


def _log_step(run: Run, diagnostics: Diagnostics, step: int, record: dict, samples, group) -> None:
    """The step's metrics, samples and group rows, its "is it working?" lines, and a warning for a step that no
    verifier could read."""
    run.logger.log_step(record)
    run.logger.log_samples(samples)
    run.logger.log_group(group)
    for line in diagnostics.check(record):
        run.logger.message(line)
    if record["unscorable"] == run.config.batch_size:
        run.logger.message(f"WARNING: every completion of step {step} is unscorable: the verifiers "
                           f"{sorted(run.config.task.verifiers)} cannot read this task's references "
                           f"(see 'detail' in samples.jsonl); nothing is learned from such steps")


def _out_of_time(run: Run, max_minutes: float | None, final_exists: bool = True) -> bool:
    """Whether the run's time (resumes included) reached max_minutes, on any rank (torchrun: all end after the same
    step). Before the first step of a resumed run, only when final/ exists: a run stopped by a signal once its time
    was up still runs a step and then ends with its final model."""
    over = max_minutes is not None and final_exists and run.logger.elapsed() >= 60 * max_minutes
    return bool(run.ranks.max([float(over)])[0])


def _save(run: Run, step: int, guard: dict[str, int], model_from: Path | None = None) -> Path:
    """The step's checkpoint, written once. Under torchrun every rank joins the gathering (FSDP2's full state
    dicts, every rank's RNG state) and rank 0 writes while the others wait, so none runs ahead of it."""
    m = run.models
    model, optimizer = savable(m.wrapped, run.optim.optimizer)
    # A batch prefetched for the next step (max_staleness 1) is not saved: its prompts count as not drawn
    parts = replace(_parts(run), optimizer=optimizer, policy=model if model is not None else m.lora or m.policy,
                    prompt_stream=saved_cursor(run.feed.prompt_stream.drawn, run.feed.prefetched))
    extra = rank_rngs(run.ranks, rng_state())
    path = run.run_dir / resume.CHECKPOINTS / checkpoint_name(step)
    if run.ranks.is_main:
        path = resume.save(run.run_dir, step, parts, run.logger.elapsed(), guard,
                           run.config.checkpoint.save_total_limit, model_from, extra).path
    run.ranks.barrier()
    return path


def _save_final(run: Run, guard: dict[str, int], step: int) -> Path:
    """What checkpoint.save_final keeps of the last step: RUN/final, and with `full` its checkpoint (the weights
    hard-linked, plus the optimizer state); returns RUN/final, or with `none` the run directory."""
    mode, m = run.config.checkpoint.save_final, run.models
    if mode == "none":
        run.logger.message(resume.final_save_message(mode, run.run_dir))
        return run.run_dir
    model, _ = savable(m.wrapped, None)  # under FSDP2 every rank joins the gathering of the full weights
    final = run.run_dir / "final"
    if run.ranks.is_main:
        save_model(model if model is not None else m.lora or m.policy, m.tokenizer, final)
    if mode == "full":
        _save(run, step, guard, model_from=final)
    else:
        run.ranks.barrier()  # as _save: no rank runs ahead of the one writing
    run.logger.message(resume.final_save_message(mode, final))
    return final
