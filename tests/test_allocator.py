"""The `rlvr` command restarts itself once with tcmalloc preloaded (cli/allocator.py) — and only then."""
from __future__ import annotations

import sys

import pytest

from rlvr.cli import allocator
from rlvr.cli.allocator import find_tcmalloc, preload_env

LIB = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def test_preload_env_decides_once() -> None:
    plain = {"PATH": "/usr/bin"}
    assert preload_env(plain, LIB, "linux") == {"PATH": "/usr/bin", "LD_PRELOAD": LIB}
    # an existing preload is kept after ours
    assert preload_env({"LD_PRELOAD": "/x/libfoo.so"}, LIB, "linux")["LD_PRELOAD"] == f"{LIB} /x/libfoo.so"
    # the restarted process sees tcmalloc preloaded and goes on: no second restart
    assert preload_env({"LD_PRELOAD": LIB}, LIB, "linux") is None
    assert preload_env({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}, LIB, "linux") is None  # the user's choice
    assert preload_env({"RLVR_ALLOCATOR": "system"}, LIB, "linux") is None
    assert preload_env(plain, None, "linux") is None  # not installed
    assert preload_env(plain, LIB, "darwin") is None


def test_find_tcmalloc_looks_in_the_given_dirs(tmp_path) -> None:
    assert find_tcmalloc((str(tmp_path),)) is None
    (tmp_path / "libtcmalloc_minimal.so.4").write_bytes(b"")
    assert find_tcmalloc((str(tmp_path / "missing"), str(tmp_path))) == str(tmp_path / "libtcmalloc_minimal.so.4")


def test_restart_execs_python_m_rlvr_with_the_same_arguments(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(allocator, "find_tcmalloc", lambda: LIB)
    monkeypatch.setattr(allocator.os, "execve", lambda *args: calls.append(args))
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("RLVR_ALLOCATOR", raising=False)
    allocator.restart_with_tcmalloc(["train", "max_steps=2"])
    if sys.platform != "linux":
        pytest.skip("the restart is Linux-only")
    (path, args, env), = calls
    assert path == sys.executable and args == [sys.executable, "-m", "rlvr", "train", "max_steps=2"]
    assert env["LD_PRELOAD"] == LIB
