"""`rlvr dashboard RUN_DIR`: the report's page served live; it polls /api/data every 2 s and redraws in place.

The payload is rebuilt only when a file of the run changed (size or modification time), and the page sends the
last ETag it got, so an unchanged run costs one stat per file and an empty 304 answer.

POST /api/score scores an answer typed into the explainer with the run's verifiers (a scorer the CLI builds, see
rlvr/rewards/typed_answer.py). Only on a loopback address, only JSON (a cross-site form cannot send it without a
preflight this server never grants), only from a page this server served (Host and Origin checked, against DNS
rebinding), at most MAX_BODY bytes, and only for a prompt the page shows (the reference is looked up here, never
taken from the request).
"""
from __future__ import annotations

import errno
import hashlib
import json
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from rlvr.viz.jsonl import RunDataError
from rlvr.viz.page import data_json, page_title, payload, render_page
from rlvr.viz.rundata import LATEST_GROUPS, load_run

WATCHED = ("config.yaml", "metrics.jsonl", "eval.jsonl", "samples.jsonl", "groups.jsonl")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_BODY = 16 * 1024  # bytes of a POST /api/score request
MAX_ANSWER = 4000  # characters of a typed answer
# (question, reference, completion) -> {"reward": float, "verdicts": {...}}: rlvr.rewards.typed_answer
Scorer = Callable[[str, str, str], dict]
# () -> (a Scorer, None) or (None, why not): rlvr.rewards.typed_answer.answer_scorer of the first run directory
ScorerFactory = Callable[[], tuple[Scorer | None, str | None]]


class LiveRuns:
    """The payload of some run directories, rebuilt when one of their files changes. Thread-safe."""

    def __init__(self, run_dirs: list[Path], latest_groups: int = LATEST_GROUPS,
                 scoring: Callable[[], str | None] = lambda: "off"):
        self.run_dirs = [Path(p) for p in run_dirs]
        self.latest_groups = latest_groups
        self.scoring = scoring  # asked at each rebuild: None when typed answers can be scored, else why not
        self.prompts: dict[str, tuple[str, str]] = {}  # prompt_id -> (question, reference) of the groups shown
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._cached: tuple[str, str, str] = ("", "", "")  # etag, payload JSON, page title
        self.current()  # a bad run directory fails at start, with its one-line message

    def _stamp(self) -> tuple:
        stamp = []
        for run in self.run_dirs:
            for name in WATCHED:
                try:
                    info = (run / name).stat()
                    stamp.append((str(run), name, info.st_size, info.st_mtime_ns))
                except FileNotFoundError:
                    stamp.append((str(run), name, None, None))
        return tuple(stamp)

    def current(self) -> tuple[str, str, str]:
        """(etag, payload as JSON text, title), read from disk only if something changed."""
        with self._lock:
            key = self._stamp()
            if key != self._key:
                runs = [load_run(path, groups="latest", latest=self.latest_groups, before_first_step=True)
                        for path in self.run_dirs]
                etag = '"' + hashlib.sha1(repr(key).encode()).hexdigest()[:16] + '"'
                data = payload(runs, live=True, scoring=self.scoring())
                self.prompts = shown_prompts(data)
                self._cached = (etag, data_json(data), page_title(runs))
                self._key = key
            return self._cached


def shown_prompts(data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """prompt_id -> (question, reference) of every group of the runs the page can show (not the recorded
    example's: the run's verifiers score answers to the run's own prompts)."""
    groups = [g for run in data["runs"] for g in run["groups"]]
    part = data["explainer"].get("group")
    groups += [part["group"]] if part and part["source"] == "run" else []
    return {g["prompt_id"]: (g["question"], g["reference"]) for g in groups}


class _Handler(BaseHTTPRequestHandler):
    server: "DashboardServer"
    timeout = 10  # seconds a connection may stall (a body slower than its Content-Length) before it is dropped

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        route = self.path.split("?", 1)[0]
        try:
            if route in ("/", "/index.html"):
                _, data, title = self.server.live.current()
                self._send(HTTPStatus.OK, "text/html; charset=utf-8", render_page(data, title))
            elif route == "/api/data":
                etag, data, _ = self.server.live.current()
                if self.headers.get("If-None-Match") == etag:
                    self._send(HTTPStatus.NOT_MODIFIED, "application/json", "", etag)
                else:
                    self._send(HTTPStatus.OK, "application/json", data, etag)
            else:
                self._send(HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", "not found")
        except RunDataError as err:  # e.g. a line damaged while the dashboard runs: shown on the page
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, "application/json", json.dumps({"error": str(err)}))

    def do_POST(self) -> None:  # noqa: N802
        if self.path.split("?", 1)[0] != "/api/score":
            return self._send(HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", "not found")
        try:
            status, answer = self.server.score_request(self.headers, self._body())
        except RunDataError as err:  # a log damaged while the dashboard runs, as do_GET says
            status, answer = HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(err)}
        self._send(status, "application/json", json.dumps(answer))

    def _body(self) -> bytes | None:
        """The request body, or None when it has no plain Content-Length (chunked, '²') or one over MAX_BODY:
        then it is left unread and the connection closed."""
        length = self.headers.get("Content-Length", "")
        if not (length.isascii() and length.isdigit()) or int(length) > MAX_BODY:
            self.close_connection = True
            return None
        return self.rfile.read(int(length))

    def _send(self, status: HTTPStatus, kind: str, body: str, etag: str | None = None) -> None:
        raw = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Cache-Control", "no-store")
        if etag:
            self.send_header("ETag", etag)
        if status != HTTPStatus.NOT_MODIFIED:
            self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        if status != HTTPStatus.NOT_MODIFIED:
            self.wfile.write(raw)

    def log_message(self, format: str, *args) -> None:  # noqa: A002
        pass  # the page polls every 2 s: one log line per request would drown the console


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True  # a poll in flight does not hold up Ctrl-C

    def __init__(self, run_dirs: list[Path], host: str, port: int, scorer: Scorer | None = None,
                 no_scorer: str = "the dashboard was started without the run's verifiers",
                 scorer_factory: ScorerFactory | None = None):
        """scorer: a fixed one; scorer_factory: tried at start and again whenever the runs' files change until it
        gives one (a dashboard started with the run, before its config.yaml exists, scores once it does)."""
        if host not in LOOPBACK:
            scorer, scorer_factory = None, None
            no_scorer = f"the dashboard listens on {host}, beyond this machine: typed answers are scored only on " \
                        "127.0.0.1"
        self.scorer, self._factory, self._why = scorer, scorer_factory, no_scorer
        self.live = LiveRuns(run_dirs, scoring=self.scoring_why)
        if ":" in host:  # an IPv6 address such as ::1
            self.address_family = socket.AF_INET6
        try:
            super().__init__((host, port), _Handler)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise RunDataError(f"port {port} on {host} is already in use (another dashboard?); "
                                   "choose another with --port N") from None
            raise RunDataError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None

    def scoring_why(self) -> str | None:
        """None when typed answers can be scored now; else why not. Tries the factory while there is no scorer."""
        if self.scorer is None and self._factory is not None:
            self.scorer, why = self._factory()
            self._why = why or self._why
        return None if self.scorer is not None else self._why

    def score_request(self, headers, body: bytes | None) -> tuple[HTTPStatus, dict[str, Any]]:
        """(status, JSON answer) for POST /api/score; see the module doc for what is refused and why."""
        refused = self._refusal(headers, body)
        if refused:
            return refused
        try:
            request = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return HTTPStatus.BAD_REQUEST, {"error": "the body is not JSON"}
        prompt_id, answer = (request.get("prompt_id"), request.get("completion")) if isinstance(request, dict) \
            else (None, None)
        if not isinstance(prompt_id, str) or not isinstance(answer, str):
            return HTTPStatus.BAD_REQUEST, {"error": 'send {"prompt_id": "...", "completion": "..."}'}
        if len(answer) > MAX_ANSWER:
            return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"an answer of at most {MAX_ANSWER} characters"}
        self.live.current()  # the prompts of the payload the page shows now
        if prompt_id not in self.live.prompts:
            return HTTPStatus.NOT_FOUND, {"error": f"no prompt {prompt_id!r} on this page"}
        question, reference = self.live.prompts[prompt_id]
        try:
            return HTTPStatus.OK, {"prompt_id": prompt_id, **self.scorer(question, reference, answer)}
        except Exception as err:  # noqa: BLE001  a verifier's failure is the answer's, shown on the page
            return HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"the verifiers failed: {err}"}

    def _refusal(self, headers, body: bytes | None) -> tuple[HTTPStatus, dict[str, Any]] | None:
        if self.scorer is None:
            return HTTPStatus.FORBIDDEN, {"error": self._why}
        host = urlsplit("//" + headers.get("Host", "")).hostname
        origin = headers.get("Origin")
        if host not in LOOPBACK or (origin is not None and urlsplit(origin).netloc != headers.get("Host")):
            return HTTPStatus.FORBIDDEN, {"error": "only the dashboard's own page may score answers"}
        if not headers.get("Content-Type", "").startswith("application/json"):
            return HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send application/json"}
        if body is None:
            return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"send the body with a Content-Length of at most "
                                                                  f"{MAX_BODY} bytes"}
        return None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def start_thread(self) -> threading.Thread:
        """Serve in a background thread (tests, scripts/screenshots.py); stop with shutdown() + server_close()."""
        thread = threading.Thread(target=self.serve_forever, name="rlvr-dashboard", daemon=True)
        thread.start()
        return thread


def serve(run_dirs: list[Path], host: str, port: int, scorer_factory: ScorerFactory | None = None) -> int:
    """Serve until Ctrl-C; the command's exit status."""
    server = DashboardServer(run_dirs, host, port, scorer_factory=scorer_factory)
    print(f"rlvr dashboard: {server.url} (Ctrl-C stops it)", flush=True)
    if host not in LOOPBACK:
        print(f"rlvr dashboard: listening on {host}: anyone who reaches this port can read the run", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("\nrlvr dashboard: stopped", flush=True)
    finally:
        server.server_close()
    return 0
