"""The filesystem environment and its task: reach a target tree on an in-memory filesystem with
the tools ls, cat, write, mkdir, mv and rm (rlvr/tasks/envs/fs_tree.py).

A task row is a starting tree (Prompt.columns["start"], canonical JSON) and a goal in words ("Create a folder
docs and move notes.txt into it."); its reference is the target tree (canonical JSON). Rows come from templates
with the names and texts varied: level 1 goals take one operation, level 2 goals two. Trees start with 1-3
entries (a 135M model has to be able to do this). A row's identity is "<template>|<names...>"; the held-out
split hashes it (rlvr.tasks.base.split_by_hash).

Scoring is on the state only: the model ends with a turn without a tool call whose text is not checked, so the
task's answer_verifiers is {} (the episode driver then scores with `score_state` alone; task.verifiers, "math"
by default, would read an answer the task never asks for). score_state compares the final tree with the target:
CORRECT (1.0) when equal; otherwise WRONG, naming the first differing path, with score 0 or, under
episode.partial_credit, the share of paths (the union of both trees' paths) whose existence, kind and text match.
The goal sentence is the task's own instruction: task.instruction (an answer format) does not apply.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable

from rlvr.agents.protocol import Episode, ModelTurn, Observation, ToolSpec
from rlvr.agents.tool_calls import ToolFailure, run_calls, tool_failure
from rlvr.config.run import ConfigError, TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks.base import split_by_hash
from rlvr.tasks.envs.common import Example, ExampleTurn, SplitTask, one_shot_messages
from rlvr.tasks.envs.fs_tree import BadTree, FileTree, canonical_json, flatten, parse_tree
from rlvr.types import Outcome, Prompt, Verdict
from rlvr.verifiers.base import error_verdict


def _spec(name: str, description: str, **fields: str) -> ToolSpec:
    properties = {key: {"type": "string", "description": text} for key, text in fields.items()}
    return ToolSpec(name, description, {"type": "object", "properties": properties, "required": list(fields),
                                        "additionalProperties": False})


_PATH = "a path from the top folder, e.g. 'docs/notes.txt' ('.' is the top folder)"
TOOLS = (
    _spec("ls", "List a folder: one name per line, folders end with '/'.", path=_PATH),
    _spec("cat", "Show the text of a file.", path=_PATH),
    _spec("write", "Create a file with this text, or replace the text of an existing file.", path=_PATH,
          content="the whole text of the file"),
    _spec("mkdir", "Create a folder (its parent folder must exist).", path=_PATH),
    _spec("mv", "Move or rename a file or folder; a folder as dst moves src into it.", src=_PATH, dst=_PATH),
    _spec("rm", "Delete a file, or a folder with everything in it.", path=_PATH),
)

FILES = ("notes.txt", "todo.txt", "report.md", "data.csv", "plan.txt", "ideas.md", "list.txt", "draft.txt")
FOLDERS = ("docs", "archive", "backup", "work", "old", "projects")
TEXTS = ("hello", "buy milk", "draft one", "call Sam", "42", "meeting at 5", "done", "see you")
Tree = dict  # nested dicts, as fs_tree reads them
READS = frozenset({"ls", "cat"})  # the tools that change nothing; the others change the tree (FilesystemEpisode)


def _next(items: tuple[str, ...], item: str) -> str:
    """A second value that differs from item, chosen from it (so it adds no axis to the problem space)."""
    return items[(items.index(item) + 1) % len(items)]


# key -> (kinds of the parameters, (parameters) -> (goal, start tree, target tree)); two parameters of one kind
# always differ. Level 1 goals need one tool call, level 2 goals two.
Make = Callable[..., tuple[str, Tree, Tree]]
TEMPLATES: dict[int, dict[str, tuple[tuple[tuple[str, ...], ...], Make]]] = {
    1: {
        "mkdir": ((FILES, FOLDERS, TEXTS), lambda f, d, c: (f"Create a folder {d}.", {f: c}, {f: c, d: {}})),
        "write": ((FILES, FILES, TEXTS), lambda f, g, t: (f"Create a file {g} with the text '{t}'.",
                                                          {f: _next(TEXTS, t)}, {f: _next(TEXTS, t), g: t})),
        "rename": ((FILES, FILES, TEXTS), lambda f, g, c: (f"Rename {f} to {g}.", {f: c}, {g: c})),
        "delete": ((FILES, FILES, TEXTS), lambda f, g, c: (f"Delete {f}.", {f: c, g: _next(TEXTS, c)},
                                                           {g: _next(TEXTS, c)})),
        "overwrite": ((FILES, TEXTS, TEXTS), lambda f, c, t: (f"Replace the text of {f} with '{t}'.", {f: c},
                                                              {f: t})),
        "move_into": ((FILES, FOLDERS, TEXTS), lambda f, d, c: (f"Move {f} into the folder {d}.", {f: c, d: {}},
                                                                {d: {f: c}})),
    },
    2: {
        "mkdir_move": ((FILES, FOLDERS, TEXTS), lambda f, d, c: (f"Create a folder {d} and move {f} into it.",
                                                                 {f: c}, {d: {f: c}})),
        "move_out": ((FILES, FOLDERS, TEXTS), lambda f, d, c: (
            f"Move {d}/{f} to the top folder and delete the folder {d}.", {d: {f: c}}, {f: c})),
        "copy": ((FILES, FILES, TEXTS), lambda f, g, c: (f"Copy {f} to a new file {g}.", {f: c}, {f: c, g: c})),
    },
}


@dataclass(frozen=True)
class Problem:
    canonical: str  # "mkdir_move|docs|notes.txt|hello" (parameters in template order)
    goal: str
    start: str  # canonical JSON trees
    target: str
    template: str


def _problems(key: str, kinds: tuple[tuple[str, ...], ...], make: Make) -> list[Problem]:
    found = []
    for values in itertools.product(*kinds):
        if any(kinds[i] is kinds[j] and values[i] == values[j] for i, j in itertools.combinations(range(3), 2)):
            continue
        goal, start, target = make(*values)
        found.append(Problem("|".join((key, *values)), goal, canonical_json(start), canonical_json(target), key))
    return found


@lru_cache(maxsize=None)
def splits(level: int) -> tuple[tuple[Problem, ...], tuple[Problem, ...]]:
    """(train, held_out) of a level."""
    if level not in TEMPLATES:
        raise ConfigError(f"task.level: filesystem has levels {', '.join(map(str, TEMPLATES))} (goals of 1 or 2 "
                          f"operations), got {level}")
    problems = [p for key, (kinds, make) in TEMPLATES[level].items() for p in _problems(key, kinds, make)]
    return split_by_hash(problems, lambda p: p.canonical)


def _difference(path: str, want: dict[str, str | None], have: dict[str, str | None]) -> str:
    if path not in have:
        return "missing"
    if path not in want:
        return "should not exist"
    if (want[path] is None) != (have[path] is None):
        return "is a folder, expected a file" if have[path] is None else "is a file, expected a folder"
    return f"text is {have[path][:40]!r}, expected {want[path][:40]!r}"


def _wrong_paths(want: dict[str, str | None], have: dict[str, str | None]) -> list[str]:
    """The paths (of either tree) whose existence, kind or text differ; 0 stands for absent (None is a folder)."""
    return [path for path in sorted(set(want) | set(have)) if want.get(path, 0) != have.get(path, 0)]


def score_tree(final_state: str, reference: str, partial_credit: bool) -> Verdict:
    """The verdict on a final tree against the target (module docstring); never raises."""
    try:
        want = flatten(parse_tree(reference))
    except BadTree as err:
        return error_verdict(f"the reference is not a file tree: {err}", scorable=False)
    try:
        have = flatten(parse_tree(final_state))
    except BadTree as err:
        return Verdict(Outcome.UNPARSEABLE, 0.0, f"the final state is not a file tree: {err}")
    paths = sorted(set(want) | set(have))
    wrong = _wrong_paths(want, have)
    if not wrong:
        return Verdict(Outcome.CORRECT, 1.0, "the tree matches the target")
    share = (len(paths) - len(wrong)) / len(paths)
    return Verdict(Outcome.WRONG, share if partial_credit else 0.0,
                   f"{wrong[0]}: {_difference(wrong[0], want, have)} ({len(paths) - len(wrong)} of {len(paths)} "
                   f"paths match)")


class FilesystemEpisode:
    """The tree the calls change. Step reward (read with episode.credit=process), checked against the reference as
    the calculator's: progress x precision for a turn whose calls all succeeded. Progress = the paths
    the turn leaves right beyond the fewest wrong at any turn's end before / the paths wrong at the start, so an
    episode earns at most 1 in all, however it splits its work, and a path fixed, undone and fixed again is paid
    once. Precision = the changing calls (write, mkdir, mv, rm) that left fewer paths wrong than any state before
    them / the changing calls: a turn's pay does not grow with its calls, and guessing within a turn (three writes
    of a file, the last right; mv a b then mv b a then mv a b) earns less than the one call that does it. Reads
    (ls, cat) are valid and left out of precision: reading does something for the model (the "copy" goal needs a
    cat), and changes nothing to pay. A changing call that left the tree as it was (a write of the text a file
    already holds) did nothing: it is a failed call, so its turn earns 0. A turn with a bad call earns nothing, and
    its progress is spent with it (a later turn is paid only for what its own calls fix)."""

    def __init__(self, tree: FileTree, limit_s: float, target: dict[str, str | None]) -> None:
        self.tree, self.limit_s, self.target = tree, limit_s, target
        self.distance = self.fewest_wrong = self._wrong()

    def _wrong(self) -> int:
        return len(_wrong_paths(self.target, flatten(self.tree.root)))

    def _tools(self, changes: list[bool]) -> dict[str, Callable[..., str]]:
        """The tree's tools; each changing call that succeeds appends to changes whether it left fewer paths wrong
        than any state before it in the episode, and one that changed nothing becomes a failed call."""
        low = self.fewest_wrong  # the fewest paths wrong so far, this turn's states included

        def changing(name: str, tool: Callable[..., str]) -> Callable[..., str]:
            def run(**arguments: str) -> str:
                nonlocal low
                before = self.tree.to_json()
                result = tool(**arguments)
                if isinstance(result, ToolFailure):
                    return result
                if self.tree.to_json() == before:
                    where = arguments.get("path", arguments.get("src", ""))[:60]
                    return tool_failure(f"{name}: {where}: nothing changed (it already was so)")
                wrong = self._wrong()
                changes.append(wrong < low)
                low = min(low, wrong)
                return result
            return run
        return {name: tool if name in READS else changing(name, tool) for name, tool in self.tree.handlers().items()}

    def respond(self, turn: ModelTurn) -> Observation:
        changes: list[bool] = []
        observation = run_calls(turn, self._tools(changes), self.limit_s)
        if observation.done:
            return observation
        wrong = self._wrong()
        progress, self.fewest_wrong = max(self.fewest_wrong - wrong, 0), min(wrong, self.fewest_wrong)
        if observation.invalid_calls:  # a turn with a bad call earns nothing (run_calls answers with reward 0.0)
            return observation
        # max(.., 1): a change made by a call abandoned at its time limit in an earlier turn lands in none
        return replace(observation, reward=progress / self.distance * sum(changes) / max(len(changes), 1))

    def final_state(self) -> str:
        return self.tree.to_json()


class FilesystemEnvironment:
    name = "filesystem"
    tools = TOOLS
    scores_state = True  # the final tree against the reference tree is the outcome

    def __init__(self, episode: EpisodeConfig) -> None:
        self.limit_s, self.partial_credit = episode.tool_time_limit_s, episode.partial_credit

    def start(self, prompt: Prompt) -> Episode:
        start = prompt.columns.get("start")
        try:
            tree = FileTree.from_json(start)
        except BadTree as err:  # a prompt of another task, or an edited record: not something a model wrote
            raise ValueError(f"prompt {prompt.id!r} has no valid starting tree in columns['start']: {err}") from None
        try:
            target = flatten(parse_tree(prompt.reference))
        except BadTree as err:
            raise ValueError(f"prompt {prompt.id!r} has no valid target tree as its reference: {err}") from None
        return FilesystemEpisode(tree, self.limit_s, target)

    def score_state(self, final_state: str, prompt: Prompt) -> Verdict | None:
        return score_tree(final_state, prompt.reference, self.partial_credit)


def listing(tree: Tree) -> str:
    """"docs/, docs/notes.txt": what the model is told is there before it starts."""
    return ", ".join(path + "/" if text is None else path for path, text in sorted(flatten(tree).items()))


def signatures(tools: tuple[ToolSpec, ...]) -> str:
    """"ls(path), mv(src, dst), ...": the tools in one line. With episode.list_tools=false (the setting small models
    need, docs/agents.md) the model saw only the tools its worked examples use and invented others
    ("rename", "delete", "replace_text"); this line in the question took SmolLM2-135M from 2 to 6 successes and from
    19 to 34 valid calls in 80 held-out episodes."""
    return ", ".join(f"{t.name}({', '.join(t.parameters['properties'])})" for t in tools)


def question(goal: str, start: Tree) -> str:
    return f"Files: {listing(start)}. Tools: {signatures(TOOLS)}. Task: {goal} Say Done when finished."


# Names in no template: the example is in no split. The sentence before the calls: see common.one_shot_messages.
EXAMPLE = Example(question("Create a folder box and move a.txt into it.", {"a.txt": "hi"}), "I will use the tools.",
                  (ExampleTurn((("mkdir", {"path": "box"}), ("mv", {"src": "a.txt", "dst": "box"})), ("ok", "ok")),),
                  "Done.")
# The second example shows the other changing tools (rm, mv as a rename, write): with episode.list_tools=false the
# examples are all the model sees of the tools, and without write in them SmolLM2-135M invented tools ("rename",
# "create_file") on the goals that need it.
SECOND_EXAMPLE = Example(
    question("Delete old.txt, rename b.txt to c.txt and create a file n.txt with the text 'hi'.",
             {"old.txt": "x", "b.txt": "y"}), "I will use the tools.",
    (ExampleTurn((("rm", {"path": "old.txt"}), ("mv", {"src": "b.txt", "dst": "c.txt"}),
                  ("write", {"path": "n.txt", "content": "hi"})), ("ok", "ok", "ok")),), "Done.")


class FilesystemTask(SplitTask):
    """Goals of one level over small trees; scored on the final tree alone (answer_verifiers = {})."""

    def __init__(self, config: TaskConfig) -> None:
        self.answer_verifiers: dict[str, float] | None = {}  # state only: no answer verifier applies
        self.config = config
        self.level = config.level
        self.name = f"filesystem-l{self.level}"
        self.train, self.held_out = splits(self.level)

    def prompt(self, problem: Problem, split: str) -> Prompt:
        goal = question(problem.goal, parse_tree(problem.start))
        messages = one_shot_messages((EXAMPLE, SECOND_EXAMPLE), goal, self.config)
        return Prompt(id=f"filesystem-l{self.level}/{split}/{problem.canonical}", messages=messages,
                      reference=problem.target,
                      columns={"level": self.level, "template": problem.template, "start": problem.start})

    def environment(self, episode: EpisodeConfig) -> FilesystemEnvironment:
        return FilesystemEnvironment(episode)
