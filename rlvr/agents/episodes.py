"""The episode driver: G episodes per prompt, turn by turn, returned as one RolloutBatch.

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

Time (a turn's calls ran one after another, rows one after another, and a looping run_python episode held
the rollout ~64 s). Each row's turn gets a deadline (protocol.Deadline, on the ModelTurn it responds to):
episode.turn_time_limit_s from when its calls start, never more than what is left of episode.episode_time_limit_s;
tool_calls.run_calls gives each call what is left, at most its own limit, and answers calls past it with an error.
An episode whose tool time is spent ends, truncated (stop reason "time"). The clock is each row's own (it starts
when a worker takes the row), so a row's reward never depends on how long other rows' tools took.
  The rows' responds run on a pool of episode.tool_workers threads, one task per live row: an episode's calls stay
in order in one thread (its state is never touched by two at once), and the driver waits for all before the next
turn. A call past its limit is abandoned in its own daemon thread (tool_calls._run_with_limit), so a stuck call
frees its worker at the deadline. A batch's tool phase therefore takes at most ceil(rows / tool_workers) turn
budgets (bench/agent_budgets.py measures it); with tool_workers >= rows (the default 32 is the default batch, 4
prompts x G 8), one.
  The last turn (turn + 1 = max_turns): no model turn is left to read its calls' results. When nothing else reads
them either (the environment does not score its final state, and episode.credit=outcome, so no step reward of the
turn is used), they are not run: the turn's deadline is already past, each call is "not run", one error, as every
call not run is. Under credit=process the last turn is a step whose reward (the calculator pays a new
solution value) enters the advantages and the dynamic-sampling check, so its calls run; an environment that scores
its state (the filesystem) is scored on what they did, so they run too.
"""
from __future__ import annotations

import bisect
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import torch

from rlvr.agents.chat import EnvironmentTurn, Rendering, render_prompt
from rlvr.agents.protocol import Budgets, Deadline, Environment, Episode, EpisodeRecord, ModelTurn, Observation
from rlvr.agents.text_safety import shown
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
    closing: list[int] = field(default_factory=list)  # this turn's end-of-turn id, when the driver ended the turn
    tool_s: float = 0.0  # wall-clock seconds its responds (its tool calls) took: the episode's time budget's use
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
                 rendering: Rendering | None = None, step_credit: bool = False):
        if not isinstance(engine, MultiTurnEngine):
            raise EpisodeEngineError(
                f"the rollout engine {type(engine).__name__} cannot run multi-turn episodes yet (task "
                f"{environment.name!r} needs them); use rollout.engine.kind=hf or hf_process")
        self.engine, self.tokenizer, self.environment, self.budgets = engine, tokenizer, environment, budgets
        self.rendering = rendering if rendering is not None else Rendering()
        self.turn_template = EnvironmentTurn.of(tokenizer, self.rendering.observation_role)
        # episode.credit=process reads the last turn's step reward: its calls run (module docstring)
        self.runs_last_calls = environment.scores_state or step_credit

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
            taken = [(row, self._take(row, out, turn)) for row, out in zip(live, sampled)]
            answering = [(row, model_turn) for row, model_turn in taken if model_turn is not None]
            for (row, _), observation in zip(answering, self._respond_all(answering)):
                self._answer(row, observation, turn)
        for row in rows:
            if not row.done:  # only with max_turns 0 (no turn played): _answer ends every row in the last turn
                row.end("max_turns", True)
        return self._batch(prompts, group_size, contexts, rows)

    def _take(self, row: _Row, out: SampledTurn, turn: int) -> ModelTurn | None:
        """Append the model's turn; the turn the environment answers, or None when the turn ended the episode."""
        limit = min(self.budgets.tokens_per_turn, self.budgets.tokens_per_episode - len(row.ids))
        ids, logprobs, stopped = out.ids[:limit], out.logprobs[:limit], out.stopped and len(out.ids) <= limit
        row.closing = []  # the end-of-turn token the template closes a turn with, when the driver ended it
        cut = None if stopped or not self.environment.tools else after_last_call(self.tokenizer, ids)
        if cut is not None:
            # A turn out of tokens after its calls (SmolLM2 goes on with a made-up result): it ends after its last
            # call, as a stop string ends a vLLM request; what was sampled after is dropped unseen, the call runs.
            ids, logprobs, stopped, row.closing = ids[:cut], logprobs[:cut], True, [self.tokenizer.eos_token_id]
        row.add(ids, logprobs, turn)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        row.last_text = text
        row.record.messages.append({"role": "assistant", "content": text})
        if not stopped:  # the turn ran out of tokens: the episode is cut mid-turn
            per_turn = len(ids) >= self.budgets.tokens_per_turn
            row.end("turn_tokens" if per_turn else "episode_tokens", True)
            row.record.turn_rewards.append(0.0)
            return None
        return parse_turn(turn, text, self.environment.tools)

    def _deadline(self, row: _Row, turn: int) -> Deadline:
        """The turn's tool time (module docstring), from now: the turn's budget or what is left of the episode's."""
        b = self.budgets
        if turn + 1 >= b.max_turns and not self.runs_last_calls:
            return Deadline.none_left("no turn is left to read its result (episode.max_turns)")
        left = b.episode_time_limit_s - row.tool_s
        if left < b.turn_time_limit_s:
            return Deadline(time.monotonic() + left, f"this episode's {b.episode_time_limit_s:g} s of tool time is "
                                                     "used up")
        return Deadline(time.monotonic() + b.turn_time_limit_s, f"this turn's {b.turn_time_limit_s:g} s of tool "
                                                                "time is used up")

    def _respond(self, row: _Row, turn: ModelTurn) -> Observation:
        """The environment's answer, within the turn's deadline; the time it took counts against the episode's."""
        started = time.monotonic()
        observation = row.episode.respond(replace(turn, deadline=self._deadline(row, turn.index)))
        row.tool_s += time.monotonic() - started
        return observation

    def _respond_all(self, answering: list[tuple[_Row, ModelTurn]]) -> list[Observation]:
        """Each row's answer, rows at once on episode.tool_workers threads (one task per row: an episode's calls
        stay in order in one thread). Returns when every row's calls are done or past their deadline."""
        workers = min(self.budgets.tool_workers, len(answering))
        if workers <= 1:
            return [self._respond(row, turn) for row, turn in answering]
        with ThreadPoolExecutor(workers, thread_name_prefix="rlvr-episode") as pool:
            return list(pool.map(lambda pair: self._respond(*pair), answering))

    def _answer(self, row: _Row, observation: Observation, turn: int) -> None:
        """Record the environment's answer; end the episode where it ends, else append the answer's tokens."""
        row.record.turn_rewards.append(float(observation.reward))
        row.record.valid_calls += observation.valid_calls
        row.record.invalid_calls += observation.invalid_calls
        if observation.done or observation.text is None:
            row.end("env_done" if observation.done and observation.text is not None else "answered", False)
            return
        if turn + 1 >= self.budgets.max_turns:  # it asked for more, and no turn is left to read the answer
            row.end("max_turns", True)
            return
        if row.tool_s >= self.budgets.episode_time_limit_s:  # no tool time left for another turn's calls
            row.end("time", True)
            return
        env_ids = row.closing + self.turn_template.ids(self.tokenizer, observation.text)
        if len(row.ids) + len(env_ids) >= self.budgets.tokens_per_episode:  # no room for a model turn after it
            row.end("episode_tokens", True)
            return
        row.add(env_ids, None, -1)
        # the text as the model read it (escaped, chat.py), so a recorded episode always encodes as UTF-8
        row.record.messages.append({"role": self.turn_template.role, "content": shown(observation.text)})

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
        # normalisation made answering look worse than one more call (answered 66 % -> 0 % in one update)
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
