"""TextArena's single-player games through rlvr's Environment protocol (optional extra `textarena`).

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
  * the final state is JSON (game, seed, done, final reward, reason, whether an invalid move ended it), scored by
    `score_state`: a win (reward >= 1) is CORRECT; anything else WRONG, with the reward clipped to [0, 1] as
    partial credit when episode.partial_credit is on (TextArena's losses are -1 or a share of the task done); an
    unfinished game (cut by a budget) is WRONG with 0, and so is a game ended by an invalid move, whatever
    reward the game gave it. TextArena pays an invalid-move ending its share-of-the-task-done reward
    (GuessTheNumber: 0.84 for repeating a guess twice, seed 3), while honest play cut by the budget earns 0:
    partial credit there would teach the model to forfeit with a bad move rather than keep playing.
Games are built without TextArena's observation wrappers: those re-send the whole history every turn, while
the chat already holds it.

Isolation: TextArena seeds and draws from Python's global `random` (State.__init__ calls random.seed). Each game
keeps its own copy of that generator's state, swapped in around every library call under one lock, so a game
neither moves the trainer's global random state nor depends on other episodes: the same prompt replays the
same game. The games' prints go to a buffer. A game whose start differs between two starts from one seed
(one that draws from numpy's global generator, say) is refused when the task is built.

The task that yields prompts for these games (a held-out split by seed) is rlvr/tasks/textarena.py.
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
from typing import Any, Iterator

from rlvr.agents.protocol import ModelTurn, Observation, ToolSpec
from rlvr.types import Outcome, Prompt, Verdict
from rlvr.verifiers.base import error_verdict
from rlvr.verifiers.math.extract import strip_thinking

INSTALL_HINT = "textarena is not installed: pip install 'rlvr[textarena]' (or pip install textarena)"
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
            hidden = json.dumps(getattr(getattr(self.env, "state", None), "game_state", None), sort_keys=True)
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
        self.forfeit = False  # the game ended on an invalid move

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
            self.done, self.forfeit = True, invalid
            self.reward = (state.rewards or {}).get(0)
            self.reason = str(state.game_info[0].get("reason", ""))
        return Observation(text or (None if done else NO_REPLY), done=bool(done), valid_calls=int(not invalid),
                           invalid_calls=int(invalid))

    def final_state(self) -> str:
        return json.dumps({"env_id": self.ref.env_id, "seed": self.ref.seed, "done": self.done,
                           "reward": self.reward, "reason": self.reason, "moves": self.moves,
                           "invalid_moves": self.invalid_moves, "forfeit": self.forfeit, "error": self.error},
                          sort_keys=True)


class TextArenaEnvironment:
    """The Environment of one TextArena game id; episodes start from the prompt's reference (a seed)."""

    tools: tuple[ToolSpec, ...] = ()
    scores_state = True  # a game is won or lost: its final reward is the outcome

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
        if state.get("forfeit"):  # no partial credit for ending on an invalid move (module docstring)
            return Verdict(Outcome.WRONG, 0.0, f"ended by an invalid move; {detail}"[:300])
        if reward >= 1:
            return Verdict(Outcome.CORRECT, 1.0, detail)
        return Verdict(Outcome.WRONG, min(1.0, max(0.0, float(reward))) if self.partial_credit else 0.0, detail)
