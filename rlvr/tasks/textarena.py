"""TextArena's single-player games as a task (optional extra `textarena`): `task.name=textarena`,
`task.textarena_env` the game id. Prompts are the game's opening message (after one example move where the game is
in EXAMPLE_MOVES); `environment(episode)` plays them through rlvr/tasks/envs/textarena_adapter.py.

Split (held-out by seed, disjoint by game): seeds 0..SEED_POOL-1 are started once; each seed's key is the hash
of its starting observation and hidden game state (GuessTheNumber's secret number, Mastermind's code). Keys are
ranked by that hash and the first fifth is held out: train and held-out games never share a start, and the
evaluation holds one seed per held-out key in rank order. A game with fewer than MIN_STATES distinct starts
(Minesweeper places its mines after the first move; TowerOfHanoi never varies, so there train and evaluation
play the same game) is split by seed instead. The one-shot example is seed SEED_POOL, and its key is in neither
split. Games with few starts have a small evaluation: GuessTheNumber-v0 (secrets 1..20) holds out 3 secrets.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from rlvr.agents.protocol import ModelTurn
from rlvr.config.run import ConfigError, TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks.base import first, sample_forever
from rlvr.tasks.envs.textarena_adapter import ArenaRef, Game, TextArenaEnvironment, TextArenaEpisode
from rlvr.types import Prompt

SEED_POOL = 1000  # seeds started to build the split; resets take well under a millisecond in most games
MIN_STATES = 5  # fewer distinct starts than this: the start is not what varies, split by seed
# A move that shows the format in the one-shot example, by game name (the id before "-v0"); games not listed
# get no example turn. Each must be a legal first move of its game (an illegal one drops the example).
EXAMPLE_MOVES = {"GuessTheNumber": "[10]", "Mastermind": "[1 2 3 4]", "FrozenLake": "[right]",
                 "TowerOfHanoi": "[A C]", "Blackjack": "[Hit]", "LightsOut": "[2 2]"}


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
        why = " ".join(str(err).replace("*", " ").split())[:300]  # nltk's LookupError is a framed page
        raise ConfigError(f"task.textarena_env: TextArena could not start {env_id!r} as a one-player game "
                          f"offline: {type(err).__name__}: {why}") from None


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
    held_keys = set(held)
    train = tuple(seed for seed, key in keys.items() if key not in held_keys)
    first_seed: dict[str, int] = {}
    for seed, key in keys.items():  # seeds in increasing order: the first one of each key stays
        first_seed.setdefault(key, seed)
    if not train:
        raise ConfigError(f"task.textarena_env: {env_id} has too few distinct starts for a train split")
    return ArenaSplits(train, tuple(first_seed[key] for key in held))


class TextArenaTask:
    """Prompts for one TextArena game: the game's opening message, after one example move (see the module
    docstring for the split). `environment(episode)` plays them."""

    answer_verifiers: dict[str, float] = {}  # the game's final reward scores an episode, no answer is read

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
        system = self.config.system_prompt
        turns = [] if system is None else [{"role": "system", "content": system}]
        opening = Game(self.env_id, seed).start_text
        return Prompt(id=f"textarena/{self.env_id}/{split}/{seed}",
                      messages=(*turns, *self.example, {"role": "user", "content": opening}),
                      reference=ArenaRef(self.env_id, seed).as_json(), columns={"game": self.env_id})

    def train_prompts(self, seed: int) -> Iterator[Prompt]:
        for game_seed in sample_forever(self.train, seed):
            yield self.prompt(game_seed, "train")

    def eval_prompts(self, size: int) -> list[Prompt]:
        return [self.prompt(seed, "eval") for seed in first(self.held_out, size)]
