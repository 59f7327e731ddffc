"""The `reward` section (split from config/run.py): the verifier workers, DAPO's length shaping, the
learned reward model, your own reward functions, and the control runs. Torch-free, as every config module: the
functions are named here and imported when the rewarder is built (rlvr/rewards/functions.py)."""
from __future__ import annotations

import os
import re
from typing import Any, Literal

from pydantic import Field, field_validator

from rlvr.config.base import _Section

# "package.module:attribute" or "path/to/file.py:attribute"; the attribute may be dotted (Class.method)
FUNCTION_SPEC = re.compile(r"^[^:\s][^:]*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class RewardConfig(_Section):
    workers: int = Field(2, ge=0, description="verifier worker processes (0 = verify inside the trainer process)")
    deadline_s: float = Field(30.0, gt=0, description="per-sample deadline in a worker; past it: timeout verdict")
    retries: int = Field(1, ge=0, description="re-runs of a sample whose worker crashed, then an error verdict")
    overlong_buffer: int = Field(0, ge=0, description="DAPO soft overlong punishment: the last N tokens before "
                                                      "max_new_tokens cost up to overlong_penalty (0 = off)")
    overlong_penalty: float = Field(1.0, ge=0, description="reward lost by a completion that reaches max_new_tokens")
    model_path: str | None = Field(None, description="a HF sequence-classification reward model added as one more "
                                                     "reward component 'reward_model' (R1's last RL pass)")
    model_weight: float = Field(1.0, ge=0, description="weight of the reward model's score in the total reward")
    model_batch_size: int = Field(16, ge=1, description="completions per reward-model forward pass")
    model_device: str | None = Field(None, pattern=r"^(cpu(:0)?|cuda(:\d+)?|mps)$",
                                     description="device for the reward model; None = model.device")
    functions: dict[str, float] = Field(
        default_factory=dict, description="your own TRL-style reward functions: 'module:function' (importable from "
        "the working directory or PYTHONPATH) or 'path/to/file.py:function' -> weight in the total reward. Called "
        "in the trainer process on the batch as f(prompts=..., completions=..., completion_ids=..., **columns) -> "
        "one float (any sign, any size up to 1e15) or None (not applicable) per completion; they shape the reward and "
        "best-of-k, while held-out correctness stays the verifiers' (task.verifiers)")
    function_format: Literal["text", "conversational"] = Field(
        "text", description="what reward.functions receive: text (prompts = the last user turn, completions = "
                            "strings) | conversational (TRL's conversational format: prompts = message lists, "
                            "completions = [[{'role': 'assistant', 'content': ...}]])")
    control: Literal["none", "random", "format_only"] = Field(
        "none", description="control runs (`rlvr control`): none | random (each step's rewards shuffled over the "
                            "batch's completions: the real mean, no information about the answer) | format_only "
                            "(format verifiers as they are; answer verifiers pay for a readable answer, right or "
                            "wrong; reward functions and the reward model weigh 0); evaluation stays real")

    @field_validator("functions", mode="before")
    @classmethod
    def _no_true_weights(cls, functions: Any) -> Any:
        # pydantic would read `true` as the weight 1.0: a YAML slip, not a weight
        for spec, weight in (functions.items() if isinstance(functions, dict) else ()):
            if isinstance(weight, bool):
                raise ValueError(f"reward.functions: the weight of {spec!r} is {str(weight).lower()}, not a number")
        return functions

    @field_validator("functions")
    @classmethod
    def _function_specs(cls, functions: dict[str, float]) -> dict[str, float]:
        for spec in functions:  # weights: finite by _Section's allow_inf_nan=False
            if not FUNCTION_SPEC.match(spec):
                raise ValueError(f"reward.functions: {spec!r} is not 'module:function' or 'path/to/file.py:function'")
        # a file's path made absolute where it is read, so config.yaml names the same file for a resume and for
        # `rlvr eval RUN` started from another directory
        return {_absolute_file(spec): weight for spec, weight in functions.items()}


def _absolute_file(spec: str) -> str:
    target, _, attribute = spec.rpartition(":")
    return f"{os.path.abspath(os.path.expanduser(target))}:{attribute}" if target.endswith(".py") else spec
