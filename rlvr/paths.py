"""Is a name a local path or a Hugging Face Hub id?

`model.name_or_path`, `task.path` and `rlvr eval TARGET` take either. Handed a missing local path, transformers and
datasets take it for a hub id and retry the hub for 30-60 s before saying they cannot reach it (58 s measured here
for `foo/bar` offline); a typo deserves one line at once. The rule, for a name that does not exist here:

  * a hub id has the form `name` or `owner/name`, each part letters, digits, `_`, `-`, `.` (huggingface_hub's
    validate_repo_id). Anything else is a path: it starts with `/`, `./`, `../` or `~`, has two or more `/`, holds
    a space or a backslash;
  * a name ending in a file extension (.jsonl, .json, .parquet, .csv, .arrow, .safetensors, .gguf, ...) is a path;
  * `runs/j9` has a hub id's shape. It is a path when its first part (`runs`) is a local directory, since that is
    where the user meant to look;
  * a bare dataset name (`mydata`) is a path: hub datasets all live under an owner now (`openai/gsm8k`); a bare
    model name (`gpt2`) can still be a hub id.

A missing path is one error. A hub id is tried on the hub once (one request, no retries) before the loaders see it;
unreachable, it is one error too, unless the Hugging Face cache holds a copy (the loaders fall back to it). With
HF_HUB_OFFLINE=1 (or TRANSFORMERS_OFFLINE / HF_DATASETS_OFFLINE) nothing goes to the network: the loaders read the
cache and fail at once. Torch-free and without huggingface_hub (a 10 s import on a busy machine), so the CLI can
answer before loading anything.
"""
from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Literal

Kind = Literal["model", "dataset"]
_PART = r"[A-Za-z0-9_](?:[\w.-]*[\w])?"  # a hub id's part starts and ends with a letter, digit or _
HUB_ID = re.compile(rf"^(?:{_PART}/)?{_PART}$")
FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".arrow", ".safetensors", ".gguf", ".bin", ".pt", ".yaml",
                 ".yml", ".txt")
PROBE_TIMEOUT_S = 10.0
_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
_probed: dict[tuple[str, str], str | None] = {}  # (kind, id) -> None (the hub answered) or why it could not


def local_or_hub(text: str, kind: Kind, error: type[Exception], what: str) -> Path | str:
    """The existing local path `text` names, or `text` as a hub id (reachable, cached, or offline mode); else
    `error` with one line. `what` names the input in the message ("model path", "dataset file")."""
    local = Path(text).expanduser()
    if text and local.exists():
        return local
    why = _why_a_path(text, kind)
    if why is not None:
        raise error(f"{what} {text!r} does not exist{why}")
    if offline() or _in_cache(text, kind):
        return text
    unreachable = probe_hub(text, kind)
    if unreachable is not None:
        raise error(f"{what} {text!r} is not a local path (no such file or directory) and the Hugging Face Hub "
                    f"could not be reached: {unreachable}")
    return text


def _why_a_path(text: str, kind: Kind) -> str | None:
    """None when `text` may be a hub id; else why it is read as a local path ("" when its shape says so)."""
    if not HUB_ID.match(text) or ".." in text or "--" in text or text.lower().endswith(FILE_SUFFIXES):
        return ""
    if "/" in text:
        first = text.split("/", 1)[0]
        return (f" ({first}/ is a local directory, so {text!r} names a path here, not a Hugging Face Hub id)"
                if Path(first).is_dir() else None)
    if kind == "dataset":
        return " (a Hugging Face Hub dataset id has the form owner/name, e.g. openai/gsm8k)"
    return None


def offline() -> bool:
    """Whether the user switched the Hugging Face libraries to offline mode (their spelling of true)."""
    return any(os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE") for name in _OFFLINE_VARIABLES)


def _in_cache(repo_id: str, kind: Kind) -> bool:
    """A snapshot of the repo in the Hugging Face hub cache, or (datasets) a prepared copy in the datasets cache."""
    home = Path(os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                / "huggingface").expanduser()
    hub = Path(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub")
    if (hub / f"{kind}s--{repo_id.replace('/', '--')}" / "snapshots").is_dir():
        return True
    prepared = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets")
    return kind == "dataset" and (prepared / repo_id.replace("/", "___")).is_dir()


def probe_hub(repo_id: str, kind: Kind) -> str | None:
    """One request to the hub's API about the repo, once per process: None when the hub answered (whatever it said:
    a private, gated or unknown repo is the loader's to report, with the user's token), else the network's reason."""
    key = (kind, repo_id)
    if key not in _probed:
        _probed[key] = _reach(repo_id, kind)
    return _probed[key]


def _reach(repo_id: str, kind: Kind) -> str | None:
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    request = urllib.request.Request(f"{endpoint}/api/{kind}s/{repo_id}", method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S).close()
    except urllib.error.HTTPError:
        return None  # an HTTP status: the hub is there
    except (urllib.error.URLError, OSError, ValueError) as err:  # no route, no name, refused, timed out
        reason = getattr(err, "reason", None) or err
        return " ".join(str(reason).split()) or type(err).__name__
    return None
