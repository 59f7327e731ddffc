"""Typed configuration: one model per component, composed into RunConfig. Defaults live here and only here
(and in config/sections.py: the sections of the pipeline stages and of scale-out; config/reward.py: the reward).
Load order: defaults < YAML file < `dotted.key=value` overrides. Every problem (unknown key, wrong type, impossible
combination) becomes one ConfigError naming the key and what is allowed, raised before any model loads.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from rlvr.config.base import ConfigError, _Section  # ConfigError is imported from here everywhere
from rlvr.config.model import EMBEDDED_MODEL, LoraConfig, ModelConfig  # noqa: F401 - imported from here too
from rlvr.config.reward import RewardConfig  # noqa: F401 - imported from here too
from rlvr.config.rules import run_config_problems
from rlvr.config.sections import (
    CheckpointConfig,
    CriticConfig,
    DistributedConfig,
    EngineConfig,
    EpisodeConfig,
    EvalConfig,
    LoggingConfig,
    RayConfig,
    SampleConfig,
    SFTConfig,
)

AnswerMode = Literal["strict", "last_number", "latex"]  # = rlvr.verifiers.math.extract.MODES (a test checks)


class TaskConfig(_Section):
    name: str = Field("arithmetic", description="a registered task (see `rlvr.tasks.TASKS`) or 'qa' for a dataset")
    level: int = Field(1, ge=1, le=4, description="difficulty level (arithmetic: 1 = single-digit + and x; calculator: "
                       "operations per problem); evaluation uses its held-out split")
    train_levels: list[Annotated[int, Field(ge=1, le=4)]] | None = Field(
        None, min_length=1, description="train on prompts of these levels, a level drawn uniformly per prompt (e.g. "
        "[1, 2]: an easier level keeps the reward signal, rlvr/tasks/levels.py); None = task.level alone")
    focus: str | None = Field(None, description="train only on the prompts listed in this file (misses.jsonl)")
    path: str | None = Field(None, description="qa: local .jsonl/.json/.parquet file or HF hub dataset id")
    subset: str | None = Field(None, description="qa: hub dataset configuration name, e.g. 'main' for openai/gsm8k")
    split: str = Field("train", description="qa: dataset split used for training")
    eval_split: str | None = Field(None, description="qa: held-out split; None = hold out a hashed 10% of rows")
    question_field: str = Field("question", description="qa: column holding the problem text (or chat messages)")
    answer_field: str = Field("answer", description="qa: column holding the reference (GSM8K '####' or \\boxed ok)")
    format: Literal["auto", "plain", "trl", "verl"] = Field(
        "auto", description="qa: the dataset's layout (docs/data.md): plain = question_field + answer_field | trl = "
                            "TRL prompt-only ('prompt': text or chat messages) + answer_field | verl = 'prompt' "
                            "messages + reward_model.ground_truth | auto = verl with a 'reward_model' column, else "
                            "plain when question_field exists, else trl")
    bad_rows: Literal["skip", "error"] = Field("skip", description="qa: rows with a missing/unreadable answer, bad "
                                               "UTF-8/JSON or a duplicate question: skip and count them, or stop")
    instruction: str = Field("End with 'Answer: <number>'.", description="appended to every question")
    system_prompt: str | None = Field(None, description="system turn; None keeps the chat template's default")
    one_shot: bool = Field(True, description="prepend one solved example turn showing the answer format")
    phrasing: Literal["symbols", "words", "mixed", "words_new", "plain", "all"] = Field(
        "symbols", description="arithmetic only: how a problem is asked: symbols ('What is 3 + 4?') | words (a story "
        "from the training templates) | mixed (train prompts symbols or words, 1/2 each; held-out half each) | "
        "words_new (stories from templates never trained on: transfer); rlvr/tasks/phrasings.py | plain (as a user "
        "would: one user turn, no system turn, example or task.instruction; rlvr/tasks/plain.py) | all "
        "(train prompts symbols, words or plain, 1/3 each; held-out a third each)")
    verifiers: dict[str, float] = Field(default_factory=lambda: {"math": 1.0},
                                        description="verifier name -> weight in the total reward; left at this "
                                                    "default, an environment task uses its own (filesystem: none)")
    answer_mode: AnswerMode | None = Field(
        None, description="math answer extraction: strict = <answer>/\\boxed/Answer:/####; last_number adds the "
                          "last number; latex adds math-verify's reading (last LaTeX environment, fraction or "
                          "number); unset = the task's default (rlvr.verifiers.math_answer_mode)")
    verifier_timeout_s: float = Field(5.0, gt=0, description="per-completion verification time budget")
    think_prefilled: bool = Field(False, description="format: the chat template already opens <think> (trl#6966)")
    language_script: str | None = Field(None, description="language: expected script (latin, cyrillic, ...); "
                                                           "None = the reference text's script")
    code_reward_mode: Literal["fraction", "all"] = Field(
        "fraction", description="code: reward = share of unit tests passed, or 1 only when all pass")
    code_time_limit_s: float = Field(5.0, gt=0, description="code: wall-clock limit per sandboxed run")
    code_memory_mb: int = Field(512, ge=64, description="code: address-space limit and memory cgroup per run")
    code_unsandboxed: bool = Field(False, description="code: run model-written code WITHOUT bubblewrap when the "
                                                      "sandbox probe fails (logged loudly); never for untrusted models")
    gym_dataset: str = Field("basic_arithmetic", description="reasoning_gym: the procedural dataset (a name in "
                                                             "reasoning_gym.factory.DATASETS), scored by its scorer")
    gym_config: dict[str, Any] = Field(default_factory=dict, description="reasoning_gym: the dataset's config fields "
                                       "(e.g. {min_terms: 2, max_terms: 2}); seed and size are set by the split")
    gym_size: int = Field(2000, ge=1, description="reasoning_gym: train rows generated (seed 0); the held-out rows "
                                                  "come from the seed after them, minus questions also in train")
    textarena_env: str = Field("GuessTheNumber-v0", description="textarena: a single-player TextArena game id "
                                                                "(offline games only), played over several turns")
    train_on_benchmark: bool = Field(
        False, description="humaneval (a benchmark with no train split): let training draw from its 164 problems, "
                           "which every evaluation also scores (contaminated: a smoke test, never a result); "
                           "false = training on it is refused")

    @field_validator("train_levels")
    @classmethod
    def _distinct_levels(cls, levels: list[int] | None) -> list[int] | None:
        if levels is not None and len(set(levels)) != len(levels):  # [1, 1, 2] would read as a 2:1 weighting
            raise ValueError(f"task.train_levels: each level once (they are drawn uniformly), got {levels}")
        return levels


class DynamicSamplingConfig(_Section):
    """DAPO dynamic sampling (Yu et al. 2025, sec. 3.2): keep only groups whose rewards differ."""

    enabled: bool | Literal["auto"] = Field(
        "auto", description="draw prompts until prompts_per_step groups have reward spread > 0 | auto: on where it "
                            "applies (one process, synchronous rollouts, a group baseline), off elsewhere")
    max_extra_prompts: int = Field(12, ge=0, description="extra prompts per step at most; then tied groups fill up")


class CorrectionConfig(_Section):
    """Rollout correction and the engine agreement check (names as in rlvr/algorithms/correction.py).
    Mode none by default: the in-process HF engine is the trainer's own model, so its weights are 1 to fp32 noise."""

    mode: Literal["none", "tis", "mis"] = Field(
        "none", description="each token's surrogate times w = pi_old/mu (mu: the sampler): tis = min(w, cap), "
                           "truncated IS (Yao et al. 2025) | mis = 0 where w > cap, else 1 (masked IS) | none = 1")
    level: Literal["token", "sequence"] = Field("token", description="w per token, or per completion (the product)")
    cap: float = Field(2.0, gt=1, description="threshold of w (2.0, ms-swift's rollout_importance_sampling_threshold)")
    max_mismatch_kl: float | None = Field(0.01, ge=0, description="stop when KL(engine || trainer) per token exceeds "
                                                               "this (fp32 noise ~1e-10 on SmolLM2-135M); null/0 = off")


class RolloutConfig(_Section):
    group_size: int = Field(8, ge=1, description="G: completions sampled per prompt (group baselines need >= 2)")
    prompts_per_step: int = Field(4, ge=1, description="prompts per optimizer step; batch = prompts x G")
    temperature: float = Field(1.0, gt=0, description="sampling temperature for training rollouts")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling for training rollouts")
    max_new_tokens: int = Field(32, ge=1, description="completion length cap; longer ones are truncated")
    cuda_graphs: bool = Field(True, description="on a GPU, Llama-family models decode from a static KV cache with "
                                                "each step replayed from a CUDA graph; false = eager steps")
    compile_decode: bool = Field(False, description="torch.compile (inductor) the static step's decoder layer "
                                                    "(on a GPU; on a CPU for mixed precision only) before its graphs "
                                                    "are recorded: fused kernels, a few compiles a run (needs Triton "
                                                    "on a GPU, a C++ compiler on a CPU)")
    decode_attention: Literal["auto", "sdpa", "matmul"] = Field(
        "auto", description="attention of the static step (a GPU, or a mixed-precision model): sdpa (PyTorch's "
                            "fused kernels) | matmul (two batched products) | auto (matmul in fp32, else sdpa)")
    dynamic_sampling: DynamicSamplingConfig = Field(default_factory=DynamicSamplingConfig)
    correction: CorrectionConfig = Field(default_factory=CorrectionConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)


# The names below are the keys of the variant dicts (advantages.ADVANTAGES, objectives.OBJECTIVES,
# loss.AGGREGATIONS, loss.KL_ESTIMATORS); tests/test_config.py checks that the two lists agree.
AdvantageName = Literal["grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "grpo_batch_std", "gae"]
ObjectiveName = Literal["ppo_clip", "dual_clip", "gspo", "cispo"]
AggregationName = Literal["sequence_mean", "token_mean", "constant"]
KLName = Literal["k1", "k2", "k3"]


class AlgorithmConfig(_Section):
    """The GRPO family. Defaults are GRPO as in DeepSeekMath (Shao et al. 2024); configs/ holds the presets."""

    advantage: AdvantageName = Field(
        "grpo", description="grpo (r-mean)/(std+eps) per group | dr_grpo r-mean | rloo leave-one-out mean | "
                            "reinforce_pp batch-whitened r | reinforce_pp_baseline group mean, then batch "
                            "whitening | grpo_batch_std group mean / batch std | gae learned critic (PPO)")
    std_epsilon: float = Field(1e-4, gt=0, description="epsilon in (r - mean) / (std + epsilon)")
    reward_combination: Literal["sum_then_normalize", "normalize_then_sum"] = Field(
        "sum_then_normalize", description="several verifiers: estimate advantages of the weighted reward sum, "
                                          "or of each verifier's score and sum them weighted (GDPO)")
    objective: ObjectiveName = Field(
        "ppo_clip", description="per-token objective: ppo_clip (with clip_epsilon_high = DAPO clip-higher) | "
                                "dual_clip | gspo (sequence ratio) | cispo (clipped detached IS weight)")
    clip_epsilon: float = Field(0.2, gt=0, lt=1, description="PPO clip range, lower side (DeepSeekMath: 0.2)")
    clip_epsilon_high: float | None = Field(
        None, gt=0, description="upper side of the clip (DAPO clip-higher: 0.28; CISPO: cap of the IS weight - 1); "
                                "None = clip_epsilon")
    dual_clip_c: float = Field(3.0, gt=1, description="dual clip: bound c on -ratio*A for negative A (Ye et al. 2020)")
    beta: float = Field(0.04, ge=0, description="KL coef. to the frozen reference (DeepSeekMath 0.04); 0 = none loaded")
    kl_estimator: KLName = Field("k3", description="KL estimator: k1 log-ratio | k2 squared/2 | k3 (GRPO paper)")
    kl_placement: Literal["loss", "reward"] = Field(
        "loss", description="KL as a loss term (GRPO) or subtracted from the reward before advantages (PPO/RLHF)")
    entropy_coef: float = Field(0.0, ge=0, description="entropy bonus in the loss (0 = entropy is only logged)")
    updates_per_batch: int = Field(1, ge=1, description="mu: optimizer passes over each rollout batch")
    aggregation: AggregationName = Field(
        "sequence_mean", description="per-token loss -> scalar: sequence_mean (GRPO) | token_mean over the batch "
                                     "(DAPO) | constant = sum / (batch x max_new_tokens) (Dr. GRPO)")
    mask_truncated: bool = Field(False, description="DAPO overlong filtering: truncated completions get no loss")

    @property
    def clip_high(self) -> float:
        return self.clip_epsilon if self.clip_epsilon_high is None else self.clip_epsilon_high


class CurriculumConfig(_Section):
    """Pass-rate curriculum: groups that always or never pass teach nothing (all advantages are 0)."""

    enabled: bool = Field(False, description="skip prompts whose running pass rate is outside (skip_below, skip_above)")
    pass_threshold: float = Field(1.0, description="a completion passes when its total reward >= this")
    skip_below: float = Field(0.0, ge=0, le=1, description="skip prompts with running pass rate <= this")
    skip_above: float = Field(1.0, ge=0, le=1, description="skip prompts with running pass rate >= this")
    decay: float = Field(0.5, ge=0, lt=1, description="running estimate = decay*old + (1-decay)*newest group's rate")
    revisit_probability: float = Field(0.1, ge=0, le=1, description="chance a skipped prompt is drawn (to recover)")


class OptimizerConfig(_Section):
    lr: float = Field(1e-5, gt=0, description="AdamW learning rate")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = Field(
        (0.9, 0.99), description="AdamW betas, each in [0, 1)")
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clipping by global norm")
    warmup_steps: int = Field(0, ge=0, description="linear learning-rate warm-up")
    micro_batch_size: int = Field(16, ge=1, description="completions per forward/backward pass")


class RunConfig(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    critic: CriticConfig = Field(default_factory=CriticConfig)
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    sample: SampleConfig = Field(default_factory=SampleConfig)
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
    episode: EpisodeConfig = Field(default_factory=EpisodeConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    # 30: with dynamic sampling (auto) the default run's training fits in 10 minutes on a 2-core CPU
    max_steps: int = Field(30, ge=1, description="optimizer steps (one rollout batch each when mu = 1)")
    max_minutes: float | None = Field(None, gt=0, description="also end training after the step in which this "
                                      "much training time (resumes included) has passed; saved and evaluated as at "
                                      "max_steps")
    seed: int = Field(0, description="seeds torch, Python and the task generators")
    output_dir: str | None = Field(None, description="run directory (must be new or empty); None = runs/<date-time>")
    save_every: int = Field(0, ge=0, description="full checkpoint (weights, optimizer, RNG, data cursor) every N "
                                                 "steps; one is also written at the end and on SIGTERM/SIGINT")
    samples_per_step: int = Field(4, ge=0, description="completions per step written to samples.jsonl")
    group_view: bool = Field(True, description="one group per step to groups.jsonl: tokens with their advantage and "
                                               "the update's ratio (the dashboard's group view)")
    # DeepSeek-R1's "aha moment" is the policy learning to re-check itself; metrics.jsonl's reflection_rate is the
    # share of completions with one of these phrases (whole words, any case; rlvr/metrics/diagnostics.py)
    reflection_phrases: list[str] = Field(
        default_factory=lambda: ["wait", "let me check", "let me re-check", "let me recheck", "let me verify",
                                 "double-check", "double check", "re-examine", "on second thought",
                                 "let me reconsider", "i made a mistake", "that's not right"],
        description="self-correction phrases counted in metrics.jsonl's reflection_rate (case-insensitive; "
                    "[] turns the metric off; a blank phrase is refused)")
    threads: int = Field(0, ge=0, description="torch CPU threads (0 = all cores)")

    @field_validator("reflection_phrases")
    @classmethod
    def _no_blank_phrase(cls, phrases: list[str]) -> list[str]:
        if any(not p.strip() for p in phrases):
            raise ValueError(f"reflection_phrases: a blank phrase in {phrases} would match nothing; remove it "
                             "([] turns the metric off)")
        return phrases

    @model_validator(mode="after")
    def _check_combinations(self) -> "RunConfig":
        for problem in run_config_problems(self):
            raise ValueError(problem)
        return self

    @property
    def batch_size(self) -> int:
        return self.rollout.prompts_per_step * self.rollout.group_size

    @property
    def micro_batch_size(self) -> int:
        return min(self.optimizer.micro_batch_size, self.batch_size)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """['a.b=1', 'seed=3'] -> {'a': {'b': 1}, 'seed': 3}; values are parsed as YAML scalars/lists."""
    tree: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not of the form dotted.key=value")
        node = tree
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {part!r} is set both as a value and as a section")
        node[parts[-1]] = _override_value(item, raw)
    return tree


def _override_value(item: str, raw: str) -> Any:
    """Lists, mappings and null are parsed as YAML; scalars stay text and the typed field converts them, so
    `output_dir=2024` stays a path while `max_steps=20` still becomes an int (pydantic's lax parsing)."""
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise ConfigError(f"override {item!r}: value is not valid YAML ({str(err).splitlines()[0]})") from None
    if isinstance(value, str) and raw.strip()[:1] in ("'", '"'):
        return value  # a quoted YAML string ('rlvr config' quotes defaults that way): its text, quotes removed
    return value if isinstance(value, (list, dict)) or value is None else raw.strip()


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def validate_config(data: dict[str, Any]) -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err)) from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Build the run config from defaults, an optional YAML file and dotted overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            what = "is a directory, not a YAML file" if path.is_dir() else "does not exist"
            raise ConfigError(f"config file {str(path)!r} {what}")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise ConfigError(f"config file {str(path)!r} is not valid YAML (UTF-8): {err}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {str(path)!r} must hold a mapping of sections, not {type(data).__name__}")
    return validate_config(_merge(data, parse_overrides(overrides or [])))


def describe_validation_error(err: ValidationError) -> str:
    lines = []
    for item in err.errors():
        key = ".".join(str(p) for p in item["loc"])
        if item["type"] == "extra_forbidden":
            lines.append(_unknown_key_message(item["loc"]))
        elif item["type"] == "value_error":
            lines.append(str(item["msg"]).removeprefix("Value error, "))
        else:
            lines.append(f"{key}: {item['msg']} (got {item.get('input')!r})")
    return "invalid config: " + "; ".join(lines)


def _unknown_key_message(loc: tuple[Any, ...]) -> str:
    section: type[BaseModel] = RunConfig
    for part in loc[:-1]:
        annotation = section.model_fields[str(part)].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            break
        section = annotation
    allowed = list(section.model_fields)
    key = ".".join(str(p) for p in loc)
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{hint}; allowed here: {', '.join(allowed)}"


def dump_config(config: RunConfig, path: Path) -> None:
    path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
