"""A learned reward model as one more reward component.

DeepSeek-R1's last RL stage (section 2.3.4) adds a learned "helpful and harmless" preference score to the
rule-based rewards. Here that is any Hugging Face sequence-classification model (`reward.model_path`),
exposed to the Rewarder as the TRL-style reward function named "reward_model" with weight
`reward.model_weight`:

    reward[i] = sum_k weight_k * verifier_k[i]  +  model_weight * rm_score[i]

What the score is (`preference_score`), a probability in [0, MAX_SCORE] (the Rewarder clamps no score):
  * num_labels = 1 (Bradley-Terry reward models, e.g. TRL's RewardTrainer): sigmoid(logit), the modelled
    probability that this completion is preferred over one scored 0. The map is monotonic, so the order of a
    group's completions, which is all GRPO's group-normalised advantage uses, is the model's own order.
  * num_labels >= 2 (classifiers): the softmax probability of the last label, by convention the
    "good"/"helpful"/"positive" one (label 1 of a binary classifier).
  * capped at MAX_SCORE < 1, so a reward-model verdict is never CORRECT: a learned preference is not a
    verified answer, and must never count as solved in evaluation or curriculum statistics.

What it reads: the question (the last user turn, which TRL-style functions receive as `prompts`; the task's
one-shot example and system turn are scaffolding, not what is judged) and the completion, rendered with the
reward model's own chat template as a user turn and an assistant turn (plain "question\\n\\ncompletion" when it
has none). Sequences are right-padded, so every token keeps the position it has alone (batched == unbatched);
the score is the model's logit at the last non-padding token (transformers' pooling), and a text longer than
the model's context is cut from the left, keeping the end of the completion.

It runs in the trainer's process, on `reward.model_device` (default: model.device), batched
`reward.model_batch_size` completions at a time, under torch.inference_mode. RewardService calls reward
functions in its parent process and ships only (verifier factory, task config) to its workers, so the model
is never pickled or copied into a worker.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import torch

from rlvr.errors import UserFacingError

if TYPE_CHECKING:
    from rlvr.config.run import ModelConfig, RewardConfig

NAME = "reward_model"  # the component name; evaluation excludes it from correctness gating
MAX_SCORE = 1.0 - 1e-6  # < 1: rewards.verdict_from_value calls a score from 1 up CORRECT
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class RewardModelError(UserFacingError, RuntimeError):
    """A reward model that cannot be loaded or used as one; printed by the CLI as one line."""


@dataclass(frozen=True)
class RewardModelSettings:
    path: str  # reward.model_path as the user wrote it (error messages quote it)
    batch_size: int
    device: str
    dtype: str
    trust_remote_code: bool
    setting: str = "reward.model_path"  # the config key errors name (episode.process_reward for a step scorer)

    @classmethod
    def from_config(cls, reward: RewardConfig, model: ModelConfig) -> "RewardModelSettings | None":
        """From the two sections it reads (not the whole run config); None without reward.model_path."""
        if reward.model_path is None:
            return None
        return cls(reward.model_path, reward.model_batch_size, reward.model_device or model.device, model.dtype,
                   model.trust_remote_code)


def preference_score(logits: torch.Tensor) -> torch.Tensor:
    """[N, L] classifier logits -> [N] scores in [0, MAX_SCORE]: sigmoid of the one logit (L = 1), else the
    softmax probability of the last label (module docstring)."""
    if logits.dim() != 2 or logits.shape[1] < 1:
        raise ValueError(f"expected [N, num_labels] logits, got shape {tuple(logits.shape)}")
    logits = logits.float()
    probability = torch.sigmoid(logits[:, 0]) if logits.shape[1] == 1 else torch.softmax(logits, dim=-1)[:, -1]
    return probability.clamp(0.0, MAX_SCORE)


class RewardModel:
    """A TRL-style reward function: `rm(prompts, completions, **columns) -> list[float]` (one per completion)."""

    __name__ = NAME  # what rewards.call_reward_function names in error verdicts

    def __init__(self, model: Any, tokenizer: Any, batch_size: int, max_length: int | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.max_length = batch_size, max_length
        self.device = next(model.parameters()).device

    @classmethod
    def load(cls, settings: RewardModelSettings) -> "RewardModel":
        model, tokenizer = _load(settings)
        limit = getattr(model.config, "max_position_embeddings", None)
        return cls(model, tokenizer, settings.batch_size, limit if isinstance(limit, int) else None)

    def render(self, prompt: str, completion: str) -> str:
        if self.tokenizer.chat_template:
            turns = [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]
            return self.tokenizer.apply_chat_template(turns, tokenize=False)
        return f"{prompt}\n\n{completion}"

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        # A chat template writes its own special tokens; plain text gets the tokenizer's (e.g. BOS).
        special = not self.tokenizer.chat_template
        ids = self.tokenizer(list(texts), add_special_tokens=special)["input_ids"]
        limit = self.max_length
        return [row[-limit:] if limit and len(row) > limit else row for row in ids]  # keep the completion's end

    @torch.inference_mode()
    def _scores(self, rows: list[list[int]]) -> torch.Tensor:
        """Token rows -> [N] scores; batches of similar length (longest first) to waste little padding."""
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        scores = torch.zeros(len(rows), dtype=torch.float32)  # host: returned as a list of floats
        pad = self.tokenizer.pad_token_id
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            width = len(rows[chunk[0]])
            # host: built on the host from token lists, moved to the model's device below
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)  # [b, T], right-padded
            mask = torch.zeros((len(chunk), width), dtype=torch.long)  # [b, T], 1 = real token; host: as ids
            for j, i in enumerate(chunk):
                ids[j, :len(rows[i])], mask[j, :len(rows[i])] = torch.tensor(rows[i]), 1  # host: as ids
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits  # [b, L]
            scores[chunk] = preference_score(logits).cpu()
        return scores

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
        if not completions:
            return []
        texts = [self.render(p, c) for p, c in zip(prompts, completions)]
        return self._scores(self._encode(texts)).tolist()

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], **columns: Any) -> list[float]:
        del columns  # dataset columns: a reward model judges the text alone
        return self.score(prompts, completions)


def _load(settings: RewardModelSettings) -> tuple[Any, Any]:
    """The classifier and its tokenizer, frozen and in eval mode on settings.device; any problem is one
    RewardModelError naming the setting (reward.model_path, or episode.process_reward for a step scorer)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from rlvr.model.load import ModelError, resolve_model_path

    where = f"{settings.setting}={settings.path!r}"
    if settings.device.startswith("cuda") and not torch.cuda.is_available():
        raise RewardModelError(f"{where}: device {settings.device} requested (reward.model_device or model.device) "
                               "but torch sees no CUDA GPU here")
    hf_logging.disable_progress_bar()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its load report of missing weights is replaced by our one-line error
    try:
        path = resolve_model_path(settings.path)
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=settings.trust_remote_code)
        model, info = AutoModelForSequenceClassification.from_pretrained(
            path, dtype=_DTYPES[settings.dtype], trust_remote_code=settings.trust_remote_code,
            output_loading_info=True)
    except (ModelError, OSError, ValueError, KeyError) as err:
        raise RewardModelError(f"{where}: could not load a sequence-classification model: {_first_line(err)}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    missing = sorted(info.get("missing_keys", ()))
    if missing:  # e.g. a causal LM: transformers would silently put a random head on it
        architectures = ", ".join(getattr(model.config, "architectures", None) or ["unknown"])
        raise RewardModelError(f"{where} is not a trained reward model ({architectures}; weights missing: "
                               f"{', '.join(missing[:3])}); give a sequence-classification checkpoint")
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise RewardModelError(f"{where}: its tokenizer has neither a padding nor an end-of-sequence token")
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id  # the pooling finds the last token by this id
    model.to(settings.device)
    model.eval()
    model.requires_grad_(False)
    return model, tokenizer


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def reward_model_components(reward: RewardConfig, model: ModelConfig) -> dict[str, tuple[RewardModel, float]]:
    """{"reward_model": (model, reward.model_weight)} when reward.model_path is set, else {}."""
    settings = RewardModelSettings.from_config(reward, model)
    if settings is None:
        return {}
    return {NAME: (RewardModel.load(settings), reward.model_weight)}


__all__ = ["MAX_SCORE", "NAME", "RewardModel", "RewardModelError", "RewardModelSettings", "preference_score",
           "reward_model_components"]
