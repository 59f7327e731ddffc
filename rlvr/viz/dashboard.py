"""`rlvr dashboard RUN_DIR`: the report's page served live; it polls /api/data every 2 s and redraws in place.

The payload is rebuilt only when a file of the run changed (size or modification time), and the page sends the
last ETag it got, so an unchanged run costs one stat per file and an empty 304 answer.
"""
from __future__ import annotations

import errno
import hashlib
import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rlvr.viz.jsonl import RunDataError
from rlvr.viz.page import data_json, page_title, payload, render_page
from rlvr.viz.rundata import LATEST_GROUPS, load_run

WATCHED = ("config.yaml", "metrics.jsonl", "eval.jsonl", "samples.jsonl", "groups.jsonl")


class LiveRuns:
    """The payload of some run directories, rebuilt when one of their files changes. Thread-safe."""

    def __init__(self, run_dirs: list[Path], latest_groups: int = LATEST_GROUPS):
        self.run_dirs = [Path(p) for p in run_dirs]
        self.latest_groups = latest_groups
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
                self._cached = (etag, data_json(payload(runs, live=True)), page_title(runs))
                self._key = key
            return self._cached


class _Handler(BaseHTTPRequestHandler):
    server: "DashboardServer"

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

    def __init__(self, run_dirs: list[Path], host: str, port: int):
        self.live = LiveRuns(run_dirs)
        try:
            super().__init__((host, port), _Handler)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise RunDataError(f"port {port} on {host} is already in use (another dashboard?); "
                                   "choose another with --port N") from None
            raise RunDataError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def start_thread(self) -> threading.Thread:
        """Serve in a background thread (tests, scripts/screenshots.py); stop with shutdown() + server_close()."""
        thread = threading.Thread(target=self.serve_forever, name="rlvr-dashboard", daemon=True)
        thread.start()
        return thread


def serve(run_dirs: list[Path], host: str, port: int) -> int:
    """Serve until Ctrl-C; the command's exit status."""
    server = DashboardServer(run_dirs, host, port)
    print(f"rlvr dashboard: {server.url} (Ctrl-C stops it)", flush=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"rlvr dashboard: listening on {host}: anyone who reaches this port can read the run", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("\nrlvr dashboard: stopped", flush=True)
    finally:
        server.server_close()
    return 0
