"""Cross-field rules of RunConfig: combinations that cannot run, each a message naming the keys (the GRPO family's
refusals). Called by RunConfig's validator; kept apart so config.py stays
the list of fields and their defaults."""
from __future__ import annotations

import difflib
import math
from typing import Any, Literal, get_args

from pydantic import ValidationError

from rlvr.config.task_catalog import BUILTIN_TASKS

# A RunConfig (config/run.py), typed loosely on purpose: run.py calls these rules from RunConfig's validator, so
# naming the class here, even for type checkers only, would make the two modules import each other (no
# import circles, tests/test_layout.py).
AnyRunConfig = Any
# The names config validation accepts, checked here so that config imports no registry: the built-in
# tasks come from their one list (rlvr/config/task_catalog.py, which rlvr.tasks.TASKS is made from), the verifiers
# are the keys of rlvr.verifiers.VERIFIERS in their order (tests/test_config.py checks that they agree). task.name
# and task.verifiers stay plain `str` fields: a TaskConfig built in code still reaches build_task, whose message
# names the valid tasks.
TaskName = Literal[tuple(BUILTIN_TASKS)]  # type: ignore[valid-type]  # read with get_args, never as a field type
# The tasks that play multi-turn episodes (their task object has `environment(...)`, rlvr/agents/wiring.py; a test
# checks this list against the registry). Their rules: _episode_problems.
EPISODE_TASKS: tuple[str, ...] = tuple(name for name, task in BUILTIN_TASKS.items() if task.episodes)
# Tasks a user registered at run time (rlvr.tasks.register_task: a script that defines its own task or environment,
# docs/agents.md): name -> plays episodes. Filled by rlvr.tasks only, so config still imports no registry.
REGISTERED_TASKS: dict[str, bool] = {}
VerifierName = Literal["math", "format", "answer_format", "think_format", "tag_count", "language", "tool_call", "code",
                       "reasoning_gym", "steps"]


def run_config_problems(c: AnyRunConfig) -> list[str]:
    return [*_batch_problems(c), *_task_problems(c), *_algorithm_problems(c), *_correction_problems(c),
            *_lora_problems(c), *_engine_problems(c), *_ray_trainer_problems(c), *_precision_problems(c),
            *_episode_problems(c), *_eval_set_problems(c)]


# Task keys an eval.sets entry may not override: one rewarder, built from task, scores every set, so a set that
# changed the task or its verification would be scored by the wrong checks; train_levels picks training prompts,
# and a set is only ever evaluated.
EVAL_SET_FIXED = ("name", "verifiers", "answer_mode", "train_levels")


def _eval_set_problems(c: AnyRunConfig) -> list[str]:
    """Each eval.sets entry is a partial task override that must itself make a valid task section."""
    task_type, problems = type(c.task), []
    if c.eval.recheck_size and not c.eval.sets:  # the re-check compares per set (pipeline/recheck.py)
        problems.append(f"eval.recheck_size={c.eval.recheck_size} re-checks a fall on one evaluation set and needs "
                        "eval.sets (e.g. [{level: 2}, {level: 3}]); without sets nothing would be re-checked")
    for i, entry in enumerate(c.eval.sets or ()):
        where = f"eval.sets[{i}]"
        unknown = [key for key in entry if key not in task_type.model_fields]
        fixed = [key for key in entry if key in EVAL_SET_FIXED]
        if unknown:
            close = difflib.get_close_matches(unknown[0], list(task_type.model_fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{where}: unknown task key(s) {unknown}{hint}; a set overrides keys of task, e.g. "
                            "{level: 3}")
        elif fixed:
            problems.append(f"{where}: {fixed} cannot vary per set (every set is scored by task's verifiers; "
                            f"keys fixed for all sets: {', '.join(EVAL_SET_FIXED)})")
        else:
            try:
                task_type.model_validate({**c.task.model_dump(), **entry})
            except ValidationError as err:
                problems.append(f"{where}: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']} "
                                                        f"(got {e.get('input')!r})" for e in err.errors()))
    return problems


def _episode_problems(c: AnyRunConfig) -> list[str]:
    """Multi-turn episodes run on engines with `continue_tokens`, synchronously, and are cut by the
    episode budgets, not by rollout.max_new_tokens."""
    if c.task.name not in EPISODE_TASKS and not REGISTERED_TASKS.get(c.task.name, False):
        return []
    e, problems, name = c.rollout.engine, [], f"task.name={c.task.name} plays multi-turn episodes"
    if e.kind == "vllm" or c.ray.enabled:
        problems.append(f"{name}, which the vLLM and Ray engines cannot run yet: use rollout.engine.kind=hf or "
                        "hf_process (and ray.enabled=false)")
    if e.max_staleness:
        problems.append(f"{name}: rollout.engine.max_staleness=1 is not supported with them yet (use 0)")
    if c.reward.overlong_buffer:
        problems.append(f"{name}: reward.overlong_buffer measures one completion against rollout.max_new_tokens; "
                        "for episodes cut by episode.tokens_per_turn / tokens_per_episode use "
                        "algorithm.mask_truncated=true instead")
    if c.episode.process_reward is not None and c.episode.credit != "process":
        problems.append("episode.process_reward scores turns for episode.credit=process only; with credit="
                        f"{c.episode.credit} it would never run (set episode.credit=process)")
    if c.episode.process_reward is not None and c.rollout.dynamic_sampling.enabled is True:
        problems.append("rollout.dynamic_sampling judges a group by its rewards before episode.process_reward scores "
                        "its turns, so it would drop groups the process scorer separates; set "
                        "rollout.dynamic_sampling.enabled=false (auto leaves it off)")
    if c.episode.credit == "process" and c.reward.control != "none":
        problems.append(f"{name}: reward.control={c.reward.control} hides which answer earned the outcome reward, not "
                        "which turns did the work that episode.credit=process pays; use episode.credit=outcome for the "
                        "run and its controls")
    if c.episode.credit == "process" and c.algorithm.advantage == "gae":
        problems.append(f"{name}: episode.credit=process adds a per-turn term to group advantages; with "
                        "algorithm.advantage=gae GAE already credits each token (use credit=outcome)")
    if c.episode.tokens_per_turn > c.episode.tokens_per_episode:
        problems.append(f"episode.tokens_per_turn={c.episode.tokens_per_turn} exceeds episode.tokens_per_episode="
                        f"{c.episode.tokens_per_episode}")
    # a call gets at most what is left of its turn's time, a turn what is left of the episode's: a larger
    # limit inside a smaller one would never be reached
    for small, large in (("tool_time_limit_s", "turn_time_limit_s"), ("turn_time_limit_s", "episode_time_limit_s")):
        if getattr(c.episode, small) > getattr(c.episode, large):
            problems.append(f"episode.{small}={getattr(c.episode, small):g} exceeds episode.{large}="
                            f"{getattr(c.episode, large):g}")
    return problems


def _engine_problems(c: AnyRunConfig) -> list[str]:
    # Ray trainer ranks keep the in-process engine, which shares the policy's weights
    ray_engine = c.ray.enabled and c.ray.trainer_ranks == 1
    e, own_weights = c.rollout.engine, c.rollout.engine.kind != "hf" or ray_engine
    if e.max_staleness and not own_weights:
        return ["rollout.engine.max_staleness=1 needs an engine with its own weights (rollout.engine.kind=hf_process "
                "or vllm, or ray.enabled=true with ray.trainer_ranks=1): the in-process hf engine is the policy the "
                "update is changing"]
    if e.max_staleness and e.kind == "vllm" and e.vllm_mode == "colocate":
        return ["rollout.engine.max_staleness=1 with vllm_mode=colocate: the colocated engine shares the trainer's GPU "
                "and sleeps during the update, so nothing would overlap; use max_staleness=0 (or an engine of its own)"]
    if e.max_staleness and (c.rollout.dynamic_sampling.enabled is True or c.curriculum.enabled):
        return ["rollout.engine.max_staleness=1 cannot be combined with dynamic sampling or the curriculum yet: both "
                "choose the next prompts from the rewards of the batch still being scored"]
    if e.kind == "vllm" and e.vllm_mode == "server" and not (e.vllm_server_url or "").startswith(("http://",
                                                                                                  "https://")):
        return [f"rollout.engine.vllm_mode=server needs rollout.engine.vllm_server_url=http://host:port of a running "
                f"`VLLM_SERVER_DEV_MODE=1 vllm serve` (got {e.vllm_server_url!r})"]
    if e.kind == "vllm" and c.model.init == "random":
        return ["model.init=random builds its weights in the trainer, and rollout.engine.kind=vllm loads its own from "
                "model.name_or_path: it would sample another model; use rollout.engine.kind=hf or hf_process"]
    if e.kind == "vllm" and c.model.lm_head_fp32:
        return ["model.lm_head_fp32 with rollout.engine.kind=vllm: vLLM computes its own head in model.dtype, so only "
                "the trainer's would be fp32 and the sampler-trainer gap would grow; use the hf or hf_process engine"]
    if e.kind == "vllm" and c.model.lora.enabled:
        return ["model.lora with rollout.engine.kind=vllm is not supported yet (vLLM would need its own LoRA adapter "
                "sync); hf_process and ray.enabled receive the merged weights after every step"]
    step_settings = [name for name, changed in (("rollout.compile_decode=true", c.rollout.compile_decode), (
        f"rollout.decode_attention={c.rollout.decode_attention}", c.rollout.decode_attention != "auto")) if changed]
    if step_settings and own_weights:  # the other engines would ignore them without a word
        return [f"{' and '.join(step_settings)} set the in-process engine's decode step, and this run decodes "
                f"elsewhere (rollout.engine.kind={e.kind}, ray.enabled={c.ray.enabled}): leave them at their defaults"]
    if c.ray.address is not None and not c.ray.enabled:
        return [f"ray.address={c.ray.address} is set but ray.enabled=false: the run would ignore the cluster; set "
                "ray.enabled=true (or drop ray.address)"]
    if c.ray.enabled and e.kind != "hf":
        return [f"ray.enabled=true runs the transformers engine in a Ray actor; rollout.engine.kind={e.kind} cannot "
                f"be combined with it yet (leave it at hf)"]
    return []


def _ray_trainer_problems(c: AnyRunConfig) -> list[str]:
    """Trainer ranks as Ray actors: what rlvr/cluster/trainers.py cannot place or run."""
    r = c.ray
    if r.trainer_ranks == 1:
        return []
    if not r.enabled:
        return [f"ray.trainer_ranks={r.trainer_ranks} starts the trainer ranks as Ray actors: set ray.enabled=true "
                "(or launch the ranks with torchrun and leave ray.trainer_ranks=1)"]
    if r.trainer_gpus not in (0, 1):
        return [f"ray.trainer_gpus={r.trainer_gpus:g} must be 0 or 1: each trainer rank drives one GPU "
                "(LOCAL_RANK's device), as under torchrun"]
    if c.model.device.startswith("cuda") and r.trainer_gpus == 0:
        return [f"model.device={c.model.device} with ray.trainer_gpus=0: Ray hides the GPUs from an actor that "
                "reserved none; set ray.trainer_gpus=1"]
    if r.trainer_gpus and not c.model.device.startswith("cuda"):
        return [f"ray.trainer_gpus=1 with model.device={c.model.device}: each rank would hold a GPU and train on "
                "the CPU; set model.device=cuda"]
    return []


def _lora_problems(c: AnyRunConfig) -> list[str]:
    lora = c.model.lora
    if not lora.enabled:
        return []
    if lora.dropout > 0:
        return [f"model.lora.dropout={lora.dropout:g} must be 0: the policy runs in eval mode (deterministic "
                f"log-probs for the ratio), where dropout does nothing"]
    if not lora.target_modules:
        return ["model.lora.target_modules is empty: name the Linear layers to adapt, e.g. [q_proj, v_proj]"]
    return []


def _batch_problems(c: AnyRunConfig) -> list[str]:
    batch = c.batch_size
    if batch % c.optimizer.micro_batch_size and c.optimizer.micro_batch_size < batch:
        return [f"optimizer.micro_batch_size={c.optimizer.micro_batch_size} must divide the batch "
                f"rollout.prompts_per_step x rollout.group_size = {batch}"]
    if c.reward.overlong_buffer >= c.rollout.max_new_tokens:
        return [f"reward.overlong_buffer={c.reward.overlong_buffer} must be smaller than rollout.max_new_tokens="
                f"{c.rollout.max_new_tokens} (DAPO: the buffer is the last part of the length budget)"]
    return []


def _task_problems(c: AnyRunConfig) -> list[str]:
    if c.task.name not in _known_tasks():
        return [f"task.name: unknown task {c.task.name!r}; allowed: {', '.join(_known_tasks())}"]
    unknown = set(c.task.verifiers) - set(_known_verifiers())
    if unknown:
        return [f"task.verifiers: unknown verifier(s) {sorted(unknown)}; allowed: {sorted(_known_verifiers())}"]
    weights = c.task.verifiers.values()
    if not all(math.isfinite(w) and w >= 0 for w in weights) or not any(w > 0 for w in weights):
        return ["task.verifiers: weights must be finite and >= 0, and at least one must be > 0"]
    if c.reward.workers and c.reward.deadline_s <= c.task.verifier_timeout_s:
        return [f"reward.deadline_s={c.reward.deadline_s:g} must exceed task.verifier_timeout_s="
                f"{c.task.verifier_timeout_s:g} (a worker's first symbolic check also imports sympy)"]
    if c.task.name == "qa" and not c.task.path:
        return ["task.path is required when task.name=qa (a .jsonl/.parquet file or a hub id)"]
    # the reasoning_gym verifier reads a reference only the reasoning_gym task writes, and that
    # task's rows are not 'Answer: <number>' problems (grids, words, lists), so no other verifier can score them
    if (c.task.name == "reasoning_gym") != ("reasoning_gym" in c.task.verifiers):
        return [f"task.name={c.task.name} with task.verifiers={dict(c.task.verifiers)}: the reasoning_gym task and "
                "the reasoning_gym verifier go together (set task.verifiers={reasoning_gym: 1.0}; others may be "
                "added beside it)"]
    return _benchmark_problems(c)


def _benchmark_problems(c: AnyRunConfig) -> list[str]:
    """HumanEval's answers are functions, judged by its check programs through the code verifier; and
    task.train_on_benchmark means something for a task with no train split only."""
    if c.task.name == "humaneval" and "code" not in c.task.verifiers:
        return [f"task.name=humaneval with task.verifiers={dict(c.task.verifiers)}: HumanEval is scored by the code "
                "verifier (set task.verifiers={code: 1.0}, or start from configs/benchmarks/humaneval.yaml, which "
                "also gives a whole function room: rlvr eval MODEL configs/benchmarks/humaneval.yaml)"]
    if c.task.train_on_benchmark and c.task.name != "humaneval":
        return [f"task.train_on_benchmark=true: task {c.task.name!r} has a train split of its own; the flag is for "
                "humaneval, a benchmark without one"]
    return []


# Estimators whose baseline is the prompt's group: with G = 1 every advantage would be 0.
GROUP_ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_pp_baseline", "grpo_batch_std")


def _algorithm_problems(c: AnyRunConfig) -> list[str]:
    a, problems = c.algorithm, []
    if a.clip_epsilon_high is not None and a.clip_epsilon_high < a.clip_epsilon:
        problems.append(f"algorithm.clip_epsilon_high={a.clip_epsilon_high:g} is below algorithm.clip_epsilon="
                        f"{a.clip_epsilon:g}: clip-higher (DAPO) widens only the upper side")
    if a.objective == "gspo" and a.aggregation != "sequence_mean":
        problems.append(f"algorithm.objective=gspo needs algorithm.aggregation=sequence_mean (got "
                        f"{a.aggregation!r}): its ratio is one per sequence (Zheng et al. 2025), so token-weighted "
                        f"aggregations are undefined for it; allowed aggregations with gspo: sequence_mean")
    if a.advantage in GROUP_ESTIMATORS and c.rollout.group_size < 2:
        problems.append(f"algorithm.advantage={a.advantage} compares the completions of a prompt and needs "
                        f"rollout.group_size >= 2; with group_size=1 use one of: reinforce_pp, gae")
    if a.advantage == "gae" and a.reward_combination != "sum_then_normalize":
        problems.append("algorithm.advantage=gae learns a value of the total reward: reward_combination must be "
                        "sum_then_normalize (normalize_then_sum is for the group estimators: "
                        f"{', '.join(GROUP_ESTIMATORS)}, reinforce_pp)")
    if a.kl_placement == "reward" and a.beta == 0:
        problems.append("algorithm.kl_placement=reward with algorithm.beta=0 has no effect; set beta > 0 or "
                        "leave kl_placement=loss")
    if a.kl_placement == "loss" and a.kl_estimator == "k1" and a.beta > 0:
        problems.append("algorithm.kl_estimator=k1 in the loss has a zero-mean gradient (grad log pi), so it only "
                        "adds noise; in the loss use one of: k2, k3 (or put k1 in the reward: kl_placement=reward)")
    if a.objective == "gspo" and a.advantage == "gae":
        problems.append("algorithm.objective=gspo takes one advantage per sequence; advantage=gae gives one per "
                        f"token; with gspo use one of: {', '.join(GROUP_ESTIMATORS)}, reinforce_pp")
    problems += _sampling_problems(c)
    return problems


def _sampling_problems(c: AnyRunConfig) -> list[str]:
    a, problems = c.algorithm, []
    if c.rollout.dynamic_sampling.enabled is True and a.advantage not in GROUP_ESTIMATORS:
        problems.append(f"rollout.dynamic_sampling drops groups whose rewards tie, which carry no signal only for "
                        f"group baselines; with advantage={a.advantage} they still do. Use one of: "
                        f"{', '.join(GROUP_ESTIMATORS)}")
    if c.curriculum.enabled and c.rollout.group_size < 2:
        problems.append("curriculum needs rollout.group_size >= 2: with one sample a prompt's pass rate is 0 or 1, "
                        "so every prompt seen once would be skipped")
    top = sum(c.task.verifiers.values())  # shaping only lowers a reward
    if c.curriculum.enabled and c.curriculum.pass_threshold > top:
        problems.append(f"curriculum.pass_threshold={c.curriculum.pass_threshold:g} is above the highest reward "
                        f"{top:g} (the sum of task.verifiers weights): nothing could ever pass")
    if c.curriculum.enabled and c.curriculum.skip_below >= c.curriculum.skip_above:
        problems.append(f"curriculum.skip_below={c.curriculum.skip_below:g} must be below curriculum.skip_above="
                        f"{c.curriculum.skip_above:g}, else every prompt is skipped")
    return problems


def _correction_problems(c: AnyRunConfig) -> list[str]:
    """With top_p < 1 the sampler's log-probs are of the renormalised nucleus: with identical weights each ratio
    pi/mu is then the nucleus mass (< 1) and the KL measures the truncation, not a disagreement; and no weight can
    reach tokens the nucleus never samples. Refused rather than silently mis-measured."""
    k = c.rollout.correction
    if c.rollout.top_p < 1 and k.mode != "none":
        return [f"rollout.top_p={c.rollout.top_p:g} cannot be combined with rollout.correction.mode={k.mode}: the "
                f"sampler's log-probs are then those of the renormalised nucleus, which differ from the trainer's on "
                f"purpose; sample with top_p=1, or set rollout.correction.mode=none (with top_p < 1 the agreement "
                f"check is skipped for the same reason)"]
    return []


def _precision_problems(c: AnyRunConfig) -> list[str]:
    """Mixed fp16 needs dynamic loss scaling (fp16's smallest normal is 6e-5, so small gradients underflow to 0:
    Micikevicius et al. 2018, sec. 3.2), which rlvr does not implement; bf16 has fp32's exponent
    range and needs none. Pure fp16 (master_weights=same) stays what it was before mixed precision existed."""
    m = c.model
    if m.dtype == "float16" and m.master_weights == "float32":
        return ["model.dtype=float16 with model.master_weights=float32 (mixed fp16) needs loss scaling, which rlvr "
                "does not implement: use model.dtype=bfloat16 (fp32's exponent range, no scaling needed), or "
                "model.master_weights=same for pure fp16 weights"]
    return []


def _known_tasks() -> list[str]:
    return [*get_args(TaskName), *REGISTERED_TASKS]


def _known_verifiers() -> list[str]:
    return list(get_args(VerifierName))


def dynamic_sampling_applies(c: AnyRunConfig, world_size: int) -> bool:
    """rollout.dynamic_sampling.enabled with "auto" decided (the default run should spend no step
    on groups that all tie). Auto is on where dynamic sampling works and pays: one process (it picks prompts from
    rank-local rewards), synchronous rollouts (the next prompts depend on rewards not yet known) and a group
    baseline (only there does a tied group carry no signal; the group estimators already require G >= 2), and no
    process scorer (it scores turns after the draw, so a tie cannot be seen at the draw)."""
    setting = c.rollout.dynamic_sampling.enabled
    if setting != "auto":
        return bool(setting)
    return (world_size == 1 and c.ray.trainer_ranks == 1 and not c.rollout.engine.max_staleness
            and c.algorithm.advantage in GROUP_ESTIMATORS
            and c.episode.process_reward is None)  # a process scorer's step scores come after the draw


def with_dynamic_sampling_decided(c: AnyRunConfig, world_size: int) -> AnyRunConfig:
    """The config with rollout.dynamic_sampling.enabled a bool (what the training loop reads)."""
    on = dynamic_sampling_applies(c, world_size)
    sampling = c.rollout.dynamic_sampling.model_copy(update={"enabled": on})
    return c.model_copy(update={"rollout": c.rollout.model_copy(update={"dynamic_sampling": sampling})})
