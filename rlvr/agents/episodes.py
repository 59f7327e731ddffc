"""The episode driver (issue 26): G episodes per prompt, turn by turn, returned as one RolloutBatch.

Token-in, token-out. Each row's completion is one token sequence: every model turn's ids exactly as the engine
sampled them (`MultiTurnEngine.continue_tokens`), then the environment's turn tokenized on its own and appended
(rlvr/agents/chat.py). The text of a model turn is decoded for the environment and the logs only; it is never
encoded again, so what the update trains on is what was sampled (re-tokenizing a conversation silently changes the
ids, and the update is then off-policy: the issue's first complaint about multi-turn trainers). The completion mask
is 1 on sampled tokens only, so environment tokens carry no loss and no KL, and their (absent) sampling log-probs
are 0 and never read; the log-prob forwards still attend to them (rlvr/model/logprobs.py takes rows with holes).

Budgets (protocol.Budgets): a turn gets at most tokens_per_turn sampled tokens and never more than the episode has
left; an environment turn that would not fit the episode's budget ends it. A cut episode is truncated (DAPO's
overlong filtering and penalty then apply as to a cut completion). The trajectory always ends with a sampled token.
"""
from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field, replace

import torch

from rlvr.agents.chat import EnvironmentTurn, Rendering, render_prompt
from rlvr.agents.protocol import Budgets, Environment, Episode, EpisodeRecord
from rlvr.agents.tool_calls import last_call_end, parse_turn
from rlvr.errors import UserFacingError
from rlvr.rollout.base import MultiTurnEngine, SampledTurn, SamplingParams
from rlvr.types import Prompt, RolloutBatch, Turns

_FORWARDED = frozenset({"sync_weights", "teacher_forced_logprobs", "close"})


class EpisodeEngineError(UserFacingError):
    """The rollout engine cannot run multi-turn episodes."""


@dataclass
class _Row:
    """One episode being played."""

    episode: Episode
    context: list[int]  # the prompt's ids (unpadded): what every turn continues, with `ids`
    ids: list[int] = field(default_factory=list)  # the completion: sampled and environment tokens
    sampled: list[int] = field(default_factory=list)  # 1 = the model sampled the token
    logprobs: list[float] = field(default_factory=list)
    turn_of_token: list[int] = field(default_factory=list)
    record: EpisodeRecord = field(default_factory=EpisodeRecord)
    last_text: str = ""
    truncated: bool = False
    done: bool = False

    def add(self, ids: list[int], logprobs: list[float] | None, turn: int) -> None:
        """Model turn `turn`'s sampled ids with their log-probs, or an environment turn's ids (None, turn -1)."""
        self.ids += ids
        self.sampled += [int(logprobs is not None)] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
        self.turn_of_token += [turn] * len(ids)

    def end(self, reason: str, truncated: bool) -> None:
        self.record.stop_reason, self.truncated, self.done = reason, truncated, True


def after_last_call(tokenizer, ids: list[int]) -> int | None:
    """The fewest leading ids whose text holds every call parse_turn reads in the turn (tool_calls.last_call_end:
    a `</tool_call>` inside <think> or in prose closes none); None without one. The text of the first k ids only
    grows with k, so k is found by bisection: about log2(len(ids)) decodes, not one per candidate k (that was 2.3 s
    a row at 4096 tokens)."""
    decode = lambda k: tokenizer.decode(ids[:k], skip_special_tokens=True)  # noqa: E731 - the text parse_turn reads
    text = decode(len(ids))
    end = last_call_end(text)
    if end is None:
        return None
    # the first k < len(ids) whose text holds them, else len(ids) (bisect_left's answer when none does)
    return bisect.bisect_left(range(len(ids)), True, key=lambda k: decode(k).startswith(text[:end]))


def _turn_seeds(sampling: SamplingParams, turns: int) -> list[int | None]:
    """One seed per turn from the call's seed: a resumed run replays the same episodes (rollout/base.py)."""
    if sampling.seed is None:
        return [None] * turns
    rng = random.Random(sampling.seed)
    return [sampling.seed] + [rng.randrange(2**62) for _ in range(turns - 1)] if turns else []


class EpisodeRunner:
    """`generate(prompts, G, sampling)` as every engine has it, playing episodes: the GRPO loop, dynamic sampling,
    the curriculum and evaluation call it unchanged. Weight sync and the agreement check go to the wrapped engine."""

    def __init__(self, engine, tokenizer, environment: Environment, budgets: Budgets,
                 rendering: Rendering | None = None):
        if not isinstance(engine, MultiTurnEngine):
            raise EpisodeEngineError(
                f"the rollout engine {type(engine).__name__} cannot run multi-turn episodes yet (task "
                f"{environment.name!r} needs them); use rollout.engine.kind=hf or hf_process")
        self.engine, self.tokenizer, self.environment, self.budgets = engine, tokenizer, environment, budgets
        self.rendering = rendering if rendering is not None else Rendering()
        self.turn_template = EnvironmentTurn.of(tokenizer, self.rendering.observation_role)

    def __getattr__(self, name: str):
        """Weight sync, the agreement check and close are the wrapped engine's (when it has them: SyncedEngine is
        then true of the runner too). Nothing else is forwarded: a single-turn `submit` (max_staleness 1) must not
        silently sample plain completions for an episode task."""
        if name in _FORWARDED and "engine" in self.__dict__:
            return getattr(self.engine, name)
        raise AttributeError(name)

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        listed = self.environment.tools if self.rendering.list_tools else ()
        contexts = [self.tokenizer(render_prompt(self.tokenizer, p, listed, self.turn_template.role),
                                   add_special_tokens=False)["input_ids"] for p in prompts]
        rows = [_Row(self.environment.start(p), contexts[i]) for i, p in enumerate(prompts) for _ in range(group_size)]
        for turn, seed in enumerate(_turn_seeds(sampling, self.budgets.max_turns)):
            live = [r for r in rows if not r.done]
            if not live:
                break
            room = max(min(self.budgets.tokens_per_turn, self.budgets.tokens_per_episode - len(r.ids)) for r in live)
            turn_sampling = replace(sampling, max_new_tokens=room, seed=seed)
            if turn == 0:  # the G rows of a prompt share one prefill of it
                sampled = self.engine.continue_tokens(contexts, group_size, turn_sampling)
            else:
                sampled = self.engine.continue_tokens([r.context + r.ids for r in live], 1, turn_sampling)
            for row, out in zip(live, sampled):
                self._play(row, out, turn)
        for row in rows:
            if not row.done:  # only with max_turns 0 (no turn played): _play ends every row in the last turn
                row.end("max_turns", True)
        return self._batch(prompts, group_size, contexts, rows)

    def _play(self, row: _Row, out: SampledTurn, turn: int) -> None:
        """Append the model's turn; let the environment answer; end the episode where it ends."""
        limit = min(self.budgets.tokens_per_turn, self.budgets.tokens_per_episode - len(row.ids))
        ids, logprobs, stopped = out.ids[:limit], out.logprobs[:limit], out.stopped and len(out.ids) <= limit
        closing = []  # the end-of-turn token the template closes a turn with, when the driver ended it
        cut = None if stopped or not self.environment.tools else after_last_call(self.tokenizer, ids)
        if cut is not None:
            # A turn out of tokens after its calls (SmolLM2 goes on with a made-up result): it ends after its last
            # call, as a stop string ends a vLLM request; what was sampled after is dropped unseen, the call runs.
            ids, logprobs, stopped, closing = ids[:cut], logprobs[:cut], True, [self.tokenizer.eos_token_id]
        row.add(ids, logprobs, turn)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        row.last_text = text
        row.record.messages.append({"role": "assistant", "content": text})
        if not stopped:  # the turn ran out of tokens: the episode is cut mid-turn
            per_turn = len(ids) >= self.budgets.tokens_per_turn
            row.end("turn_tokens" if per_turn else "episode_tokens", True)
            row.record.turn_rewards.append(0.0)
            return
        observation = row.episode.respond(parse_turn(turn, text, self.environment.tools))
        row.record.turn_rewards.append(float(observation.reward))
        row.record.valid_calls += observation.valid_calls
        row.record.invalid_calls += observation.invalid_calls
        if observation.done or observation.text is None:
            row.end("env_done" if observation.done and observation.text is not None else "answered", False)
            return
        if turn + 1 >= self.budgets.max_turns:  # it asked for more, and no turn is left to read the answer
            row.end("max_turns", True)
            return
        env_ids = closing + self.turn_template.ids(self.tokenizer, observation.text)
        if len(row.ids) + len(env_ids) >= self.budgets.tokens_per_episode:  # no room for a model turn after it
            row.end("episode_tokens", True)
            return
        row.add(env_ids, None, -1)
        row.record.messages.append({"role": self.turn_template.role, "content": observation.text})

    def _batch(self, prompts: list[Prompt], group_size: int, contexts: list[list[int]],
               rows: list[_Row]) -> RolloutBatch:
        device = self._device()
        pad = self.tokenizer.pad_token_id
        P, C, T = max(map(len, contexts)), max(max(len(r.ids) for r in rows), 1), self.budgets.max_turns
        left = lambda values, fill: [fill] * (P - len(values)) + values  # noqa: E731
        right = lambda values, fill: values + [fill] * (C - len(values))  # noqa: E731
        tensor = lambda data, dtype: torch.tensor(data, dtype=dtype, device=device)  # noqa: E731
        for row in rows:
            row.record.final_state = row.episode.final_state()
        turn_rewards = [r.record.turn_rewards + [0.0] * (T - len(r.record.turn_rewards)) for r in rows]
        # The final answer is no step (EpisodeRecord.step_count): counted as a step with reward 0, the group's
        # normalisation made answering look worse than one more call (issue 26: answered 66 % -> 0 % in one update)
        steps = [r.record.step_count() for r in rows]
        turn_mask = [[t < n for t in range(T)] for n in steps]
        turns = Turns(tensor([right(r.turn_of_token, -1) for r in rows], torch.long),
                      tensor(turn_rewards, torch.float32), tensor(turn_mask, torch.bool), [r.record for r in rows])
        sampled = tensor([right(r.sampled, 0) for r in rows], torch.long)
        return RolloutBatch(
            prompts=list(prompts), group_size=group_size,
            prompt_ids=tensor([left(c, pad) for c in contexts], torch.long),
            prompt_mask=tensor([left([1] * len(c), 0) for c in contexts], torch.long),
            completion_ids=tensor([right(r.ids, pad) for r in rows], torch.long), completion_mask=sampled,
            sampling_logprobs=tensor([right(r.logprobs, 0.0) for r in rows], torch.float32),
            completions=[r.last_text for r in rows], truncated=tensor([r.truncated for r in rows], torch.bool),
            turns=turns)

    def _device(self) -> torch.device:
        """Where the batch goes: the policy's device (in-process engine), the engine's (hf_process)."""
        model = getattr(self.engine, "model", None)
        if model is not None:
            return next(model.parameters()).device
        return torch.device(getattr(self.engine, "device", "cpu"))
