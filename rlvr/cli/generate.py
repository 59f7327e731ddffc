"""`rlvr generate MODEL_OR_RUN --prompt "What is 7 * 8?" --n 8 --mode majority --think-budget 32`: n samples of one
question in the task's chat format, one chosen by majority vote, best-of-N or none;
the chosen completion on stdout, the vote on stderr. `rlvr eval` is rlvr/cli/eval.py."""
from __future__ import annotations

import argparse
import json
import sys

from rlvr.config.run import validate_config
from rlvr.evaluation.target import InferenceInputError, check_model_target, resolve_target

CLI_MODES = {"majority": "majority", "best-of": "best_of", "sample": "sample"}


def register(sub) -> None:
    gen = sub.add_parser("generate", help="n samples of one prompt; answer by majority vote or best-of-N, "
                                          "optionally with a thinking budget")
    gen.add_argument("model", help="run directory, model directory, hub id, or 'embedded'")
    gen.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. task.answer_mode=latex "
                                                  "rollout.max_new_tokens=64")
    gen.add_argument("--prompt", required=True, help="the question; the task's instruction and one-shot example "
                                                     "are added as in training")
    gen.add_argument("--n", type=int, default=None, help="samples (default eval.samples, 4)")
    gen.add_argument("--mode", choices=sorted(CLI_MODES), default="majority",
                     help="majority: most frequent extracted answer; best-of: highest total reward (needs "
                          "--reference); sample: the first sample")
    gen.add_argument("--think-budget", type=int, default=None, help="cap the <think> section at B tokens, then "
                                                                    "force </think> and the answer")
    gen.add_argument("--reference", default=None, help="the correct answer: samples are scored with the task's "
                                                       "verifiers (needed by --mode best-of)")
    gen.add_argument("--task", default=None, help="task whose prompt format and verifiers apply (default: the "
                                                  "run's task, else arithmetic)")
    gen.add_argument("--temperature", type=float, default=None, help="sampling temperature (default 0.6)")
    gen.add_argument("--json", action="store_true", help="print every sample and the vote as JSON on stdout")
    gen.set_defaults(func=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    model_path, config = resolve_target(args.model, args.task, args.overrides)
    settings = {k: v for k, v in {"samples": args.n, "temperature": args.temperature}.items() if v is not None}
    config = validate_config({**config.model_dump(), "eval": {**config.eval.model_dump(), **settings}})
    if args.think_budget is not None and args.think_budget < 1:
        raise InferenceInputError(f"--think-budget {args.think_budget}: must be >= 1 token")
    if not args.prompt.strip():
        raise InferenceInputError("--prompt is empty")
    mode = CLI_MODES[args.mode]
    if mode == "best_of" and args.reference is None:
        raise InferenceInputError("--mode best-of ranks samples by the task's total reward, which checks answers "
                                  "against a reference: give --reference ANSWER")
    check_model_target(args.model)
    from rlvr.evaluation.generate import generate
    from rlvr.model.load import load_model, load_tokenizer
    from rlvr.rewards.rewarder import build_rewarder
    from rlvr.rollout.base import SamplingParams
    from rlvr.tasks.chat import build_messages
    from rlvr.types import Prompt
    from rlvr.verifiers import math_answer_mode

    scorer = build_rewarder(config) if args.reference is not None else None
    prompt = Prompt(id="cli/prompt", messages=build_messages(args.prompt, config.task), reference=args.reference or "")
    tokenizer = load_tokenizer(config.model)
    model = load_model(config.model, trainable=False)
    e = config.eval
    (result,) = generate(model, tokenizer, [prompt], e.samples, mode, think_budget=args.think_budget, scorer=scorer,
                         answer_mode=math_answer_mode(config.task), answer_budget=e.answer_budget,
                         sampling=SamplingParams(e.temperature, e.top_p, config.rollout.max_new_tokens))
    if args.json:
        print(json.dumps({"model": model_path, **result.as_json()}, indent=2))
    else:
        print(result.text)
    print(describe(result), file=sys.stderr)
    return 0


def describe(result) -> str:
    """The vote and the pick, for stderr."""
    votes = ", ".join(f"{v.answer} x{v.count}" for v in result.votes) or "none"
    abstained = sum(s.answer is None for s in result.samples)
    chosen = result.samples[result.chosen]
    lines = [f"{len(result.samples)} samples | votes: {votes}" + (f" | no answer x{abstained}" if abstained else ""),
             f"chosen ({result.mode}): sample {result.chosen}, answer {chosen.answer}, {chosen.tokens} tokens"
             + (f", score {chosen.score:g}" if chosen.score is not None else "")
             + (", </think> forced by the budget" if chosen.forced else "")]
    return "\n".join(lines)
