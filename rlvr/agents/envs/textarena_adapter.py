"""TextArena's single-player games through rlvr's Environment protocol (issue 26, item 6; optional extra `textarena`).

TextArena (github.com/LeonGuertler/TextArena) games are text in, text out: `env.reset(num_players, seed)`, then
`env.step(action_text) -> (done, info)`, `env.get_observation() -> (player_id, [(sender, message, kind), ...])`
(the messages since the last call), and the final reward in `env.state.rewards` once the game is over. The
mapping:
  * a model turn is one move: its text (reasoning in <think>...</think> dropped) is the action, as the game
    reads it (most games take the move in square brackets anywhere in the text, e.g. "[10]"); no tool calls
    (Environment.tools is empty);
  * the observation is the game's new messages, without the echo of the model's own move;
  * an invalid move (TextArena lets a player retry once, then ends the game) counts as an invalid call, an
    accepted one as a valid call; the step reward is 0: these games score only the final position;
  * the final state is JSON (game, seed, done, final reward, reason), scored by `score_state`: a win (reward
    >= 1) is CORRECT; anything else WRONG, with the reward clipped to [0, 1] as partial credit when
    episode.partial_credit is on (TextArena's losses are -1 or a share of the task done); an unfinished game
    (cut by a budget) is WRONG with 0.
Games are built without TextArena's observation wrappers: those re-send the whole history every turn, while
the chat already holds it.

Isolation: TextArena seeds and draws from Python's global `random` (State.__init__ calls random.seed). Each game
keeps its own copy of that generator's state, swapped in around every library call under one lock, so a game
neither moves the trainer's global random state nor depends on other episodes: the same prompt replays the
same game. The games' prints go to a buffer. A game whose start differs between two starts from one seed
(one that draws from numpy's global generator, say) is refused when the task is built.

Split (held-out by seed, disjoint by game): seeds 0..SEED_POOL-1 are started once; each seed's key is the hash
of its starting observation and hidden game state (GuessTheNumber's secret number, Mastermind's code). Keys are
ranked by that hash and the first fifth is held out: train and held-out games never share a start, and the
evaluation holds one seed per held-out key in rank order. A game with fewer than MIN_STATES distinct starts
(Minesweeper places its mines after the first move; TowerOfHanoi never varies) is split by seed instead. The
one-shot example is seed SEED_POOL, and its key is in neither split.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import random
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator

from rlvr.agents.protocol import ModelTurn, Observation, ToolSpec
from rlvr.config.run import ConfigError, TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks.base import first, sample_forever
from rlvr.types import Outcome, Prompt, Verdict
from rlvr.verifiers.base import error_verdict
from rlvr.verifiers.math.extract import strip_thinking

INSTALL_HINT = "textarena is not installed: pip install 'rlvr[textarena]' (or pip install textarena)"
SEED_POOL = 1000  # seeds started to build the split; resets take well under a millisecond in most games
MIN_STATES = 5  # fewer distinct starts than this: the start is not what varies, split by seed
# A move that shows the format in the one-shot example, by game name (the id before "-v0"); games not listed
# get no example turn. Each must be a legal first move of its game.
EXAMPLE_MOVES = {"GuessTheNumber": "[10]", "Mastermind": "[1 2 3 4]", "FrozenLake": "[right]",
                 "TowerOfHanoi": "[A C]", "Blackjack": "[Hit]", "LightsOut": "[2 2]"}
NO_REPLY = "(the game sent no message; make your next move)"
_LOCK = threading.Lock()  # the global random state and stdout are process-wide


def import_textarena() -> Any:
    """The textarena module, imported without moving the global random state (its import draws from it)."""
    with _LOCK:
        outer = random.getstate()
        try:
            return importlib.import_module("textarena")
        except ImportError as err:
            raise ImportError(f"{INSTALL_HINT} ({err})") from err
        finally:
            random.setstate(outer)


class Game:
    """One TextArena game, unwrapped, with its own random stream (see Isolation in the module docstring)."""

    def __init__(self, env_id: str, seed: int) -> None:
        self.ta = import_textarena()
        self._random: Any = None  # the game's random.getstate(); None until reset seeds it
        with self.isolated():
            env = self.ta.make(env_id)
            while isinstance(env, self.ta.Wrapper):
                env = env.env
            env.reset(num_players=1, seed=seed)
        self.env = env
        self.start_text = self.messages()

    @contextlib.contextmanager
    def isolated(self) -> Iterator[None]:
        with _LOCK:
            outer = random.getstate()
            if self._random is not None:
                random.setstate(self._random)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    yield
            finally:
                self._random = random.getstate()
                random.setstate(outer)

    def messages(self) -> str:
        """The game's new messages to the player as text, without the echo of the player's own move."""
        with self.isolated():
            _, messages = self.env.get_observation()
        echo = self.ta.ObservationType.PLAYER_ACTION
        return "\n".join(str(text).strip() for _, text, kind in messages if kind != echo and str(text).strip())

    def key(self) -> str:
        """The hash of the start: its text and the hidden game state (text alone when the state is not JSON)."""
        try:
            hidden = json.dumps(self.env.state.game_state, sort_keys=True)
        except (TypeError, ValueError):  # objects whose repr holds a memory address would make a random key
            hidden = ""
        return hashlib.sha256(f"{self.start_text}\0{hidden}".encode()).hexdigest()


@dataclass(frozen=True)
class ArenaRef:
    """A task row's reference: which game, started from which seed."""

    env_id: str
    seed: int

    def as_json(self) -> str:
        return json.dumps({"env_id": self.env_id, "seed": self.seed}, sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> ArenaRef:
        data = json.loads(text)
        if not (isinstance(data, dict) and isinstance(data.get("env_id"), str) and type(data.get("seed")) is int):
            raise ValueError('expected {"env_id": str, "seed": int}')
        return cls(data["env_id"], data["seed"])


class TextArenaEpisode:
    """One game in progress: model turns are moves (see the module docstring for the mapping)."""

    def __init__(self, game: Game, ref: ArenaRef) -> None:
        self.game, self.ref = game, ref
        self.done, self.reward, self.reason, self.error = False, None, "", ""
        self.moves = self.invalid_moves = 0

    def respond(self, turn: ModelTurn) -> Observation:
        if self.done:
            return Observation(None, done=True)
        state = self.game.env.state
        try:
            with self.game.isolated():
                done, _ = self.game.env.step(strip_thinking(turn.text).strip())
            text = self.game.messages()
            invalid = bool(getattr(state, "error_count", 0)) or bool(state.game_info[0].get("invalid_move"))
        except Exception as err:  # a game that fails on what the model wrote ends here; nothing raises
            self.done, self.error = True, f"{type(err).__name__}: {err}"[:300]
            return Observation(f"The game failed on this move: {self.error}", done=True, invalid_calls=1)
        self.moves += 1
        self.invalid_moves += invalid
        if done:
            self.done = True
            self.reward = (state.rewards or {}).get(0)
            self.reason = str(state.game_info[0].get("reason", ""))
        return Observation(text or NO_REPLY, done=bool(done), valid_calls=int(not invalid),
                           invalid_calls=int(invalid))

    def final_state(self) -> str:
        return json.dumps({"env_id": self.ref.env_id, "seed": self.ref.seed, "done": self.done,
                           "reward": self.reward, "reason": self.reason, "moves": self.moves,
                           "invalid_moves": self.invalid_moves, "error": self.error}, sort_keys=True)


class TextArenaEnvironment:
    """The Environment of one TextArena game id; episodes start from the prompt's reference (a seed)."""

    tools: tuple[ToolSpec, ...] = ()

    def __init__(self, env_id: str, partial_credit: bool = False) -> None:
        self.name = f"textarena:{env_id}"
        self.env_id, self.partial_credit = env_id, partial_credit

    def start(self, prompt: Prompt) -> TextArenaEpisode:
        ref = ArenaRef.parse(prompt.reference)
        return TextArenaEpisode(Game(ref.env_id, ref.seed), ref)  # start_text is already the prompt's question

    def score_state(self, final_state: str, prompt: Prompt) -> Verdict | None:
        try:
            ref, state = ArenaRef.parse(prompt.reference), json.loads(final_state)
            if not isinstance(state, dict):
                raise ValueError("the final state is not a JSON object")
            if (state.get("env_id"), state.get("seed")) != (ref.env_id, ref.seed):
                raise ValueError(f"the final state is of {state.get('env_id')}/{state.get('seed')}, not "
                                 f"{ref.env_id}/{ref.seed}")
        except ValueError as err:  # json.JSONDecodeError is a ValueError
            return error_verdict(f"textarena: {err}", scorable=False)
        if state.get("error"):
            return error_verdict(f"textarena: the game failed: {state['error']}")
        reward = state.get("reward")
        if not state.get("done"):
            return Verdict(Outcome.WRONG, 0.0, f"game not finished after {state.get('moves')} moves")
        if not isinstance(reward, (int, float)) or isinstance(reward, bool) or reward != reward:
            return error_verdict(f"textarena: the game ended without a reward ({reward!r})")
        detail = f"reward {reward:g}: {state.get('reason', '')}"[:300]
        if reward >= 1:
            return Verdict(Outcome.CORRECT, 1.0, detail)
        return Verdict(Outcome.WRONG, min(1.0, max(0.0, float(reward))) if self.partial_credit else 0.0, detail)


@dataclass(frozen=True)
class ArenaSplits:
    train: tuple[int, ...]  # seeds, all of those with a train key (repeats keep the game's own distribution)
    held_out: tuple[int, ...]  # one seed per held-out key, in key rank order


def _start(env_id: str, seed: int) -> Game:
    try:
        return Game(env_id, seed)
    except ImportError as err:
        raise ConfigError(f"task.name=textarena: {err}") from None
    except Exception as err:  # unknown id (ValueError), a multi-player game (AssertionError), a download, ...
        raise ConfigError(f"task.textarena_env: TextArena could not start {env_id!r} as a one-player game "
                          f"offline: {type(err).__name__}: {err}") from None


@lru_cache(maxsize=4)
def splits(env_id: str) -> ArenaSplits:
    """The seed split of one game (cached: it starts SEED_POOL + 1 games)."""
    example = _start(env_id, SEED_POOL).key()
    if _start(env_id, SEED_POOL).key() != example:
        raise ConfigError(f"task.textarena_env: {env_id} starts differently from the same seed, so episodes could "
                          f"not be replayed or re-scored; choose another game")
    keys = {seed: _start(env_id, seed).key() for seed in range(SEED_POOL)}
    if len(set(keys.values()) | {example}) < MIN_STATES:
        keys = {seed: hashlib.sha256(f"seed:{seed}".encode()).hexdigest() for seed in keys}
    else:
        keys = {seed: key for seed, key in keys.items() if key != example}
    ranked = sorted(set(keys.values()))
    held = ranked[:max(1, len(ranked) // 5)]
    train = tuple(seed for seed, key in keys.items() if key not in set(held))
    first_seed: dict[str, int] = {}
    for seed, key in keys.items():  # seeds in increasing order: the first one of each key stays
        first_seed.setdefault(key, seed)
    if not train:
        raise ConfigError(f"task.textarena_env: {env_id} has too few distinct starts for a train split")
    return ArenaSplits(train, tuple(first_seed[key] for key in held))


class TextArenaTask:
    """Prompts for one TextArena game: the game's opening message, after one example move (see the module
    docstring for the split). `environment(episode)` plays them."""

    def __init__(self, config: TaskConfig) -> None:
        self.config, self.env_id = config, config.textarena_env
        self.name = f"textarena:{self.env_id}"
        data = splits(self.env_id)
        self.train, self.held_out = data.train, data.held_out
        self.example = self._example() if config.one_shot else ()

    def _example(self) -> tuple[dict[str, str], ...]:
        """user (the example game's opening) / assistant (a move) / tool (the game's reply), when the game has a
        move in EXAMPLE_MOVES that it accepts."""
        move = EXAMPLE_MOVES.get(self.env_id.split("-v0")[0])
        if move is None:
            return ()
        game = Game(self.env_id, SEED_POOL)
        episode = TextArenaEpisode(game, ArenaRef(self.env_id, SEED_POOL))
        reply = episode.respond(ModelTurn(0, move, (), ()))
        if reply.done or reply.invalid_calls:
            return ()
        return ({"role": "user", "content": game.start_text}, {"role": "assistant", "content": move},
                {"role": "tool", "content": reply.text or ""})

    def environment(self, episode: EpisodeConfig) -> TextArenaEnvironment:
        return TextArenaEnvironment(self.env_id, partial_credit=episode.partial_credit)

    def prompt(self, seed: int, split: str) -> Prompt:
        turns = [{"role": "system", "content": self.config.system_prompt}] if self.config.system_prompt else []
        opening = Game(self.env_id, seed).start_text
        return Prompt(id=f"textarena/{self.env_id}/{split}/{seed}",
                      messages=(*turns, *self.example, {"role": "user", "content": opening}),
                      reference=ArenaRef(self.env_id, seed).as_json(), columns={"game": self.env_id})

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        for game_seed in sample_forever(self.train, seed):
            yield self.prompt(game_seed, "train")

    def eval_prompts(self, size: int) -> list[Prompt]:
        return [self.prompt(seed, "eval") for seed in first(self.held_out, size)]
