"""TextArena through rlvr's Environment protocol: rlvr/tasks/envs/textarena_adapter.py and
its task, rlvr/tasks/textarena.py.

Most tests run a fake `textarena` module (put in sys.modules), so the mapping is tested without the optional
extra; it mimics the library's surface the adapter uses (make, Wrapper, ObservationType, env.reset / step /
get_observation, state.game_state / rewards / game_info / error_count) and, like TextArena, seeds and draws from
the global `random`. The last tests play the real GuessTheNumber and skip without the library."""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import random
import re
import sys
import types

import pytest

from rlvr.agents.protocol import Environment, Episode, ModelTurn
from rlvr.agents.scoring import EpisodeRewarder
from rlvr.config.run import ConfigError, TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks import textarena as arena
from rlvr.tasks.envs import textarena_adapter as adapter
from rlvr.types import Outcome, Prompt


class Kind(enum.Enum):
    PROMPT, PLAYER_ACTION, GAME_MESSAGE, GAME_ADMIN = range(4)


class FakeState:
    def __init__(self, secret: int) -> None:
        self.game_state = {"secret": secret}
        self.rewards = None
        self.error_count = 0
        self.game_info = {0: {"invalid_move": False}}


class FakeGuess:
    """Guess a secret in 1..9 (seed % 9 + 1) in three moves; like TextArena it reseeds the global random and
    draws from it (the 'luck' in every hint), so a test sees whether each game keeps its own stream."""

    players, fixed = 1, False

    def reset(self, num_players: int, seed: int) -> None:
        assert num_players == self.players, f"The number of players has to be {self.players}"
        random.seed(seed)
        self.state = FakeState(1 if self.fixed else seed % 9 + 1)
        self.queue = [(-1, "Guess my number in 1..9, e.g. [5].", Kind.PROMPT)]
        self.moves = self.last = 0

    def step(self, action: str):
        self.queue.append((0, action, Kind.PLAYER_ACTION))
        if "boom" in action:
            raise RuntimeError(f"the game broke on {action!r}")
        found = re.search(r"\[(\d+)\]", action)
        secret = self.state.game_state["secret"]
        if not found and getattr(self.state, "error_count", 0):  # like TextArena: a second invalid move in a row
            self.state.game_info[0].update(invalid_move=True, reason="Invalid Move: no [number]")  # ends the game,
            # paid like a loss
            self.state.rewards = {0: 1 - abs(self.last - secret) / 8}
            return True, {}
        if not found:
            self.state.error_count = 1
            self.queue.append((-1, "You attempted an invalid move.", Kind.GAME_ADMIN))
            return False, {}
        self.state.error_count, guess, self.moves = 0, int(found.group(1)), self.moves + 1
        self.last = guess
        if guess == 0:  # a game may answer a move with nothing
            return False, {}
        if guess == secret:
            self.state.rewards, self.state.game_info[0]["reason"] = {0: 1}, "found it"
            return True, {}
        self.queue.append((-1, f"{'lower' if guess > secret else 'higher'} (luck {random.random():.6f})",
                           Kind.GAME_MESSAGE))
        if self.moves == 3:  # TextArena-like partial reward: how close the last guess came
            self.state.rewards = {0: 1 - abs(guess - secret) / 8}
            self.state.game_info[0]["reason"] = "out of moves"
            return True, {}
        return False, {}

    def get_observation(self):
        out, self.queue = self.queue, []
        return 0, out


class Drift(FakeGuess):
    """Starts differently every time from one seed, as a game drawing from an unseeded generator would."""

    starts = 0

    def reset(self, num_players: int, seed: int) -> None:
        super().reset(num_players, seed)
        Drift.starts += 1
        self.state.game_state["draw"] = Drift.starts


class NoCount(FakeGuess):
    """A game whose state keeps no error_count: game_info's invalid_move alone marks an invalid move."""

    def reset(self, num_players: int, seed: int) -> None:
        super().reset(num_players, seed)
        del self.state.error_count

    def step(self, action: str):
        done = super().step(action)
        self.state.__dict__.pop("error_count", None)
        return done


class Shuffled(FakeGuess):
    """One start (secret 1) whose hidden state lists its keys in an order that depends on the seed."""

    fixed = True

    def reset(self, num_players: int, seed: int) -> None:
        super().reset(num_players, seed)
        items = [("secret", 1), ("range", [1, 9])]
        self.state.game_state = dict(items if seed % 2 else items[::-1])


class Opaque(FakeGuess):
    """Hidden state that is not JSON: an object (TypeError) or, for odd seeds, a dict that holds itself (ValueError)."""

    def reset(self, num_players: int, seed: int) -> None:
        super().reset(num_players, seed)
        if seed % 2:
            self.state.game_state = {"secret": seed % 9 + 1}
            self.state.game_state["self"] = self.state.game_state
        else:
            self.state.game_state = {"secret": seed % 9 + 1, "board": object()}


class Wrapper:
    def __init__(self, env) -> None:
        self.env = env


def fake_module() -> types.ModuleType:
    games = {"GuessTheNumber-v0": FakeGuess, "Duel-v0": type("Duel", (FakeGuess,), {"players": 2}),
             "Fixed-v0": type("Fixed", (FakeGuess,), {"fixed": True}), "Drift-v0": Drift, "NoCount-v0": NoCount,
             "Shuffled-v0": Shuffled, "Opaque-v0": Opaque}

    def make(env_id: str):
        if env_id not in games:
            raise ValueError(f"Environment {env_id} not found in registry.")
        return Wrapper(Wrapper(games[env_id]()))  # the adapter unwraps TextArena's wrappers

    module = types.ModuleType("textarena")
    module.make, module.Wrapper, module.ObservationType = make, Wrapper, Kind
    return module


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setitem(sys.modules, "textarena", fake_module())
    arena.splits.cache_clear()
    yield
    arena.splits.cache_clear()  # the real library's splits of the same ids must not see the fake's


def turn(text: str, index: int = 0) -> ModelTurn:
    return ModelTurn(index, text, (), ())


def start(seed: int, partial: bool = False):
    env = adapter.TextArenaEnvironment("GuessTheNumber-v0", partial_credit=partial)
    prompt = Prompt(f"textarena/{seed}", (), adapter.ArenaRef("GuessTheNumber-v0", seed).as_json())
    return env, env.start(prompt), prompt


def test_a_turn_is_a_move_and_the_reply_is_the_games_new_messages(fake):
    env, episode, prompt = start(seed=4)  # secret 4 % 9 + 1 = 5
    assert isinstance(env, Environment) and isinstance(episode, Episode) and env.tools == ()
    # caught: dropping strip_thinking (the fake would read the [3] inside the reasoning)
    reply = episode.respond(turn("<think>maybe [3]</think> I guess [7]"))
    assert reply.text.startswith("lower (luck") and "[7]" not in reply.text  # no echo of the move
    assert (reply.done, reply.valid_calls, reply.invalid_calls, reply.reward) == (False, 1, 0, 0.0)
    win = episode.respond(turn("[5]", 1))
    assert win.done and win.valid_calls == 1 and win.text is None  # the game said nothing more: no reply
    state = json.loads(episode.final_state())
    assert (state["done"], state["reward"], state["moves"], state["reason"]) == (True, 1, 2, "found it")
    verdict = env.score_state(episode.final_state(), prompt)
    assert verdict.outcome is Outcome.CORRECT and verdict.score == 1.0


def test_an_invalid_move_is_counted_and_told_back(fake):
    env, episode, _ = start(seed=4)
    reply = episode.respond(turn("five"))
    # caught: invalid = False (the move would count as a valid call)
    assert (reply.valid_calls, reply.invalid_calls, reply.done) == (0, 1, False)
    assert "invalid move" in reply.text
    assert json.loads(episode.final_state())["invalid_moves"] == 1


@pytest.mark.parametrize("partial, score", [(True, 0.75), (False, 0.0)])
def test_a_lost_game_earns_partial_credit_only_when_asked(fake, partial, score):
    env, episode, prompt = start(seed=4, partial=partial)  # secret 5
    for index, guess in enumerate((1, 2, 3)):
        reply = episode.respond(turn(f"[{guess}]", index))
    assert reply.done
    # the fake's reward after 3 moves: 1 - |3 - 5| / 8 = 0.75; WRONG, never CORRECT, below a win
    verdict = env.score_state(episode.final_state(), prompt)
    assert verdict.outcome is Outcome.WRONG and verdict.score == pytest.approx(score)


def test_an_unfinished_game_earns_nothing(fake):
    env, episode, prompt = start(seed=4, partial=True)
    episode.respond(turn("[1]"))
    verdict = env.score_state(episode.final_state(), prompt)
    assert verdict.outcome is Outcome.WRONG and verdict.score == 0.0 and "not finished" in verdict.detail


def test_a_game_ended_by_invalid_moves_earns_no_partial_credit(fake):
    """TextArena ends a game on the second invalid move in a row and pays it the share of the task done (the real
    GuessTheNumber paid 0.84 for repeating a guess), while honest play cut by the budget earns 0: partial credit
    for the forfeit would teach a model to end games with bad moves. The forfeit is WRONG
    with 0, and the game's own reward stays in the final state for the record."""
    env, episode, prompt = start(seed=4, partial=True)  # secret 5
    assert not episode.respond(turn("[1]")).done
    assert episode.respond(turn("five", 1)).invalid_calls == 1  # the first invalid move: told back, a retry
    reply = episode.respond(turn("six", 2))
    assert reply.done and (reply.valid_calls, reply.invalid_calls) == (0, 1)
    state = json.loads(episode.final_state())
    # the fake's forfeit reward after the last guess 1: 1 - |1 - 5| / 8 = 0.5
    assert state["forfeit"] is True and state["reward"] == pytest.approx(0.5) and state["invalid_moves"] == 2
    verdict = env.score_state(episode.final_state(), prompt)
    assert verdict.outcome is Outcome.WRONG and verdict.score == 0.0 and "ended by an invalid move" in verdict.detail
    honest = json.dumps({**state, "forfeit": False})  # the same end, reached by a valid move, earns the 0.5
    assert env.score_state(honest, prompt).score == pytest.approx(0.5)


def test_a_move_the_game_answers_with_nothing_gets_a_stand_in_reply(fake):
    """An unfinished game that sent no message still answers the turn (the chat needs an environment turn)."""
    _, episode, _ = start(seed=4)
    reply = episode.respond(turn("[0]"))
    assert reply.text == adapter.NO_REPLY and not reply.done and reply.valid_calls == 1


def test_a_game_without_an_error_count_reads_invalid_moves_from_its_game_info(fake):
    env = adapter.TextArenaEnvironment("NoCount-v0")
    episode = env.start(Prompt("textarena/4", (), adapter.ArenaRef("NoCount-v0", 4).as_json()))
    reply = episode.respond(turn("[7]"))
    assert (reply.valid_calls, reply.invalid_calls) == (1, 0)  # no error_count is no error


def test_a_game_that_raises_on_the_move_ends_the_episode_without_raising(fake):
    env, episode, prompt = start(seed=4)
    reply = episode.respond(turn("boom" + "!" * 400))
    assert reply.done and reply.invalid_calls == 1 and "RuntimeError" in reply.text
    failed = json.loads(episode.final_state())
    # the error is kept to its first 300 characters: "RuntimeError: the game broke on 'boom!!!..."
    assert failed["done"] and failed["error"] == f"RuntimeError: the game broke on {'boom' + '!' * 400!r}"[:300]
    assert reply.text == f"The game failed on this move: {failed['error']}"
    assert episode.respond(turn("[5]", 1)).done  # nothing runs after the failure
    assert json.loads(episode.final_state()) == failed
    verdict = env.score_state(episode.final_state(), prompt)
    assert verdict.outcome is Outcome.ERROR and verdict.score == 0.0 and "the game broke" in verdict.detail


def test_games_leave_the_global_random_alone_and_replay_the_same(fake):
    random.seed(123)
    expected = [random.random() for _ in range(3)]
    random.seed(123)
    _, first, _ = start(seed=4)
    _, second, _ = start(seed=4)
    # interleaved: each game draws from its own stream. Caught: not restoring the game's stream in isolated()
    # (the second game would continue the first one's draws); not restoring the outer state (the asserted draws)
    texts = [(first.respond(turn(f"[{g}]", i)).text, second.respond(turn(f"[{g}]", i)).text)
             for i, g in enumerate((9, 8))]
    assert all(a == b for a, b in texts) and texts[0][0] != texts[1][0]
    assert [random.random() for _ in range(3)] == expected


@pytest.mark.parametrize("final_state, why", [
    ("not json", "Expecting value"),
    (json.dumps({"env_id": "GuessTheNumber-v0", "seed": 5, "done": True, "reward": 1}), "not GuessTheNumber-v0/4"),
    ("[1]", "not a JSON object"),
])
def test_a_final_state_of_another_game_is_unscorable(fake, final_state, why):
    env, _, prompt = start(seed=4)
    verdict = env.score_state(final_state, prompt)
    assert verdict.outcome is Outcome.ERROR and not verdict.scorable and why in verdict.detail


@pytest.mark.parametrize("reward", ["1", True, float("nan"), None])
def test_a_finished_game_without_a_number_as_reward_is_an_error(fake, reward):
    """A reward that is not a real number (text, a bool, NaN, none) is the game's failure: an ERROR verdict,
    never a win (True >= 1) or a silent 0."""
    env, _, prompt = start(seed=4, partial=True)
    state = json.dumps({"env_id": "GuessTheNumber-v0", "seed": 4, "done": True, "reward": reward, "reason": "x"})
    verdict = env.score_state(state, prompt)
    assert verdict.outcome is Outcome.ERROR and "the game ended without a reward" in verdict.detail


def test_partial_credit_is_clipped_to_zero_and_off_by_default(fake):
    """TextArena's losses are -1: clipped to 0 under partial credit. The environment's default is no partial
    credit (episode.partial_credit's default)."""
    env, _, prompt = start(seed=4, partial=True)
    lost = {"env_id": "GuessTheNumber-v0", "seed": 4, "done": True, "reward": -1, "reason": "lost " + "x" * 400}
    verdict = env.score_state(json.dumps(lost), prompt)
    assert verdict.outcome is Outcome.WRONG and verdict.score == 0.0
    assert verdict.detail == f"reward -1: {lost['reason']}"[:300]  # kept to 300 characters
    half = json.dumps({**lost, "reward": 0.5})
    assert env.score_state(half, prompt).score == 0.5
    assert adapter.TextArenaEnvironment("GuessTheNumber-v0").score_state(half, prompt).score == 0.0


def test_a_game_is_scored_on_its_state_and_its_records_are_canonical(fake):
    """The game's final reward is the outcome (scores_state: the rewarder adds the state component); the final
    state and the reference are JSON with sorted keys, one text per state."""
    env, episode, prompt = start(seed=4)
    assert env.scores_state is True and "environment" in EpisodeRewarder(None, env, 1.0).components
    episode.respond(turn("[3]"))
    state = episode.final_state()
    assert state == json.dumps(json.loads(state), sort_keys=True)
    assert prompt.reference == '{"env_id": "GuessTheNumber-v0", "seed": 4}'


@pytest.mark.parametrize("text", ['{"env_id": "GuessTheNumber-v0"}', '{"env_id": 5, "seed": 4}', "[4]",
                                  '{"env_id": "GuessTheNumber-v0", "seed": true}', '{"seed": 4}'])
def test_a_reference_that_is_not_a_game_and_seed_is_refused(text):
    with pytest.raises(ValueError, match='expected {"env_id": str, "seed": int}'):
        adapter.ArenaRef.parse(text)


def test_a_reference_is_frozen():
    """References are shared by the prompts of a split: an assignment raises."""
    ref = adapter.ArenaRef.parse('{"env_id": "GuessTheNumber-v0", "seed": 4}')
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.seed = 5


def test_the_key_of_a_start_ignores_key_order_and_survives_state_that_is_not_json(fake):
    """Game.key groups seeds that start the same game (the split keeps them on one side): the hidden state is
    hashed with sorted keys, and a state json cannot write (an object, a dict that holds itself) falls back to the
    start text alone instead of raising."""
    first, second = adapter.Game("Shuffled-v0", 0), adapter.Game("Shuffled-v0", 1)
    assert list(first.env.state.game_state) != list(second.env.state.game_state)  # the orders differ
    assert first.key() == second.key()
    text_only = hashlib.sha256(f"{adapter.Game('Opaque-v0', 0).start_text}\0".encode()).hexdigest()
    assert adapter.Game("Opaque-v0", 0).key() == text_only  # an object: TypeError
    assert adapter.Game("Opaque-v0", 1).key() == text_only  # a dict that holds itself: ValueError


def test_importing_the_library_leaves_the_global_random_alone(monkeypatch, tmp_path):
    """TextArena's import draws from the global random; import_textarena puts the state back."""
    (tmp_path / "textarena.py").write_text("import random\nrandom.random()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "textarena", None)  # undone after the test: the real module (or none) again
    del sys.modules["textarena"]
    random.seed(5)
    expected = random.getstate()
    module = adapter.import_textarena()
    assert module.__file__ == str(tmp_path / "textarena.py") and random.getstate() == expected


def test_held_out_games_never_share_a_start_with_train(fake):
    data = arena.splits("GuessTheNumber-v0")
    secret = lambda seed: seed % 9 + 1  # noqa: E731 - the fake's rule
    train, held = {secret(s) for s in data.train}, [secret(s) for s in data.held_out]
    # 9 secrets, the example's (seed 1000: secret 2) in neither split; 8 left, 8 // 5 = 1 held out
    assert secret(arena.SEED_POOL) not in train | set(held)
    assert len(held) == 1 and not train & set(held) and len(train) == 7
    assert data.held_out[0] == min(s for s in range(arena.SEED_POOL) if secret(s) == held[0])


def test_a_game_with_one_start_is_split_by_seed(fake):
    data = arena.splits("Fixed-v0")  # every seed starts the same game: the split falls back to seeds
    # caught: no fallback (one key, held out whole, nothing to train on: a ConfigError)
    assert len(data.held_out) == 200 and len(data.train) == 800
    assert not set(data.train) & set(data.held_out) and arena.SEED_POOL not in data.train + data.held_out


def test_the_task_prompts_the_opening_after_one_example_move(fake):
    task = arena.TextArenaTask(TaskConfig(name="textarena"))
    prompt = task.eval_prompts(5)[0]
    assert len(task.eval_prompts(5)) == 1  # one held-out start (above)
    assert [m["role"] for m in prompt.messages] == ["user", "assistant", "tool", "user"]
    assert prompt.messages[1]["content"] == "[10]"  # out of 1..9: the fake says lower, a legal move
    assert prompt.messages[-1]["content"] == "Guess my number in 1..9, e.g. [5]."
    assert json.loads(prompt.reference) == {"env_id": "GuessTheNumber-v0", "seed": task.held_out[0]}
    assert isinstance(task.environment(EpisodeConfig()), adapter.TextArenaEnvironment)
    no_example = arena.TextArenaTask(TaskConfig(name="textarena", one_shot=False))
    assert [m["role"] for m in no_example.eval_prompts(1)[0].messages] == ["user"]


@pytest.mark.parametrize("env_id, message", [("Nope-v0", "not found in registry"),
                                             ("Duel-v0", "number of players has to be 2"),
                                             ("Drift-v0", "starts differently from the same seed")])
def test_a_game_that_cannot_start_is_one_config_error(fake, env_id, message):
    with pytest.raises(ConfigError, match=message):
        arena.TextArenaTask(TaskConfig(name="textarena", textarena_env=env_id))


def test_without_the_library_the_task_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "textarena", None)  # import textarena -> ImportError
    arena.splits.cache_clear()
    with pytest.raises(ConfigError, match=r"pip install 'rlvr\[textarena\]'"):
        arena.TextArenaTask(TaskConfig(name="textarena", textarena_env="Other-v0"))


# ---------------------------------------------------------------- the real library
def test_real_guess_the_number_by_bisection():
    pytest.importorskip("textarena")
    from rlvr.tasks import build_task

    arena.splits.cache_clear()
    task = build_task(TaskConfig(name="textarena"))
    env = task.environment(EpisodeConfig())
    prompt = task.eval_prompts(1)[0]
    episode, low, high = env.start(prompt), 1, 20
    for index in range(10):
        guess = (low + high) // 2
        reply = episode.respond(turn(f"My guess: [{guess}]", index))
        if reply.done:
            break
        low, high = (guess + 1, high) if "higher" in reply.text else (low, guess - 1)
    assert env.score_state(episode.final_state(), prompt).outcome is Outcome.CORRECT
    secret = lambda seed: adapter.Game("GuessTheNumber-v0", seed).env.state.game_state["game_number"]  # noqa: E731
    assert not {secret(s) for s in task.held_out} & {secret(s) for s in task.train[:200]}


def test_real_guess_the_number_pays_nothing_for_ending_on_invalid_moves():
    """The forfeit with the library: repeating a guess ends GuessTheNumber (seed 3) as an invalid move,
    which TextArena pays 0.84 (a share of the range narrowed); the adapter scores it WRONG with 0."""
    pytest.importorskip("textarena")
    env = adapter.TextArenaEnvironment("GuessTheNumber-v0", partial_credit=True)
    prompt = Prompt("textarena/3", (), adapter.ArenaRef("GuessTheNumber-v0", 3).as_json())
    episode = env.start(prompt)
    replies = [episode.respond(turn("[5]", index)) for index in range(3)]
    assert [r.done for r in replies] == [False, False, True] and replies[-1].invalid_calls == 1
    state = json.loads(episode.final_state())
    assert state["forfeit"] and state["reward"] > 0.5  # what partial credit would have paid
    verdict = env.score_state(episode.final_state(), prompt)
    assert verdict.outcome is Outcome.WRONG and verdict.score == 0.0


def test_a_game_not_ended_is_no_forfeit_and_a_forfeit_s_detail_is_cut_at_300(fake):
    """The recorded state of a game cut by the budget (or not started) says forfeit false: only a game that ended on
    an invalid move is one (catches the flag starting True). A forfeit's detail, a game's long reason included, is
    cut at 300 characters like every verdict detail of the adapter (catches 299 or 301)."""
    env, episode, prompt = start(seed=4, partial=True)
    assert json.loads(episode.final_state())["forfeit"] is False
    assert not episode.respond(turn("[1]")).done
    state = json.loads(episode.final_state())
    assert state["forfeit"] is False and not state["done"]
    long = json.dumps({**state, "done": True, "reward": 0.5, "forfeit": True, "reason": "x" * 400})
    assert len(env.score_state(long, prompt).detail) == 300
