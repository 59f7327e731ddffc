"""A local-looking path that does not exist is one error at once; a hub id is tried on the hub once, and an
unreachable hub is one line too, not a minute of retries (rlvr/paths.py). No test touches the
network: the hub request is replaced by a counting stand-in, or aimed at a server on 127.0.0.1."""
from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest

from rlvr import paths
from rlvr.cli.main import main
from rlvr.errors import UserFacingError

UNREACHABLE = "[Errno -2] Name or service not known"


class Boom(UserFacingError):
    pass


class Hub:
    """Stands in for the one request to the hub: counts the calls, answers as told."""

    def __init__(self, answer: str | None):
        self.answer, self.calls = answer, []

    def __call__(self, repo_id: str, kind: str) -> str | None:
        self.calls.append((repo_id, kind))
        return self.answer


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """An unreachable hub, an empty Hugging Face cache, online mode, cwd = tmp_path/work."""
    stand_in = Hub(UNREACHABLE)
    monkeypatch.setattr(paths, "_reach", stand_in)
    monkeypatch.setattr(paths, "_probed", {})
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_CACHE",
                 "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return stand_in


@pytest.mark.parametrize("name, why", [
    ("./nope", ""), ("../nope", ""), ("/no/such/dir", ""), ("~/no-such-dir-rlvr", ""),
    ("a/b/c", ""),  # two slashes: no hub id has them
    ("data.jsonl", ""), ("org/weights.safetensors", ""), ("model.GGUF", ""),  # a data or weights file's extension
    ("my data", ""), ("back\\slash", ""), ("org/-x", ""),  # characters or shapes a hub id cannot have
    ("runs/j9", " (runs/ is a local directory, so 'runs/j9' names a path here, not a Hugging Face Hub id)"),
])
def test_a_missing_local_looking_path_is_one_error_without_the_hub(hub, name, why):
    (hub_dir := Path("runs")).mkdir()
    with pytest.raises(Boom) as err:
        paths.local_or_hub(name, "model", Boom, "model path")
    assert str(err.value) == f"model path {name!r} does not exist{why}"
    assert hub.calls == [] and hub_dir.is_dir()  # mutation: dropping the runs/ rule sends runs/j9 to the hub


def test_a_bare_name_is_a_path_for_data_and_may_be_a_hub_model(hub):
    with pytest.raises(Boom, match=r"^dataset file 'mydata' does not exist \(a Hugging Face Hub dataset id has the "
                                   r"form owner/name, e.g. openai/gsm8k\)$"):
        paths.local_or_hub("mydata", "dataset", Boom, "dataset file")
    assert hub.calls == []
    with pytest.raises(Boom, match="could not be reached"):  # `gpt2` is a hub model id: tried once
        paths.local_or_hub("gpt2", "model", Boom, "model path")
    assert hub.calls == [("gpt2", "model")]


def test_a_hub_id_is_tried_once_and_an_unreachable_hub_is_one_line(hub):
    message = ("model path 'HuggingFaceTB/SmolLM2-135M-Instruct' is not a local path (no such file or directory) and "
               f"the Hugging Face Hub could not be reached: {UNREACHABLE}")
    for _ in range(3):  # load_tokenizer, context_length, load_model each resolve the name: one request in all
        with pytest.raises(Boom) as err:
            paths.local_or_hub("HuggingFaceTB/SmolLM2-135M-Instruct", "model", Boom, "model path")
        assert str(err.value) == message
    assert hub.calls == [("HuggingFaceTB/SmolLM2-135M-Instruct", "model")]  # mutation: no memo -> 3 calls


def test_a_reachable_hub_passes_the_id_on_and_an_existing_path_wins(hub):
    hub.answer = None
    assert paths.local_or_hub("openai/gsm8k", "dataset", Boom, "dataset file") == "openai/gsm8k"
    assert hub.calls == [("openai/gsm8k", "dataset")]
    (Path("openai") / "gsm8k").mkdir(parents=True)  # a local directory of that name is read as it is
    assert paths.local_or_hub("openai/gsm8k", "dataset", Boom, "dataset file") == Path("openai/gsm8k")
    assert len(hub.calls) == 1


@pytest.mark.parametrize("variable", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_mode_makes_no_request(hub, monkeypatch, variable):
    monkeypatch.setenv(variable, "1")
    # the loaders read their cache in offline mode and fail at once when it has nothing
    assert paths.local_or_hub("org/model", "model", Boom, "model path") == "org/model"
    assert hub.calls == []
    with pytest.raises(Boom, match="does not exist"):  # a missing path is still an error
        paths.local_or_hub("./org/model", "model", Boom, "model path")


def test_a_cached_repo_is_left_to_the_loaders(hub, tmp_path):
    (tmp_path / "hf-home" / "hub" / "models--org--cached" / "snapshots").mkdir(parents=True)
    assert paths.local_or_hub("org/cached", "model", Boom, "model path") == "org/cached"
    with pytest.raises(Boom, match="could not be reached"):  # the cache of models is not one of datasets
        paths.local_or_hub("org/cached", "dataset", Boom, "dataset file")


@pytest.fixture
def local_server():
    """A server on 127.0.0.1 that answers every request 404, as the hub does for an unknown repo."""
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - http.server's naming
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_request_tells_an_answer_from_no_network(monkeypatch, local_server):
    monkeypatch.setenv("HF_ENDPOINT", local_server)
    assert paths._reach("org/model", "model") is None  # an HTTP status, even 404: the hub is there
    closed = local_server.rsplit(":", 1)[0] + ":9"  # the discard port: nothing listens, the connection is refused
    monkeypatch.setenv("HF_ENDPOINT", closed)
    reason = paths._reach("org/model", "model")
    assert reason and "refused" in reason.lower()


# ---------------------------------------------------------------- the three places that read a model or data path
def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rlvr: error: "), err
    return err


def test_eval_of_a_missing_run_directory(hub, capsys):
    Path("runs").mkdir()
    assert main(["eval", "runs/j9"]) == 2
    assert "model or run directory 'runs/j9' does not exist (runs/ is a local directory" in one_line(capsys)
    assert hub.calls == []


def test_eval_of_an_unreachable_hub_model(hub, capsys):
    assert main(["eval", "org/model"]) == 2
    assert "'org/model' is not a local path (no such file or directory) and the Hugging Face Hub could not be " \
           "reached" in one_line(capsys)
    assert hub.calls == [("org/model", "model")]


def test_train_with_a_missing_model_directory(hub, capsys, tmp_path):
    Path("models").mkdir()
    assert main(["train", "model.name_or_path=models/nope", f"output_dir={tmp_path / 'run'}"]) == 2
    assert "model path 'models/nope' does not exist (models/ is a local directory" in one_line(capsys)
    assert hub.calls == [] and not (tmp_path / "run").exists()


def test_train_with_a_hub_model_asks_the_hub_once(hub, capsys, tmp_path):
    assert main(["train", "model.name_or_path=org/model", f"output_dir={tmp_path / 'run'}"]) == 2
    assert "could not be reached" in one_line(capsys)
    assert hub.calls == [("org/model", "model")]


@pytest.mark.parametrize("path, calls", [("mydata", []), ("data/train", []), ("org/data", [("org/data", "dataset")])])
def test_qa_dataset_paths(hub, capsys, tmp_path, path, calls):
    Path("data").mkdir()
    assert main(["train", "task.name=qa", f"task.path={path}", f"output_dir={tmp_path / 'run'}"]) == 2
    err = one_line(capsys)
    assert ("does not exist" if not calls else "could not be reached") in err and repr(path) in err
    assert hub.calls == calls


def test_a_repo_in_the_local_caches_is_used_without_asking_the_hub(hub, tmp_path, monkeypatch):
    home = tmp_path / "hf-home"  # the fixture's HF_HOME
    (home / "hub" / "models--org--cached" / "snapshots").mkdir(parents=True)
    assert paths.local_or_hub("org/cached", "model", Boom, "model path") == "org/cached"
    # datasets also count a prepared copy in the datasets cache ("org___ready"); a model id does not
    (home / "datasets" / "org___ready").mkdir(parents=True)
    assert paths.local_or_hub("org/ready", "dataset", Boom, "dataset file") == "org/ready"
    assert hub.calls == []
    with pytest.raises(Boom, match="could not be reached"):
        paths.local_or_hub("org/ready", "model", Boom, "model path")
    assert hub.calls == [("org/ready", "model")]
    # without HF_HOME the cache is XDG_CACHE_HOME/huggingface, as the Hugging Face libraries read it
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "huggingface" / "hub" / "datasets--org--xdg" / "snapshots").mkdir(parents=True)
    assert paths.local_or_hub("org/xdg", "dataset", Boom, "dataset file") == "org/xdg"
    assert hub.calls == [("org/ready", "model")]


def test_hf_hub_cache_alone_names_the_hub_cache(hub, tmp_path, monkeypatch):
    # HF_HUB_CACHE set and its older spelling HUGGINGFACE_HUB_CACHE not: the hub cache is HF_HUB_CACHE (an `and`
    # between the two would fall back to HF_HOME/hub and ask the hub for a repo already on disk)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere" / "models--org--moved" / "snapshots").mkdir(parents=True)
    assert paths.local_or_hub("org/moved", "model", Boom, "model path") == "org/moved"
    assert hub.calls == []
