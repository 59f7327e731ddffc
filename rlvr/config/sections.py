"""Config sections of evaluation, checkpoints, the pipeline stages (SFT, rejection sampling), scale-out (torchrun),
multi-turn episodes and the PPO critic. RunConfig in run.py composes them; defaults live here and only here, as for
the sections in run.py."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from rlvr.config.base import _Section


class EvalConfig(_Section):
    every: int = Field(0, ge=0, description="evaluate every N steps during training (0 = only at the end)")
    size: int = Field(200, ge=1, description="held-out problems per evaluation")
    samples: int = Field(4, ge=1, description="n samples per problem for pass@1 (R1: mean correctness of n)")
    temperature: float = Field(0.6, gt=0, description="sampling temperature for pass@1 (R1 paper: 0.6)")
    top_p: float = Field(0.95, gt=0, le=1, description="nucleus sampling for pass@1 (R1 paper: 0.95)")
    batch_size: int = Field(64, ge=1, description="prompts per generation call during evaluation")
    at_end: bool = Field(True, description="evaluate the final policy on the held-out split")
    greedy: bool = Field(True, description="also measure greedy accuracy (one more generation pass)")
    ks: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [1, 4], description="k for pass@k, maj@k, best-of-k (k > samples is skipped)")
    answer_budget: int = Field(16, ge=1, description="answer tokens after a forced </think> (--think-budget/--scaling)")
    scaling_n: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [1, 4, 16], description="eval --scaling: N for maj@N, best-of-N, pass@N (max(N) drawn)")
    scaling_budgets: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [8, 16, 32, 64], description="eval --scaling: pass@1, think section capped at B tokens")
    # a model trained on one level is measured on the others (and on new phrasings) in the same run
    sets: list[dict[str, Any]] | None = Field(
        None, min_length=1, description="evaluate several task variants, each a partial task override (e.g. "
        "[{level: 2}, {level: 3}]): eval.size held-out prompts of each, reported per set (breakdown 'set'); "
        "None = task's own held-out prompts")
    offset: int = Field(0, ge=0, description="skip the first N held-out prompts (of each set): a second look on "
                                             "problems an earlier evaluation did not use")
    # with 5 sets x 2 measures x 4 stages, one fall beyond 2 SE is expected by chance alone (each is a
    # ~2.3% one-sided test); a fall is only believed when it holds on problems the first look did not use
    recheck_size: int = Field(0, ge=0, description="recipes: when a stage's pass@1 or greedy accuracy on a set falls "
                              "beyond 2 SE, both models are evaluated again on this many further held-out problems "
                              "of that set (after the first eval.size) and the summary says whether the fall holds; "
                              "0 = off")


class SFTConfig(_Section):
    """Supervised fine-tuning (`rlvr sft`): the R1 cold start and the SFT on rejection-sampled traces.
    The optimizer section (lr, warm-up, clipping, micro_batch_size) is shared with RL."""

    data: str | None = Field(None, description="chat data: .jsonl/.json/.parquet file, saved dataset directory or hub "
                                               "id; 'cold_start' = worked solutions generated for task.name offline")
    subset: str | None = Field(None, description="hub dataset configuration name")
    split: str = Field("train", description="dataset split")
    messages_field: str = Field("messages", description="column of chat turns [{role, content}, ...]")
    prompt_field: str = Field("prompt", description="used when there is no messages column: prompt text or turns")
    completion_field: str = Field("completion", description="used with prompt_field: the assistant's answer")
    train_on: Literal["last_assistant", "assistant"] = Field(
        "last_assistant", description="loss on the last assistant turn only (earlier ones are context, e.g. the "
                                      "task's one-shot example) or on every assistant turn")
    epochs: int = Field(2, ge=1, description="passes over the data")
    batch_size: int = Field(16, ge=1, description="sequences per optimizer step")
    max_length: int = Field(1024, ge=8, description="tokens per example; longer rows are skipped and counted")
    batching: Literal["shared_prefix", "length_grouped", "padding_free"] = Field(
        "shared_prefix", description="shared_prefix: packed as the RL update, the rows' common prompt opening once "
                                     "(0.54x length_grouped's time, bench/sft_layouts.py); length_grouped: "
                                     "micro-batches of similar length (little padding); padding_free: rows packed "
                                     "into one sequence with per-row positions")
    bad_rows: Literal["skip", "error"] = Field("skip", description="no usable assistant turn: skip+count it, or stop")
    cold_start_size: int = Field(0, ge=0, description="cold_start rows to generate (0 = one per train problem)")
    # R1 sec. 2.3.3 mixes ~200k non-reasoning rows into its 800k SFT rows so that the model keeps its ordinary
    # answers: here, e.g., the base model's own verified answers to plain questions.
    mix_data: str | None = Field(None, description="chat data mixed into sft.data (any form sft.data takes), e.g. "
                                                   "rows that keep the model's ordinary answers")
    mix_ratio: float = Field(0.0, ge=0, le=0.9, description="share of the training rows drawn from sft.mix_data "
                                                           "(with replacement when it holds too few); at most 0.9, "
                                                           "9 mixed rows per row of sft.data")


class SampleConfig(_Section):
    """Rejection sampling (`rlvr sample`, R1 stage 3); with a larger teacher and a `student` it is distillation."""

    samples: int = Field(8, ge=1, description="N completions sampled per prompt")
    keep: int = Field(1, ge=1, description="best k verified-correct completions kept per prompt")
    select: Literal["shortest", "reward"] = Field("shortest", description="which correct completions are best: "
                                                  "fewest tokens, or highest total reward (format, language, ...)")
    prompts: int = Field(512, ge=1, description="distinct train prompts to sample (fewer if the split is smaller)")
    temperature: float = Field(1.0, gt=0, description="sampling temperature")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling")
    batch_size: int = Field(32, ge=1, description="prompts per generation call")
    mix_path: str | None = Field(None, description="general chat data (JSONL with messages) mixed into the output")
    mix_ratio: float = Field(0.0, ge=0, lt=1, description="share of output rows taken from mix_path")
    output: str | None = Field(None, description="SFT dataset written (JSONL); None = RUN/sft_data.jsonl")
    student: str | None = Field(None, description="distillation: the student model, whose tokenizer is checked "
                                                  "against the teacher's traces before sampling")


class DistributedConfig(_Section):
    """torch.distributed under torchrun; read only when torchrun starts WORLD_SIZE > 1 ranks."""

    strategy: Literal["ddp", "fsdp2"] = Field("ddp", description="ddp: every rank holds the whole policy; fsdp2: "
                                                                "parameters, gradients and optimizer state sharded")
    backend: Literal["auto", "gloo", "nccl"] = Field("auto", description="auto: nccl on CUDA, gloo on CPU")


class EngineConfig(_Section):
    """Where rollouts are sampled. Only `hf` shares the trainer's weights; the others
    hold a copy that is synced after every update and then checked on `agreement_rows` sequences."""

    kind: Literal["hf", "hf_process", "vllm"] = Field(
        "hf", description="hf: transformers in the trainer process, the policy itself (no sync) | hf_process: a "
                          "transformers copy in a child process, weights broadcast over torch.distributed gloo | "
                          "vllm: vLLM (pip install 'rlvr[vllm]', GPU)")
    max_staleness: int = Field(0, ge=0, le=1, description=(
        "0: each step samples with the weights it updates | 1: step n+1 is sampled while step n updates "
        "(asynchronous; needs an engine with its own weights; correct with rollout.correction)"))
    agreement_rows: int = Field(2, ge=0, description="sequences teacher-forced by engine and trainer after each sync; "
                                                    "their mismatch KL is checked against correction.max_mismatch_kl")
    threads: int = Field(0, ge=0, description="hf_process: torch threads of the engine process (0 = torch's default)")
    vllm_mode: Literal["colocate", "server"] = Field(
        "colocate", description="colocate: vLLM in the trainer process, slept during the update | server: a "
                                "separate `vllm serve` at vllm_server_url, weights sent over NCCL")
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="colocate: vLLM's share of GPU memory")
    vllm_server_url: str | None = Field(None, description="server mode: http://host:port of the vLLM server "
                                                          "(`VLLM_SERVER_DEV_MODE=1 vllm serve ...`: docs/scaling.md)")
    vllm_request_timeout_s: float = Field(600.0, gt=0, description="server mode: the longest one HTTP call to the "
                                                                   "server (a generation, a weight update) may take "
                                                                   "before it is an error")
    vllm_sleep: bool = Field(True, description="colocate: free vLLM's KV cache and weights during the update")


class RayConfig(_Section):
    """Ray for several machines: with trainer_ranks=1 the rollout engine and the verifier workers
    become Ray actors (the trainer is the driver); with trainer_ranks=N the N trainer ranks become Ray actors, each
    with its own in-process engine and verifiers, as under torchrun. `pip install 'rlvr[ray]'`. No algorithm code
    runs in the Ray layer."""

    enabled: bool = Field(False, description="run on Ray: the rollout engine and the verifiers as actors, or with "
                                             "trainer_ranks > 1 the trainer ranks")
    address: str | None = Field(None, description="None: start a local Ray cluster | 'auto' or ray://host:port: join "
                                                  "an existing one")
    verifier_actors: int = Field(2, ge=1, description="Ray actors that run the verifiers")
    engine_cpus: float = Field(1.0, gt=0, description="CPUs reserved for the rollout engine actor")
    engine_gpus: float = Field(0.0, ge=0, description="GPUs reserved for the rollout engine actor")
    trainer_ranks: int = Field(1, ge=1, description="1: the trainer is the `rlvr train` process | N > 1: N trainer "
                                                    "ranks as Ray actors in one placement group (torch.distributed "
                                                    "with distributed.strategy, as torchrun's N ranks)")
    trainer_cpus: float = Field(1.0, gt=0, description="CPUs reserved for each trainer-rank actor")
    trainer_gpus: float = Field(0.0, ge=0, description="GPUs reserved for each trainer-rank actor: 0 or 1 (one GPU "
                                                       "per rank, as torchrun)")
    trainer_start_timeout_s: float = Field(600.0, gt=0, description="deadline to place the trainer ranks and "
                                                                    "start their actors (busy cluster: an error)")


class WandbConfig(_Section):
    """Weights & Biases (`pip install 'rlvr[wandb]'`): on when a project is named."""

    project: str | None = Field(None, description="W&B project; set = log metrics and completion tables to W&B")
    entity: str | None = Field(None, description="W&B team or user; None = the logged-in account's default")
    name: str | None = Field(None, description="W&B run name; None = W&B picks one")
    mode: Literal["online", "offline"] = Field("online", description="offline: write under RUN/wandb, upload later "
                                                                      "with `wandb sync`")

    @field_validator("project", "entity", "name")
    @classmethod
    def _not_blank(cls, value: str | None, info: ValidationInfo) -> str | None:
        # `logging.wandb.project=` would otherwise switch W&B off without a word (a blank project means "unset")
        if value is not None and not value.strip():
            raise ValueError(f"logging.wandb.{info.field_name} is blank: give a name, or leave it out")
        return value


class LoggingConfig(_Section):
    """What a run shows and where its metrics go besides metrics.jsonl/samples.jsonl, which are always
    written."""

    progress: Literal["auto", "bar", "lines", "off"] = Field(
        "auto", description="long phases (training, evaluation, sampling): bar = a live bar with rate and ETA | "
                            "lines = a plain line every progress_interval_s | auto = bar on a terminal, else lines")
    progress_interval_s: float = Field(30.0, gt=0, description="lines mode: seconds between two progress lines")
    tensorboard: bool = Field(False, description="also write TensorBoard events to RUN/tensorboard "
                                                 "(pip install 'rlvr[tensorboard]')")
    wandb: WandbConfig = Field(default_factory=WandbConfig)


class EpisodeConfig(_Section):
    """Multi-turn episodes: read only when task.name names an environment task (rlvr/agents). Budgets
    cut an episode and mark it truncated; the credit mode says which advantage each model turn's tokens get."""

    max_turns: int = Field(4, ge=1, description="model turns per episode; a tool call past the last is cut")
    tokens_per_turn: int = Field(48, ge=1, description="sampled tokens in one model turn")
    tokens_per_episode: int = Field(192, ge=1, description="all tokens after the prompt (sampled + environment)")
    tool_time_limit_s: float = Field(2.0, gt=0, description="wall-clock limit of one tool call")
    turn_time_limit_s: float = Field(10.0, gt=0, description="wall-clock limit of all of one turn's tool calls "
                                                             "(one episode's); calls past it are errors, not run")
    episode_time_limit_s: float = Field(30.0, gt=0, description="all tool time of one episode; spent, the episode "
                                                                "ends truncated (stop reason time)")
    tool_workers: int = Field(32, ge=1, description="episodes whose tool calls run at once (each episode's calls "
                                                    "in order); >= rows per batch: a turn waits one turn budget")
    observation_role: Literal["tool", "user"] = Field(
        "tool", description="role of the environment's turns (and of the tool turns in a task's worked examples); "
                            "user for models never trained on a tool role (SmolLM2: docs/agents.md)")
    list_tools: bool = Field(True, description="declare the tools to the model (chat template tools=, else a system "
                                               "message); false: the task's worked examples alone show them")
    state_weight: float = Field(1.0, ge=0, description="weight of the environment's final-state verdict in the "
                                                       "reward (environments that have a state to check)")
    partial_credit: bool = Field(False, description="filesystem: score the share of paths that match, not all-or-"
                                                    "nothing")
    credit: Literal["outcome", "process"] = Field(
        "outcome", description="outcome: one GRPO advantage per episode on all its sampled tokens; process: "
                               "DeepSeekMath's process supervision, normalized step rewards summed from each turn on")
    process_reward: str | None = Field(None, description="a step scorer 'module:function' (turn text, prompt -> "
                                                         "float) or a HF sequence-classification model directory")
    process_weight: float = Field(1.0, ge=0, description="credit=process: scale of the (group-normalised) process "
                                                         "advantage added to the outcome advantage")


class CriticConfig(_Section):
    """The learned value function of the PPO baseline (algorithm.advantage=gae); unused otherwise."""

    lr: float = Field(1e-5, gt=0, description="critic AdamW learning rate (verl's critic default: 1e-5)")
    value_clip: float | None = Field(0.5, gt=0, description="PPO value clipping range (verl: 0.5); None = off")
    gamma: float = Field(1.0, gt=0, le=1, description="GAE discount (1.0 for episodic LM outputs, as verl)")
    lam: float = Field(0.95, ge=0, le=1, description="GAE lambda (Schulman et al. 2016)")


class CheckpointConfig(_Section):
    """Runs that survive: atomic checkpoints under RUN/checkpoints, exact resume, step guards."""

    resume: str | None = Field(None, description="'auto' = continue output_dir from its newest complete checkpoint "
                                                 "(start fresh when it has none); a run directory = continue it")
    resume_force: bool = Field(False, description="resume even when keys that decide exactness (model, G, batch, "
                                                  "seed, algorithm, ...) differ from the saved config")
    save_total_limit: int = Field(2, ge=1, description="complete checkpoints kept (old go once a newer is complete)")
    max_consecutive_skips: int = Field(3, ge=1, description="non-finite steps skipped in a row; then stop, diagnosed")
    # the optimizer state (AdamW: two fp32 numbers per weight) is twice the weights on disk, and only a
    # run that will be continued needs it
    save_final: Literal["full", "model", "none"] = Field(
        "full", description="what the end of a run writes: full = RUN/final (weights, tokenizer, config) and a last "
                            "checkpoint with the optimizer state, so --resume can go on to more steps | model = "
                            "RUN/final only (what rlvr eval and a recipe's next stage load) | none = neither (the "
                            "logs, the evaluation and any save_every checkpoints stay)")
