"""`rlvr eval MODEL_OR_RUN`: held-out accuracy with the training verifiers (evaluation/evaluate.py), JSON on stdout and
in a file, a short table on stderr; `--scaling` measures accuracy against N and the thinking budget instead
(rlvr.evaluation.scaling). Input problems are one-line errors before any model loads."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rlvr.config.run import RunConfig, validate_config
from rlvr.evaluation.target import InferenceInputError, check_model_target, int_list, output_path, resolve_target
from rlvr.pipeline.set_tables import ended_share, format_number
from rlvr.seeding import seed_everything


def register(sub) -> None:
    ev = sub.add_parser("eval", help="pass@k, maj@k, best-of-k and greedy accuracy on a task's held-out split; "
                                     "--scaling: accuracy against samples N and thinking budget")
    ev.add_argument("model", help="run directory, model directory, hub id, or 'embedded'")
    ev.add_argument("overrides", nargs="*", help="[CONFIG.yaml] then dotted.key=value overrides, e.g. task.level=2 "
                                                 "eval.batch_size=16")
    ev.add_argument("--task", default=None, help="task name (default: the run's task, else arithmetic)")
    ev.add_argument("--n", type=int, default=None, help="samples per problem (default eval.samples, 4)")
    ev.add_argument("--k", default=None, help="comma list of k for pass@k, maj@k, best-of-k, each <= n "
                                              "(default eval.ks, 1,4; larger ones skipped)")
    ev.add_argument("--greedy", action=argparse.BooleanOptionalAction, default=None,
                    help="also measure greedy accuracy (default eval.greedy, on)")
    ev.add_argument("--size", type=int, default=None, help="held-out problems (default 200)")
    ev.add_argument("--temperature", type=float, default=None, help="sampling temperature (default 0.6)")
    ev.add_argument("--scaling", action="store_true", help="accuracy against N (maj@N, best-of-N, pass@N from "
                                                           "max(N) samples) and against the thinking budget")
    ev.add_argument("--n-list", default=None, help="--scaling: comma list of N (default eval.scaling_n, 1,4,16)")
    ev.add_argument("--budgets", default=None, help="--scaling: comma list of thinking budgets in tokens "
                                                    "(default eval.scaling_budgets, 8,16,32,64)")
    ev.add_argument("--output", default=None, help="JSON output path (default RUN/eval.json or ./eval.json; "
                                                   "--scaling: scaling.json, with the plot beside it)")
    ev.set_defaults(func=cmd_eval)


def eval_config(args: argparse.Namespace) -> tuple[str, RunConfig]:
    """The resolved config with the command-line eval settings; every bad value is one InferenceInputError or
    ConfigError, raised before any model loads."""
    model_path, config = resolve_target(args.model, args.task, args.overrides)
    ks = int_list(args.k, "--k") if args.k is not None else None
    if args.scaling and ks is not None:
        raise InferenceInputError("--k is for plain evaluation; with --scaling give --n-list (and --budgets)")
    settings = {"samples": args.n, "size": args.size, "temperature": args.temperature, "greedy": args.greedy,
                "ks": ks, "scaling_n": int_list(args.n_list, "--n-list") if args.n_list is not None else None,
                "scaling_budgets": int_list(args.budgets, "--budgets") if args.budgets is not None else None}
    if not args.scaling and (args.n_list is not None or args.budgets is not None):
        raise InferenceInputError("--n-list and --budgets need --scaling")
    overrides = {key: value for key, value in settings.items() if value is not None}
    config = validate_config({**config.model_dump(), "eval": {**config.eval.model_dump(), **overrides}})
    n = config.eval.samples
    for k in ks or []:
        if k > n:
            raise InferenceInputError(f"--k {args.k}: pass@k and maj@k need 1 <= k <= n, and {k} > n = {n} "
                                      f"(raise --n)")
    check_model_target(args.model)
    return model_path, config


def cmd_eval(args: argparse.Namespace) -> int:
    model_path, config = eval_config(args)
    output = output_path(args.output, args.model, "scaling.json" if args.scaling else "eval.json")
    if args.scaling:
        return _scaling(config, model_path, output)
    from rlvr.evaluation.evaluate import evaluate_model

    result = evaluate_model(config, model_path)
    data = {"model": model_path, "task": config.task.name, **result.as_json()}
    print(eval_table(data), file=sys.stderr)
    _write(output, data)
    return 0


def _write(output: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2)
    print(text)
    replaced = output.exists()
    output.write_text(text + "\n")
    print(f"wrote {output}" + (" (replacing the previous file)" if replaced else ""), file=sys.stderr)


def eval_table(data: dict[str, Any]) -> str:
    """A few lines for a human: the estimators per k, length, the share that ended its turn, greedy, reasoning, and the
    breakdowns (with each evaluation set's ended share)."""
    ks = sorted(int(key.split("@")[1]) for key in data if key.startswith("pass@"))
    cell = lambda key: "-" if data.get(key) is None else f"{data[key]:.3f}"  # noqa: E731
    lines = [f"{data['task']}: {data['problems']} held-out problems, n={data['samples_per_problem']} samples "
             f"(T {data['temperature']:g})", f"{'k':>4} | {'pass@k':>6} | {'maj@k':>6} | {'best-of-k':>9}"]
    lines += [f"{k:>4} | {cell(f'pass@{k}'):>6} | {cell(f'maj@{k}'):>6} | {cell(f'best_of_{k}'):>9}" for k in ks]
    # ended: completions that end their turn within the token budget, 1 - truncated
    lines.append(f"mean length {data['mean_length']:.1f} tokens | ended {format_number(ended_share(data))} | "
                 f"greedy {cell('greedy')}")
    lines.append(f"think words {cell('think_words')} | reflection {cell('reflection_rate')} | steps stated "
                 f"{cell('steps_stated')}, all right {cell('steps_right')}")
    for key, values in data.get("breakdown", {}).items():
        cells = [f"{value} {v['pass@1']:.3f} ({v['problems']})" for value, v in values.items()]
        lines.append(f"pass@1 by {key}: " + ", ".join(cells))
        if key == "set":  # each evaluation set's own: a set asked outside the template may not stop
            lines.append("ended by set: " + ", ".join(f"{value} {format_number(ended_share(v))}"
                                                      for value, v in values.items()))
    return "\n".join(lines)


def _scaling(config: RunConfig, model_path: str, output: Path) -> int:
    from rlvr.agents.wiring import refuse_episodes
    from rlvr.evaluation.evaluate import answer_mode_of
    from rlvr.evaluation.scaling import run_scaling, table, write_plot
    from rlvr.evaluation.sets import evaluation_prompts
    from rlvr.model.load import load_model, load_tokenizer
    from rlvr.rewards.rewarder import build_rewarder
    from rlvr.rollout.hf import HFRolloutEngine
    from rlvr.tasks import build_task
    from rlvr.verifiers import math_answer_mode

    task, rewarder = build_task(config.task), build_rewarder(config)
    refuse_episodes(task, "rlvr eval --scaling")
    prompts = evaluation_prompts(config, task)  # eval.sets: all sets' prompts, checked before the model loads
    if answer_mode_of(rewarder) is None:
        raise InferenceInputError(f"--scaling votes over extracted answers, so it needs the 'math' verifier; "
                                  f"task.verifiers is {sorted(config.task.verifiers)}")
    tokenizer = load_tokenizer(config.model)
    model = load_model(config.model, trainable=False)
    seed_everything(config.seed, python=False)  # torch only, as evaluate_model (rlvr/seeding.py)
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    e = config.eval
    engine = HFRolloutEngine.configured(model, tokenizer, config.rollout)
    result = run_scaling(engine, rewarder, prompts, e,
                         config.rollout.max_new_tokens, e.scaling_n, e.scaling_budgets, math_answer_mode(config.task),
                         say)
    print(table(result), file=sys.stderr)
    plot, note = write_plot(result, output.with_suffix(""))
    if note:
        print(note, file=sys.stderr)
    print(f"wrote {plot}", file=sys.stderr)
    _write(output, {"model": model_path, "task": config.task.name, **result.as_json(), "plot": str(plot)})
    return 0
