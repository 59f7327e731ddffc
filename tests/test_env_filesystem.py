"""The filesystem environment and task: each tool and its POSIX-like errors, paths that try to
leave the root, the scoring of final trees (exact and partial credit), the problems and their split, and an episode
driven by hand-written model turns through the strict parser."""
from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import replace

import pytest

from rlvr.agents.protocol import Environment, Episode
from rlvr.agents.tool_calls import parse_turn
from rlvr.config.run import ConfigError, TaskConfig
from rlvr.config.sections import EpisodeConfig
from rlvr.tasks import build_task
from rlvr.tasks.envs import filesystem
from rlvr.tasks.envs.filesystem import TOOLS, FilesystemTask, score_tree, splits
from rlvr.tasks.envs.fs_tree import MAX_DEPTH, MAX_ENTRIES, BadTree, FileTree, FsError, canonical_json, parse_tree
from rlvr.types import Outcome


def tools(root=None):
    tree = FileTree(root if root is not None else {"docs": {"a.txt": "x"}, "notes.txt": "hello", "empty": {}})
    return tree, tree.handlers()


def test_ls_and_cat():
    tree, t = tools()
    assert t["ls"](path=".") == "docs/\nempty/\nnotes.txt" and t["ls"](path="/") == t["ls"](path="")
    assert t["ls"](path="docs") == "a.txt" and t["ls"](path="empty") == "(empty)"
    assert t["ls"](path="notes.txt") == "notes.txt"
    assert t["ls"](path="nope") == "error: ls: nope: No such file or directory"
    assert t["cat"](path="docs/a.txt") == "x" and t["cat"](path="/notes.txt") == "hello"
    assert t["cat"](path="docs") == "error: cat: docs: Is a directory"
    assert t["cat"](path="notes.txt/a") == "error: cat: notes.txt/a: Not a directory"
    assert t["cat"](path="docs/b/c") == "error: cat: docs/b/c: No such file or directory"


def test_write_and_mkdir():
    tree, t = tools()
    assert t["write"](path="new.txt", content="hi") == "ok" and t["write"](path="notes.txt", content="bye") == "ok"
    assert tree.root["new.txt"] == "hi" and tree.root["notes.txt"] == "bye"  # created, then replaced
    assert t["write"](path="docs", content="x") == "error: write: docs: Is a directory"
    assert t["write"](path="no/a.txt", content="x") == "error: write: no/a.txt: No such file or directory"
    assert t["write"](path="notes.txt/a", content="x") == "error: write: notes.txt/a: Not a directory"
    assert "File too large" in t["write"](path="big.txt", content="y" * 501)
    assert "root folder" in t["write"](path="/", content="x")
    assert t["mkdir"](path="docs/sub") == "ok" and tree.root["docs"]["sub"] == {}
    assert t["mkdir"](path="docs") == "error: mkdir: docs: File exists"
    assert t["mkdir"](path="notes.txt") == "error: mkdir: notes.txt: File exists"
    assert t["mkdir"](path="x/y") == "error: mkdir: x/y: No such file or directory"  # no -p


def test_rm_removes_files_and_whole_folders():
    tree, t = tools()
    assert t["rm"](path="notes.txt") == "ok" and "notes.txt" not in tree.root
    assert t["rm"](path="docs") == "ok" and "docs" not in tree.root  # with a.txt in it
    assert t["rm"](path="docs") == "error: rm: docs: No such file or directory"
    assert "root folder" in t["rm"](path="/") and "root folder" in t["rm"](path="empty/..")
    assert tree.root == {"empty": {}}


def test_mv_semantics():
    tree, t = tools()
    assert t["mv"](src="notes.txt", dst="renamed.txt") == "ok"  # rename
    assert t["mv"](src="renamed.txt", dst="docs") == "ok"  # into a folder, keeping the name
    assert tree.root == {"docs": {"a.txt": "x", "renamed.txt": "hello"}, "empty": {}}
    assert t["mv"](src="docs/renamed.txt", dst="docs/a.txt") == "ok"  # a file replaces a file
    assert tree.root["docs"] == {"a.txt": "hello"}
    assert t["mv"](src="docs", dst="empty") == "ok"  # a folder moves into a folder
    assert tree.root == {"empty": {"docs": {"a.txt": "hello"}}}
    assert t["mv"](src="empty/docs/a.txt", dst="/") == "ok" and tree.root["a.txt"] == "hello"  # to the top


def test_tools_act_on_the_last_name_of_a_nested_path():
    """write, mkdir and rm on docs/<name> look at <name> inside docs, not at docs: a folder is not overwritten by a
    file, a file not by a folder; a full tree still lets a file be replaced."""
    tree, t = tools({"docs": {"a.txt": "x", "sub": {}}})
    assert t["write"](path="docs/sub", content="y") == "error: write: docs/sub: Is a directory"
    assert t["mkdir"](path="docs/a.txt") == "error: mkdir: docs/a.txt: File exists"
    assert tree.root == {"docs": {"a.txt": "x", "sub": {}}}
    assert t["rm"](path="docs/a.txt") == "ok" and tree.root == {"docs": {"sub": {}}}
    assert t["write"](path="docs/a.txt", content="x") == "ok"
    assert [t["write"](path=f"f{i}", content="") for i in range(MAX_ENTRIES - 3)] == ["ok"] * (MAX_ENTRIES - 3)
    assert t["write"](path="docs/a.txt", content="new") == "ok" and tree.root["docs"]["a.txt"] == "new"  # full: 40


def test_mv_onto_an_empty_folder_of_the_same_name():
    """POSIX mv: a folder may replace an empty folder; a file may not replace a folder, empty or not."""
    tree, t = tools({"box": {}, "into": {"box": {}, "f": {}}, "f": "text"})
    assert t["mv"](src="f", dst="into") == "error: mv: into: cannot overwrite directory with non-directory"
    assert t["mv"](src="box", dst="into") == "ok"  # box replaces the empty into/box
    assert tree.root == {"into": {"box": {}, "f": {}}, "f": "text"}


@pytest.mark.parametrize("src, dst, message", [
    ("nope", "x", "nope: No such file or directory"),
    ("notes.txt", "notes.txt", "notes.txt and notes.txt are the same file"),
    ("docs/a.txt", "docs", "are the same file"),  # into its own folder = itself
    ("docs", "docs/inner", "cannot move docs to a subdirectory of itself"),
    ("docs", "docs", "cannot move docs to a subdirectory of itself"),
    ("notes.txt", "missing/x", "missing/x: No such file or directory"),
    ("docs", "notes.txt", "cannot overwrite non-directory with directory"),
    ("empty", "big", "big: Directory not empty"),  # empty would replace big/empty, which holds a file
    ("/", "docs", "root folder"),
])
def test_mv_errors_leave_the_tree_alone(src, dst, message):
    tree, t = tools({"docs": {"a.txt": "x"}, "notes.txt": "hello", "empty": {}, "big": {"empty": {"f": "1"}}})
    before = canonical_json(tree.root)
    result = t["mv"](src=src, dst=dst)
    assert result.startswith("error: mv: ") and message in result, result
    assert canonical_json(tree.root) == before


@pytest.mark.parametrize("path", ["..", "../etc/passwd", "docs/../../x", "/..", "./../notes.txt"])
def test_paths_cannot_leave_the_root(path):
    tree, t = tools()
    before = canonical_json(tree.root)
    for name in ("ls", "cat", "mkdir", "rm"):
        assert "Permission denied (outside the root folder)" in t[name](path=path)
    assert "outside the root" in t["write"](path=path, content="x")
    assert "outside the root" in t["mv"](src="notes.txt", dst=path)
    assert canonical_json(tree.root) == before


def test_paths_are_normalized():
    tree, t = tools()
    assert t["cat"](path="/docs/../notes.txt") == "hello" and t["cat"](path="./docs//a.txt") == "x"
    assert t["write"](path="docs/./b.txt", content="y") == "ok" and tree.root["docs"]["b.txt"] == "y"
    assert "Invalid argument" in t["cat"](path="a\x00b")
    assert "File name too long" in t["ls"](path="a/" * 200)
    assert "a path is a string" in t["ls"](path=5)  # the schema stops it first; the handler does not rely on that


def test_the_tree_cannot_grow_past_its_bound():
    tree, t = tools({})
    results = [t["write"](path=f"f{i}.txt", content="x") for i in range(MAX_ENTRIES + 1)]
    assert results[:MAX_ENTRIES] == ["ok"] * MAX_ENTRIES and "No space left on device" in results[-1]
    assert "No space left" in t["mkdir"](path="d") and t["write"](path="f0.txt", content="y") == "ok"  # replace


def test_folders_cannot_nest_deeper_than_a_state_reads_back():
    """The tools refuse to build a tree that parse_tree refuses: the episode's final state is its own tree, and a
    17-deep chain of mkdir calls used to leave a state that scored UNPARSEABLE. The top
    folder is level 1, so MAX_DEPTH - 1 = 15 folders fit inside it, one in the next."""
    tree, t = tools({})
    chain = lambda k: "/".join(["d"] * k)  # noqa: E731 - k folders, each inside the last
    assert [t["mkdir"](path=chain(k)) for k in range(1, MAX_DEPTH)] == ["ok"] * (MAX_DEPTH - 1)
    deeper = t["mkdir"](path=chain(MAX_DEPTH))
    assert deeper == f"error: mkdir: {chain(MAX_DEPTH)}: Too many levels of folders (at most 15 inside the top folder)"
    assert parse_tree(tree.to_json()) == tree.root  # 16 levels with the top: the state reads back
    # mv checks the whole moved subtree: e/f is 2 levels; into chain(14) its f would be level 14 + 1 + 2 = 17
    assert t["mkdir"](path="e") == "ok" and t["mkdir"](path="e/f") == "ok"
    moved = t["mv"](src="e", dst=chain(14))
    assert moved.startswith("error: mv: ") and "Too many levels of folders" in moved and "e" in tree.root
    assert t["mv"](src="e", dst=chain(13)) == "ok"  # f at level 13 + 1 + 2 = 16: allowed
    # a folder that holds only a file is 1 level: into chain(15) it would be level 17
    assert t["mkdir"](path="g") == "ok" and t["write"](path="g/x.txt", content="x") == "ok"
    assert "Too many levels of folders" in t["mv"](src="g", dst=chain(15)) and "g" in tree.root
    assert t["write"](path="x.txt", content="x") == "ok"
    assert t["mv"](src="x.txt", dst=chain(15)) == "ok"  # a file is no folder level: it fits in the deepest one
    assert parse_tree(tree.to_json()) == tree.root
    verdict = score_tree(tree.to_json(), canonical_json({}), True)
    assert verdict.outcome is Outcome.WRONG  # a tree that differs, not an UNPARSEABLE state


def test_the_size_bounds_are_inclusive():
    """The bounds the errors state, at the edge: 40 entries, names of 64 characters, paths of 256, files of 500;
    one more is refused."""
    tree, t = tools({})
    assert t["write"](path="n" * 64, content="x" * 500) == "ok" and tree.root["n" * 64] == "x" * 500
    too_long = t["write"](path="m" * 65, content="x")
    assert too_long.endswith(f"Invalid argument (name {'m' * 20!r}... is too long)")
    assert "File too large (at most 500 characters)" in t["write"](path="f", content="x" * 501)
    assert t["ls"](path="./" * 128) == "n" * 64  # 256 characters that resolve to the top folder
    assert t["ls"](path="./" * 128 + ".") == f"error: ls: {('./' * 128)[:57]}...: File name too long"
    assert [t["mkdir"](path=f"d{i}") for i in range(39)] == ["ok"] * 39  # 40 entries with n...n
    assert t["mkdir"](path="d39") == "error: mkdir: d39: No space left on device (at most 40 entries)"
    assert parse_tree(tree.to_json()) == tree.root


def test_canonical_json_is_sorted_and_compact():
    """The final state and the reference are canonical JSON: sorted keys, no spaces, so one tree is one text
    (a prompt's start column equals the episode's untouched final state)."""
    assert canonical_json({"b": "x", "a": {"d": "1", "c": {}}}) == '{"a":{"c":{},"d":"1"},"b":"x"}'
    assert FileTree({"b": "x", "a": {}}).to_json() == '{"a":{},"b":"x"}'


def test_the_question_lists_the_start_with_folders_marked():
    """The model is told what is there before it starts: every path, sorted, folders ending with '/'."""
    assert filesystem.listing({"work": {"notes.txt": "x", "old": {}}, "a.md": "y"}) == \
        "a.md, work/, work/notes.txt, work/old/"
    task = FilesystemTask(TaskConfig(name="filesystem", level=2))
    prompt = next(p for p in task.eval_prompts(10**5) if p.columns["template"] == "move_out")
    _, f, d, _ = prompt.id.split("/eval/")[1].split("|")
    assert prompt.messages[-1]["content"].startswith(f"Files: {d}/, {d}/{f}. Tools: ")


def test_a_state_reads_back_up_to_16_levels_of_folders():
    """parse_tree's bound: the top folder is level 1, so 15 nested folders read back and 16 do not."""
    def nested(levels):
        return '{"d":' * levels + "{}" + "}" * levels

    assert parse_tree(nested(15)) == json.loads(nested(15))
    with pytest.raises(BadTree, match="folders nested deeper than 16"):
        parse_tree(nested(16))
    # the entries inside a folder are checked too, at any depth
    with pytest.raises(BadTree, match="entry 'f' is int"):
        parse_tree('{"a":{"b":{"f":5}}}')


def test_long_paths_are_shown_by_their_start():
    """Error texts quote a path of up to 60 characters whole, a longer one as its first 57 and "..." (60)."""
    tree, t = tools()
    assert t["cat"](path="p" * 60) == f"error: cat: {'p' * 60}: No such file or directory"
    assert t["cat"](path="p" * 61) == f"error: cat: {'p' * 57}...: No such file or directory"


def test_a_missing_parent_is_an_error_not_a_missing_entry():
    """FileTree.node: None when only the last name is missing (a tool may create it); FsError when a folder on
    the way is missing. mv then names the missing folder, not a move into itself."""
    tree, t = tools()
    assert tree.node(("docs", "b"), "docs/b") is None
    with pytest.raises(FsError, match="docs/b/c: No such file or directory"):
        tree.node(("docs", "b", "c"), "docs/b/c")
    assert t["mv"](src="docs", dst="docs/b/c") == "error: mv: docs/b/c: No such file or directory"


def test_an_unreadable_state_says_why_briefly():
    """The detail quotes the JSON error by its first 80 characters."""
    broken = "{" + " " * 100_000 + "x"
    try:
        json.loads(broken)
    except ValueError as err:
        why = str(err)  # "Expecting property name ...: line 1 column 100002 (char 100001)": 85 characters
    verdict = score_tree(broken, canonical_json({"a": "x"}), True)
    assert verdict.detail == f"the final state is not a file tree: not JSON: {why[:80]}" and len(why) > 80


def test_tools_never_raise_on_random_arguments():
    rng = random.Random(0)
    pieces = ["..", ".", "/", "docs", "a.txt", "notes.txt", "", "\x00", "é", "x" * 70]
    tree, t = tools()
    for _ in range(2000):
        path = lambda: "/".join(rng.choice(pieces) for _ in range(rng.randrange(4)))  # noqa: E731
        name = rng.choice(sorted(t))
        args = {"src": path(), "dst": path()} if name == "mv" else {"path": path()}
        if name == "write":
            args["content"] = "c"
        assert isinstance(t[name](**args), str)
    assert FileTree.from_json(tree.to_json()).root == tree.root  # whatever happened, the state reads back


def test_tool_schemas_are_strict():
    assert [s.name for s in TOOLS] == ["ls", "cat", "write", "mkdir", "mv", "rm"]
    for spec in TOOLS:
        schema = spec.parameters
        assert schema["additionalProperties"] is False and set(schema["required"]) == set(schema["properties"])
        assert all(p["type"] == "string" for p in schema["properties"].values())
    turn = parse_turn(0, '<tool_call>{"name": "mv", "arguments": {"src": "a"}}</tool_call>', TOOLS)
    assert not turn.calls and "'dst' is a required property" in turn.errors[0]
    # an argument the tool does not take makes the call invalid: the episode counts it and changes nothing
    task = FilesystemTask(TaskConfig(name="filesystem"))
    prompt = task.eval_prompts(1)[0]
    episode = task.environment(EpisodeConfig()).start(prompt)
    extra = '<tool_call>{"name": "mkdir", "arguments": {"path": "new", "mode": "0777"}}</tool_call>'
    observation = episode.respond(parse_turn(0, extra, TOOLS))
    assert (observation.valid_calls, observation.invalid_calls) == (0, 1) and "invalid arguments" in observation.text
    assert episode.final_state() == prompt.columns["start"]


def test_score_exact_and_partial_credit():
    ref = canonical_json({"docs": {"a": "x"}, "b": "y"})
    assert score_tree(ref, ref, False).outcome is Outcome.CORRECT
    # union {docs, docs/a, b}: docs (a folder in both) and b match, docs/a is missing -> 2/3
    missing = score_tree(canonical_json({"docs": {}, "b": "y"}), ref, True)
    assert missing.outcome is Outcome.WRONG and missing.score == pytest.approx(2 / 3)
    assert missing.detail.startswith("docs/a: missing")
    assert score_tree(canonical_json({"docs": {}, "b": "y"}), ref, False).score == 0.0
    # union {a, b, c}: a's text differs, c should not exist, b matches -> 1/3; a is the first differing path
    ref2 = canonical_json({"a": "x", "b": "y"})
    extra = score_tree(canonical_json({"a": "z", "b": "y", "c": "w"}), ref2, True)
    assert extra.score == pytest.approx(1 / 3) and extra.detail.startswith("a: text is 'z', expected 'x'")
    kind = score_tree(canonical_json({"a": "x"}), canonical_json({"a": {}}), True)
    assert kind.score == 0.0 and kind.detail.startswith("a: is a file, expected a folder")
    # union {docs, docs/a, a}: after `mv docs/a a` only docs matches -> 1/3
    moved = score_tree(canonical_json({"docs": {}, "a": "x"}), canonical_json({"docs": {"a": "x"}}), True)
    assert moved.score == pytest.approx(1 / 3) and moved.outcome is Outcome.WRONG
    assert score_tree("{}", "{}", True).outcome is Outcome.CORRECT  # nothing on both sides: equal
    # union {a, b}: b should not exist, a matches -> 1/2; b is the first differing path
    surplus = score_tree(canonical_json({"a": "x", "b": "y"}), canonical_json({"a": "x"}), True)
    assert surplus.detail == "b: should not exist (1 of 2 paths match)" and surplus.score == pytest.approx(1 / 2)
    # a text is quoted by its first 40 characters: the detail goes to logs and samples, a file holds up to 500
    long, other = "abcdefghij" * 5, "ABCDEFGHIJ" * 5
    texts = score_tree(canonical_json({"a": long}), canonical_json({"a": other}), True)
    assert texts.detail == f"a: text is {long[:40]!r}, expected {other[:40]!r} (0 of 1 paths match)"


@pytest.mark.parametrize("state", ["not json", "[1, 2]", '{"a": 5}', '{"a/b": "x"}', '{"..": {}}', "[" * 100000,
                                   json.dumps({f"f{i}": "x" for i in range(MAX_ENTRIES + 1)}), None])
def test_unreadable_final_states_are_verdicts(state):
    verdict = score_tree(state, canonical_json({"a": "x"}), True)
    assert verdict.outcome is Outcome.UNPARSEABLE and verdict.score == 0.0 and verdict.scorable


def test_a_bad_reference_is_not_the_models_fault():
    verdict = score_tree("{}", "oops", True)
    assert verdict.outcome is Outcome.ERROR and not verdict.scorable


def solve(problem):
    """The calls that reach each template's target, from the problem's names."""
    key, *names = problem.canonical.split("|")
    f, second, third = names
    plan = {"mkdir": [("mkdir", {"path": second})], "write": [("write", {"path": second, "content": third})],
            "rename": [("mv", {"src": f, "dst": second})], "delete": [("rm", {"path": f})],
            "overwrite": [("write", {"path": f, "content": third})], "move_into": [("mv", {"src": f, "dst": second})],
            "mkdir_move": [("mkdir", {"path": second}), ("mv", {"src": f, "dst": second})],
            "move_out": [("mv", {"src": f"{second}/{f}", "dst": "."}), ("rm", {"path": second})],
            "copy": [("write", {"path": second, "content": third})]}
    return plan[key]


def test_the_problems_by_hand():
    """Level 1: mkdir and move_into 8 files x 6 folders x 8 texts = 384 each; write, rename, delete (two different
    files) 8 x 7 x 8 = 448 each; overwrite (two different texts) 8 x 8 x 7 = 448: 2 x 384 + 4 x 448 = 2560.
    Level 2: mkdir_move, move_out 384 each, copy 448: 1216. A second text comes from the first (_next: the next in
    TEXTS, wrapping), so it differs and adds no axis."""
    by_name = {}
    for level, total in ((1, 2560), (2, 1216)):
        train, held = splits.__wrapped__(level)  # built afresh, not read from splits' cache
        assert len(train) + len(held) == total
        by_name.update({p.canonical: p for p in train + held})
    write = by_name["write|notes.txt|todo.txt|hello"]  # notes.txt holds the text after "hello": "buy milk"
    assert (write.start, write.target) == ('{"notes.txt":"buy milk"}', '{"notes.txt":"buy milk","todo.txt":"hello"}')
    delete = by_name["delete|notes.txt|todo.txt|see you"]  # "see you" is the last text: the other is the first
    assert (delete.start, delete.target) == ('{"notes.txt":"see you","todo.txt":"hello"}', '{"todo.txt":"hello"}')
    assert "overwrite|notes.txt|hello|hello" not in by_name and "rename|notes.txt|notes.txt|hello" not in by_name
    # two parameters of one kind always differ, so no goal is already reached at the start
    assert all(p.start != p.target for p in by_name.values())


def test_the_shared_problems_cannot_be_changed():
    """splits() is a cache every task of the process shares: its problems are frozen."""
    problem = FilesystemTask(TaskConfig(name="filesystem")).eval_prompts(1)[0]
    held = splits(1)[1][0]
    assert problem.reference == held.target
    with pytest.raises(dataclasses.FrozenInstanceError):
        held.target = "{}"


def test_every_problem_is_small_and_reachable_with_its_level_of_calls():
    for level in (1, 2):
        train, held = splits(level)
        for problem in train + held:
            tree, handlers = tools(json.loads(problem.start))
            assert 1 <= len(tree.root) + sum(isinstance(v, dict) and len(v) for v in tree.root.values()) <= 3
            steps = solve(problem)
            assert len(steps) == level or problem.template == "copy"  # copy: cat, then write
            assert [handlers[name](**args) for name, args in steps] == ["ok"] * len(steps)
            assert score_tree(tree.to_json(), problem.target, False).outcome is Outcome.CORRECT, problem


def test_split_is_hashed_disjoint_and_stable_and_the_example_is_in_none():
    for level in (1, 2):
        train, held = splits(level)
        assert len(held) >= 200 and not {p.canonical for p in train} & {p.canonical for p in held}
        assert all("a.txt" not in p.canonical and "box" not in p.canonical for p in train + held)
    task = FilesystemTask(TaskConfig(name="filesystem"))
    held = {p.id.split("/eval/")[1] for p in task.eval_prompts(10**5)}
    assert len(held) == len(splits(1)[1])
    for seed in (0, 1):
        stream = task.train_prompts(seed)
        assert not {next(stream).id.split("/train/")[1] for _ in range(300)} & held
    assert [p.id for p in FilesystemTask(TaskConfig(name="filesystem")).eval_prompts(30)] == \
        [p.id for p in task.eval_prompts(30)]


def test_task_registration_and_prompt():
    task = build_task(TaskConfig(name="filesystem", level=2))
    assert isinstance(task, FilesystemTask) and task.answer_verifiers == {}
    prompt = task.eval_prompts(1)[0]
    # one call turn each
    assert [m["role"] for m in prompt.messages] == ["user", "assistant", "tool", "assistant"] * 2 + ["user"]
    shown = parse_turn(0, prompt.messages[1]["content"], TOOLS)
    assert len(shown.calls) == 2 and not shown.errors  # the examples' calls are valid
    second = parse_turn(0, prompt.messages[5]["content"], TOOLS)
    assert [c.name for c in second.calls] == ["rm", "mv", "write"] and not second.errors
    assert prompt.id.startswith("filesystem-l2/eval/") and json.loads(prompt.reference) is not None
    assert prompt.messages[-1]["content"].startswith("Files: ")
    # the tools in one line: with episode.list_tools=false the model otherwise invents tools (filesystem.signatures)
    tools = "Tools: ls(path), cat(path), write(path, content), mkdir(path), mv(src, dst), rm(path)."
    assert tools in prompt.messages[-1]["content"] and tools in prompt.messages[0]["content"]
    with pytest.raises(ConfigError, match="filesystem has levels 1, 2"):
        build_task(TaskConfig(name="filesystem", level=4))


def test_episode_driven_by_parsed_turns():
    task = FilesystemTask(TaskConfig(name="filesystem", level=2))
    prompt = next(p for p in task.eval_prompts(10**5) if p.columns["template"] == "mkdir_move")
    _, f, d, _ = prompt.id.split("/eval/")[1].split("|")
    env = task.environment(EpisodeConfig(partial_credit=True))
    assert isinstance(env, Environment)
    episode = env.start(prompt)
    assert isinstance(episode, Episode) and episode.final_state() == prompt.columns["start"]

    def respond(index, text):
        return episode.respond(parse_turn(index, text, env.tools))

    mkdir = f'<tool_call>{{"name": "mkdir", "arguments": {{"path": "{d}"}}}}</tool_call>'
    first = respond(0, "I will use the tools.\n" + mkdir)
    assert (first.valid_calls, first.invalid_calls, first.done) == (1, 0, False)
    half = env.score_state(episode.final_state(), prompt)  # union {d, d/f, f}: only d matches -> 1/3
    assert half.outcome is Outcome.WRONG and half.score == pytest.approx(1 / 3)
    # step reward = progress: start {f} vs target {d, d/f}: 3 paths wrong; after mkdir d: 2 wrong -> 1 of the 3
    # paths fixed, by the turn's one change (precision 1): 1/3
    assert first.reward == pytest.approx(1 / 3)
    look = respond(1, f'<tool_call>{{"name": "ls", "arguments": {{"path": "{d}"}}}}</tool_call>')
    assert look.valid_calls == 1 and look.reward == 0.0  # it ran, but the tree is no closer
    malformed = respond(1, '<tool_call>{"name": "mv", "arguments": {"src": "x"}</tool_call>')
    assert (malformed.valid_calls, malformed.invalid_calls) == (0, 1) and "malformed" in malformed.text
    unknown = respond(2, '<tool_call>{"name": "cp", "arguments": {"src": "x", "dst": "y"}}</tool_call>')
    assert (unknown.valid_calls, unknown.invalid_calls) == (0, 1) and "unknown tool 'cp'" in unknown.text
    missing = respond(3, '<tool_call>{"name": "cat", "arguments": {"path": "nowhere.txt"}}</tool_call>')
    # a call the tool cannot carry out is shown as an error and counted as a failed call
    assert missing.text == "error: cat: nowhere.txt: No such file or directory"
    assert (missing.valid_calls, missing.invalid_calls, missing.reward) == (0, 1, 0.0)
    back = respond(3, f'<tool_call>{{"name": "rm", "arguments": {{"path": "{d}"}}}}</tool_call>')
    assert back.text == "ok" and back.reward == 0.0  # 3 wrong again: a step back
    redo = respond(4, mkdir)
    assert redo.reward == 0.0  # 2 wrong, no fewer than before: the undone step is not paid twice
    spoiled = respond(5, f'<tool_call>{{"name": "mv", "arguments": {{"src": "{f}", "dst": "{d}"}}}}</tool_call>'
                         '<tool_call>{"name": "cat", "arguments": {}}</tool_call>')
    assert (spoiled.valid_calls, spoiled.invalid_calls, spoiled.reward) == (1, 1, 0.0)  # a bad call spoils the turn
    episode = env.start(prompt)
    respond(0, mkdir)
    moved = respond(1, f'<tool_call>{{"name": "mv", "arguments": {{"src": "{f}", "dst": "{d}"}}}}</tool_call>')
    # 2 wrong -> 0: the other 2 of 3 paths; the episode's step rewards add up to 1/3 + 2/3 = 1
    assert moved.text == "ok" and moved.valid_calls == 1 and moved.reward == pytest.approx(2 / 3)
    final = respond(2, "Done.")
    assert final.done and final.text is None and final.reward == 0.0
    verdict = env.score_state(episode.final_state(), prompt)
    assert verdict.outcome is Outcome.CORRECT and verdict.score == 1.0
    assert env.start(prompt).final_state() == prompt.columns["start"]  # a new episode starts fresh
    assert env.score_state("not json", prompt).outcome is Outcome.UNPARSEABLE
    with pytest.raises(ValueError, match="no valid target tree"):
        env.start(replace(prompt, reference="not json"))
    with pytest.raises(ValueError, match="no valid starting tree"):
        env.start(build_task(TaskConfig(name="calculator")).eval_prompts(1)[0])


def test_filesystem_module_names_its_example_outside_the_problem_names():
    assert "a.txt" not in filesystem.FILES and "box" not in filesystem.FOLDERS
