"""The in-memory file tree of the filesystem environment and its six tools.

A tree is nested dicts: a folder maps names to entries, a file is its text. Its canonical JSON (sorted keys, no
spaces) is the episode's final state and the task's reference. Paths are read relative to the root whatever
their leading "/"; "." and empty parts are dropped, ".." goes up one level and a ".." above the root is refused,
so no path leaves the tree. Every tool returns text: "ok", a listing, a file's content, or a POSIX-like
"error: <tool>: <path>: <reason>" (No such file or directory, Not a directory, Is a directory, File exists, ...);
nothing the model passes raises. Sizes are bounded (entries, folder depth, name and path lengths, file size) so a
looping model cannot grow the state that every later turn's prompt carries. The tools refuse to build what
parse_tree would refuse to read back: a live tree's final state is always a tree. A name holds no "/", control
character, line break or lone surrogate (a name with a newline was listed as two entries by ls); a file's text
holds anything but a lone surrogate, so the state always encodes as UTF-8; error messages quote paths escaped, on
one line (rlvr/agents/text_safety.py).
"""
from __future__ import annotations

import json
from typing import Any, Callable, Union

from rlvr.agents.text_safety import lone_surrogate, name_problem, shown_name
from rlvr.agents.tool_calls import tool_failure

Node = Union[dict, str]  # a folder (name -> Node) or a file's text
MAX_ENTRIES = 40  # files and folders in the whole tree; tasks start with 1-3
MAX_NAME_CHARS = 64
MAX_PATH_CHARS = 256
MAX_FILE_CHARS = 500  # a file's text; task files hold a few words
MAX_DEPTH = 16  # folder levels a tree may have, the top folder counted (mkdir and mv refuse to go deeper)


class FsError(Exception):
    """A tool's failure, told back to the model as text."""


class BadTree(ValueError):
    """A JSON text that is not a file tree."""


def canonical_json(root: dict) -> str:
    return json.dumps(root, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _name_problem(name: object) -> str | None:
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name:
        return f"{name!r} is not a file or folder name"
    if len(name) > MAX_NAME_CHARS:
        return f"name {name[:20]!r}... is too long"
    # control characters, line breaks, lone surrogates: a name with a newline listed as two entries
    problem = name_problem(name)
    return f"{name[:20]!r} is not a file or folder name: {problem}" if problem else None


def parse_tree(text: object) -> dict:
    """A canonical-JSON tree back into nested dicts; BadTree says why not (never another exception)."""
    if not isinstance(text, str):
        raise BadTree(f"a tree is JSON text, got {type(text).__name__}")
    try:
        root = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise BadTree(f"not JSON: {str(err)[:80]}") from None
    if not isinstance(root, dict):
        raise BadTree(f"a tree is a JSON object of its top folder, got {type(root).__name__}")
    stack, count = [(root, 1)], 0
    while stack:
        folder, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadTree(f"folders nested deeper than {MAX_DEPTH}")
        for name, node in folder.items():
            count += 1
            problem = _name_problem(name)
            if problem:
                raise BadTree(problem)
            if isinstance(node, dict):
                stack.append((node, depth + 1))
            elif not isinstance(node, str):
                raise BadTree(f"entry {name!r} is {type(node).__name__}: a folder is an object, a file a string")
    if count > MAX_ENTRIES:
        raise BadTree(f"more than {MAX_ENTRIES} entries")
    return root


def levels(node: Node) -> int:
    """The folder levels of node: 0 for a file, 1 for a folder without subfolders, 1 + its deepest subfolder's."""
    if not isinstance(node, dict):
        return 0
    return 1 + max((levels(child) for child in node.values()), default=0)


def flatten(root: dict) -> dict[str, str | None]:
    """path ("docs/notes.txt") -> the file's text, or None for a folder; the root itself is not listed."""
    paths: dict[str, str | None] = {}
    stack = [("", root)]
    while stack:
        prefix, folder = stack.pop()
        for name, node in folder.items():
            path = prefix + name
            if isinstance(node, dict):
                paths[path] = None
                stack.append((path + "/", node))
            else:
                paths[path] = node
    return paths


def _shown(path: object) -> str:
    """The path as a message quotes it: at most 60 characters, on one line, nothing a name may not hold raw."""
    text = shown_name(path) if isinstance(path, str) else repr(path)
    return text if len(text) <= 60 else text[:57] + "..."


def _tool(name: str, method: Callable[..., str]) -> Callable[..., str]:
    """The tool's result, or its FsError as "error: <tool>: <reason>" text, a failed call (tool_calls.ToolFailure)."""
    def run(**arguments: Any) -> str:
        try:
            return method(**arguments)
        except FsError as err:
            return tool_failure(f"{name}: {err}")
    return run


class FileTree:
    """A live tree and its tools; each tool method returns text or raises FsError (the handlers catch it)."""

    def __init__(self, root: dict) -> None:
        self.root = root

    @classmethod
    def from_json(cls, text: str) -> "FileTree":
        return cls(parse_tree(text))

    def to_json(self) -> str:
        return canonical_json(self.root)

    def handlers(self) -> dict[str, Callable[..., str]]:
        """Tool name -> handler(**arguments) for rlvr.agents.tool_calls.run_calls."""
        return {name: _tool(name, getattr(self, name)) for name in ("ls", "cat", "write", "mkdir", "mv", "rm")}

    # -- paths -----------------------------------------------------------------------------------------------
    def parts(self, path: object) -> tuple[str, ...]:
        """The path's names from the root; FsError for what no POSIX path resolves to here."""
        if not isinstance(path, str):
            raise FsError(f"{_shown(path)}: a path is a string")
        if len(path) > MAX_PATH_CHARS:
            raise FsError(f"{_shown(path)}: File name too long")
        names: list[str] = []
        for piece in path.strip().split("/"):
            if piece in ("", "."):
                continue
            if piece == "..":
                if not names:
                    raise FsError(f"{_shown(path)}: Permission denied (outside the root folder)")
                names.pop()
                continue
            problem = _name_problem(piece)
            if problem:
                raise FsError(f"{_shown(path)}: Invalid argument ({problem})")
            names.append(piece)
        return tuple(names)

    def node(self, names: tuple[str, ...], path: object) -> Node | None:
        """The entry at names, None when the last name is missing; FsError when a parent is missing or a file."""
        node: Node = self.root
        for depth, name in enumerate(names):
            if not isinstance(node, dict):
                raise FsError(f"{_shown(path)}: Not a directory")
            if name not in node:
                if depth < len(names) - 1:
                    raise FsError(f"{_shown(path)}: No such file or directory")
                return None
            node = node[name]
        return node

    def parent(self, names: tuple[str, ...], path: object) -> dict:
        """The folder that holds (or would hold) the entry at names."""
        if not names:
            raise FsError(f"{_shown(path)}: Permission denied (the root folder)")
        folder = self.node(names[:-1], path)
        if folder is None:
            raise FsError(f"{_shown(path)}: No such file or directory")
        if not isinstance(folder, dict):
            raise FsError(f"{_shown(path)}: Not a directory")
        return folder

    def _room_for(self, entries: int, path: object) -> None:
        if len(flatten(self.root)) + entries > MAX_ENTRIES:
            raise FsError(f"{_shown(path)}: No space left on device (at most {MAX_ENTRIES} entries)")

    @staticmethod
    def _depth_for(names: tuple[str, ...], node: Node, path: object) -> None:
        """FsError when node placed at names would nest folders deeper than MAX_DEPTH (the root is level 1, a
        folder at names is level len(names) + 1): the state would no longer read back (parse_tree)."""
        if len(names) + levels(node) > MAX_DEPTH:
            raise FsError(f"{_shown(path)}: Too many levels of folders (at most {MAX_DEPTH - 1} inside the top "
                          f"folder)")

    # -- tools -----------------------------------------------------------------------------------------------
    def ls(self, path: str) -> str:
        node = self.node(self.parts(path), path)
        if node is None:
            raise FsError(f"{_shown(path)}: No such file or directory")
        if isinstance(node, str):
            return _shown(path).strip()
        names = [name + "/" if isinstance(child, dict) else name for name, child in sorted(node.items())]
        return "\n".join(names) if names else "(empty)"

    def cat(self, path: str) -> str:
        node = self.node(self.parts(path), path)
        if node is None:
            raise FsError(f"{_shown(path)}: No such file or directory")
        if isinstance(node, dict):
            raise FsError(f"{_shown(path)}: Is a directory")
        return node

    def write(self, path: str, content: str) -> str:
        names = self.parts(path)
        folder = self.parent(names, path)
        if isinstance(folder.get(names[-1]), dict):
            raise FsError(f"{_shown(path)}: Is a directory")
        if len(content) > MAX_FILE_CHARS:
            raise FsError(f"{_shown(path)}: File too large (at most {MAX_FILE_CHARS} characters)")
        bad = lone_surrogate(content)
        if bad:  # the state must encode as UTF-8 (text_safety: NUL and control characters are kept, shown escaped)
            raise FsError(f"{_shown(path)}: Invalid argument (the text holds the lone surrogate {bad}, not Unicode)")
        if names[-1] not in folder:
            self._room_for(1, path)
        folder[names[-1]] = content
        return "ok"

    def mkdir(self, path: str) -> str:
        names = self.parts(path)
        folder = self.parent(names, path)
        if names[-1] in folder:
            raise FsError(f"{_shown(path)}: File exists")
        self._room_for(1, path)
        self._depth_for(names, {}, path)
        folder[names[-1]] = {}
        return "ok"

    def rm(self, path: str) -> str:
        """Removes a file, or a folder with everything in it (rm -r: tasks never need the two-step rmdir)."""
        names = self.parts(path)
        folder = self.parent(names, path)
        if names[-1] not in folder:
            raise FsError(f"{_shown(path)}: No such file or directory")
        del folder[names[-1]]
        return "ok"

    def mv(self, src: str, dst: str) -> str:
        """POSIX mv: into dst when dst is a folder; a file replaces a file; a folder replaces an empty folder."""
        source = self.parts(src)
        source_parent = self.parent(source, src)
        if source[-1] not in source_parent:
            raise FsError(f"{_shown(src)}: No such file or directory")
        moving = source_parent[source[-1]]
        target = self.parts(dst)
        if isinstance(self.node(target, dst), dict):  # the root too
            target = (*target, source[-1])  # into the folder, keeping the name
        if target == source:
            raise FsError(f"{_shown(src)} and {_shown(dst)} are the same file")
        if isinstance(moving, dict) and target[:len(source)] == source:
            raise FsError(f"cannot move {_shown(src)} to a subdirectory of itself, {_shown(dst)}")
        target_parent = self.parent(target, dst)
        there = target_parent.get(target[-1])
        if isinstance(there, dict) and (not isinstance(moving, dict) or there):
            why = "Directory not empty" if isinstance(moving, dict) else "cannot overwrite directory with non-directory"
            raise FsError(f"{_shown(dst)}: {why}")
        if isinstance(there, str) and isinstance(moving, dict):
            raise FsError(f"{_shown(dst)}: cannot overwrite non-directory with directory")
        self._depth_for(target, moving, dst)
        del source_parent[source[-1]]
        target_parent[target[-1]] = moving
        return "ok"
