"""A local sandbox for untrusted programs; it knows nothing about RL or tests: run a program, get bytes back.

No account, no service. Layers, each measured on a 2-core Debian VM with bubblewrap
(docs/verifiers.md, "How a completion is judged"):
  1. bubblewrap: new user/pid/net/ipc/uts/mount/cgroup namespaces, read-only /usr, / and /dev, size-capped
     tmpfs /tmp (the work dir) and /dev/shm, cleared environment, uid 65534 with every capability dropped
     (measured: root inside a bare userns keeps full caps), --die-with-parent, --new-session, --as-pid-1,
     --disable-userns (no nested userns).
     Nothing from the repository or a home directory is bound; the interpreter is Debian's /usr/bin/python3
     (measured: a pyenv python bound elsewhere silently ran Debian's stdlib anyway).
  2. As root the launcher drops to uid 65534 with setpriv before bwrap, so a namespace escape
     lands as nobody, not as root.
  3. rlimits through prlimit: address space, CPU, file size, open files, core 0. NPROC is only a loose
     system-wide backstop: it does not bind root and counts per real uid across all sandboxes (measured).
  4. A cgroup v1 pids + memory child per run when root (sandbox_host.py): the only root-proof fork/memory
     cap found. The launcher shell writes its own pid into cgroup.procs and then execs, so every
     descendant starts inside: no spawn-then-move race, and no preexec_fn (unsafe with threads).
  5. A seccomp deny-list from Debian's python3-seccomp when installed.
  6. The trusted parent: a wall-clock deadline, then SIGKILL to the launcher's process group and to every
     pid in the cgroup (measured: orphans outlive a plain child kill); stdout/stderr/channel reads are capped,
     and a stream over its cap is closed, so a flood cannot keep the parent reading (sandbox_io.py).
"""
from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

from rlvr.verifiers.code import sandbox_host
from rlvr.verifiers.code.sandbox_host import SYSTEM_PYTHON
from rlvr.verifiers.code.sandbox_io import Streams, collect

log = logging.getLogger(__name__)

PYTHON = "{python}"  # argv placeholder: the interpreter used inside the sandbox
CHANNEL_FD = "{channel_fd}"  # argv placeholder: number of the write end of the result channel
WORK_DIR = "/tmp"  # inside the sandbox: the tmpfs work dir, cwd, where `files` are placed (read-only)
SANDBOX_UID = 65534
_PATH = "/usr/bin:/bin"
_BWRAP_PROCS = 2  # bwrap (the monitor) and the program itself count against pids.max
_NPROC_BACKSTOP = 1024  # processes of uid 65534, system-wide (facts: RLIMIT_NPROC counts per real uid)
_JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
_CHECK_PROGRAM = ("import os\nst = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
                  "print(os.getuid(), int(st['CapEff'], 16))\n")


class SandboxUnavailable(RuntimeError):
    """No working sandbox here and the caller did not opt into running unsandboxed."""


@dataclass(frozen=True)
class SandboxConfig:
    time_limit_s: float = 5.0  # wall clock per run; then the whole process tree is SIGKILLed
    memory_mb: int = 512  # address space per process (rlimit) and the run's memory cgroup
    max_output_bytes: int = 1 << 20  # kept per stream (stdout, stderr, channel); the rest is drained, dropped
    max_processes: int = 32  # the program's processes (pids cgroup, when root)
    max_file_mb: int = 16  # largest file (rlimit) and size of the tmpfs work dir
    max_open_files: int = 64
    allow_unsandboxed: bool = False  # run without bubblewrap when the probe fails (warned loudly, once)
    seccomp: bool = True  # apply the deny-list when python3-seccomp is installed

    def __post_init__(self):
        for name in ("time_limit_s", "memory_mb", "max_output_bytes", "max_processes", "max_file_mb",
                     "max_open_files"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxConfig.{name} must be > 0, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int | None  # the program's exit status; None when a signal ended it
    signal: int | None  # the signal that ended it (our SIGKILL on timeout, OOM kill, SIGXCPU, ...)
    timed_out: bool  # the wall-clock deadline fired and the tree was killed
    started: bool  # the program was exec'd; False = the sandbox itself failed (see stderr)
    stdout: bytes  # at most max_output_bytes
    stderr: bytes
    channel: bytes  # what the program wrote to the CHANNEL_FD pipe, capped likewise
    truncated: frozenset[str]  # names of the streams cut at the cap (and closed there)
    wall_s: float
    sandboxed: bool  # False only in the explicitly allowed unsandboxed mode
    cut: bool = False  # killed at the shorter deadline that `cut_after`'s marker set (not a timeout)


@dataclass(frozen=True)
class Probe:
    """Outcome of the start-up check; unpacks as `ok, reason = probe()`."""

    ok: bool
    reason: str  # why not, or what runs (with which optional layers)
    cgroups: bool = False
    seccomp: bool = False

    def __iter__(self):
        return iter((self.ok, self.reason))


class _Host(NamedTuple):
    bwrap: str | None
    prlimit: str | None
    setpriv: str | None  # only when root: drop to uid 65534 before bwrap
    cgroup_bases: dict[str, str]  # controller -> our own cgroup dir, where run cgroups are created
    cgroup_note: str
    seccomp_bpf: bytes | None
    seccomp_note: str
    bwrap_options: frozenset[str]  # optional flags this bwrap knows (--size, --disable-userns: bwrap >= 0.8)


_lock = threading.Lock()
_probe: Probe | None = None
_host: _Host | None = None
_warned = False


def probe(refresh: bool = False) -> Probe:
    """Check once per process (cached) that the sandbox works here, with a real sandboxed run."""
    global _probe, _host
    with _lock:
        if _probe is None or refresh:
            root = hasattr(os, "geteuid") and os.geteuid() == 0
            bwrap = shutil.which("bwrap", path=_PATH)
            _host = _Host(bwrap, shutil.which("prlimit", path=_PATH), shutil.which("setpriv", path=_PATH) if root
                          else None, *sandbox_host.cgroup_bases(), *sandbox_host.seccomp_program(),
                          sandbox_host.bwrap_options(bwrap, ("--size", "--disable-userns")))
            _probe = _check(_host)
        return _probe


def warn_unsandboxed(reason: str) -> None:
    """The loud, once-per-process warning for the opt-in unsandboxed mode (logging and stderr)."""
    global _warned
    if not _warned:
        _warned = True
        msg = (f"rlvr: RUNNING MODEL-WRITTEN CODE WITHOUT A SANDBOX ({reason}). Only rlimits, a scratch dir, "
               "a process-group kill and (as root) uid 65534 stand between it and this machine.")
        log.warning(msg)
        if log.hasHandlers():  # configured logging may not reach stderr; without handlers, logging prints it
            print(msg, file=sys.stderr, flush=True)


def run_sandboxed(program: str | list[str], stdin: bytes = b"", config: SandboxConfig | None = None, *,
                  files: dict[str, bytes] | None = None, channel: bool = False,
                  cut_after: tuple[bytes, float] | None = None) -> SandboxResult:
    """Run `program` (Python source, or an argv that may use PYTHON / CHANNEL_FD) under the sandbox.

    `files` are placed read-only in the work dir (the program's cwd). With `channel`, a pipe's write end
    is open in the program (Python source gets its number as sys.argv[1]); its data comes back capped.
    `cut_after=(marker, seconds)`: once the channel holds `marker`, the program has at most `seconds` more
    (the rest of its work is optional); a kill then sets `cut`, not `timed_out`.
    Thread-safe. Raises SandboxUnavailable when the probe failed and config.allow_unsandboxed is False.
    """
    config = config or SandboxConfig()
    ok, files = _ready(config, files)
    if isinstance(program, str):
        files["main.py"] = program.encode()
        program = [PYTHON, "-I", "-B", "main.py"] + ([CHANNEL_FD] if channel else [])
    return _run(list(program), stdin, config, _host, ok, files, channel, cut_after)


def start_sandboxed(argv: list[str], config: SandboxConfig, files: dict[str, bytes]) -> Spawned:
    """Start `argv` (it may use PYTHON / CHANNEL_FD) under the sandbox, as run_sandboxed does with a channel, and
    return while it runs (a live session, code/session.py): its stdin is a pipe whose write end
    (non-blocking) the caller holds. The caller reads the pipes, kills the program (sandbox_io) and calls
    `release()`. Raises SandboxUnavailable as run_sandboxed does."""
    ok, files = _ready(config, files)
    return _spawn(argv, None, config, _host, ok, files, True)


def _ready(config: SandboxConfig, files: dict[str, bytes] | None) -> tuple[bool, dict[str, bytes]]:
    state = probe()
    if not state.ok:
        if not config.allow_unsandboxed:
            raise SandboxUnavailable(state.reason)
        warn_unsandboxed(state.reason)
    files = dict(files or {})
    for name in files:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"file names must be plain names, got {name!r}")
    return state.ok, files


def _check(host: _Host) -> Probe:
    if not sys.platform.startswith("linux"):
        return Probe(False, f"the sandbox needs Linux (bubblewrap), this is {sys.platform}")
    missing = [what for what, present in (("bwrap (apt-get install bubblewrap)", host.bwrap),
                                          ("prlimit (util-linux)", host.prlimit),
                                          (SYSTEM_PYTHON, os.path.exists(SYSTEM_PYTHON))) if not present]
    if missing:
        return Probe(False, "missing " + ", ".join(missing))
    try:
        result = _run([PYTHON, "-I", "-c", _CHECK_PROGRAM], b"", SandboxConfig(time_limit_s=30), host, True,
                      {}, False, None)
    except OSError as err:
        return Probe(False, f"bubblewrap could not be started: {err}")
    if result.stdout.split() != [str(SANDBOX_UID).encode(), b"0"]:
        why = result.stderr.decode(errors="replace").strip()[-300:] or f"output {result.stdout[:100]!r}"
        return Probe(False, f"bubblewrap test run failed (exit {result.exit_code}): {why}")
    old = "" if len(host.bwrap_options) == 2 else "; old bwrap: no tmpfs size caps or nested-userns ban"
    return Probe(True, f"bubblewrap works (cgroups: {host.cgroup_note}; seccomp: {host.seccomp_note}{old})",
                 bool(host.cgroup_bases), host.seccomp_bpf is not None)


# ---------------------------------------------------------------- one run
@dataclass
class Spawned:
    """A started program: the parent's read ends of its pipes, every fd the parent still owns, and what
    `release()` undoes (fds, cgroups, the unsandboxed scratch dir)."""

    proc: subprocess.Popen
    readers: dict[str, int]  # stdout, stderr, channel (when asked), status (bwrap's, when sandboxed)
    owned: list[int]
    cgroups: list[str]
    scratch: str | None
    start: float  # time.monotonic() at the spawn
    sandboxed: bool
    stdin: int | None = None  # the write end of the program's stdin pipe (start_sandboxed only)

    def release(self) -> None:
        for fd in self.owned:
            os.close(fd)
        self.owned.clear()
        sandbox_host.destroy(self.cgroups)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _spawn(argv: list[str], stdin: bytes | None, config: SandboxConfig, host: _Host, sandboxed: bool,
           files: dict[str, bytes], channel: bool) -> Spawned:
    """Start the program; `stdin` None gives it a pipe whose (non-blocking) write end the parent keeps."""
    owned: list[int] = []  # every fd we opened; all closed by release()
    child_fds: list[int] = []  # write ends and memfds the child needs by number; closed in the parent after spawn
    scratch, cgroups, readers, stdin_w, std = None, [], {}, None, []

    def pipe(name: str, by_number: bool = True) -> int:
        r, w = os.pipe()
        owned.extend((r, w))
        (child_fds if by_number else std).append(w)
        readers[name] = r
        return w

    try:
        # stdout and stderr reach the child as its fds 1 and 2 only: a second copy by number let the harness's
        # candidate write to the parent's pipes after the harness had pointed 1 and 2 at /dev/null
        out_w, err_w = pipe("stdout", False), pipe("stderr", False)
        ch_w = pipe("channel") if channel else None
        if stdin is None:
            stdin_fd, stdin_w = os.pipe()
            owned.extend((stdin_fd, stdin_w))
            os.set_blocking(stdin_w, False)
        else:
            stdin_fd = sandbox_host.memfd("stdin", stdin, owned)
        if sandboxed:
            prefix = _bwrap_argv(host, config, files, pipe("status"), owned, child_fds)
            python = SYSTEM_PYTHON
        else:
            scratch = sandbox_host.scratch_dir(files, host.setpriv is not None)
            prefix, python = [], SYSTEM_PYTHON if os.path.exists(SYSTEM_PYTHON) else sys.executable
        argv = [python if a == PYTHON else str(ch_w) if a == CHANNEL_FD else a for a in argv]
        if host.cgroup_bases:
            cgroups = sandbox_host.create(host.cgroup_bases, config.max_processes + _BWRAP_PROCS,
                                          config.memory_mb << 20)
        env = {"PATH": _PATH} if sandboxed else {"PATH": _PATH, "HOME": scratch, "LANG": "C.UTF-8"}
        start = time.monotonic()
        proc = subprocess.Popen(_launcher(host, config, cgroups) + prefix + argv, stdin=stdin_fd, stdout=out_w,
                                stderr=err_w, pass_fds=child_fds, cwd=scratch or "/", env=env,
                                start_new_session=True)
    except BaseException:
        Spawned(None, readers, owned, cgroups, scratch, 0.0, sandboxed).release()
        raise
    for fd in child_fds + std + [stdin_fd]:
        os.close(fd)
        owned.remove(fd)
    return Spawned(proc, readers, owned, cgroups, scratch, start, sandboxed, stdin_w)


def _run(argv: list[str], stdin: bytes, config: SandboxConfig, host: _Host, sandboxed: bool,
         files: dict[str, bytes], channel: bool, cut_after: tuple[bytes, float] | None) -> SandboxResult:
    spawned = _spawn(argv, stdin, config, host, sandboxed, files, channel)
    proc = spawned.proc
    try:
        data, truncated, timed_out, cut = collect(proc, Streams(spawned.readers, spawned.owned,
                                                                config.max_output_bytes),
                                                  spawned.start + config.time_limit_s, spawned.cgroups, cut_after)
        wall = time.monotonic() - spawned.start
    finally:
        spawned.release()
    code, sig = exit_status(proc.returncode, sandboxed)
    started = b'"child-pid"' in data.get("status", b"") if sandboxed else True
    return SandboxResult(code, sig, timed_out, started, data["stdout"], data["stderr"], data.get("channel", b""),
                         frozenset(truncated - {"status"}), wall, sandboxed, cut)


def exit_status(code: int, sandboxed: bool) -> tuple[int | None, int | None]:
    """(exit code, signal) of the launcher's status: bwrap reports a child killed by signal N as 128 + N."""
    if code < 0 or (sandboxed and code > 128):
        return None, -code if code < 0 else code - 128
    return code, None


def _bwrap_argv(host: _Host, config: SandboxConfig, files: dict[str, bytes], status_fd: int, owned: list[int],
                child_fds: list[int]) -> list[str]:
    """The measured bwrap recipe, plus --uid/--gid/--cap-drop (root inside a bare userns keeps full caps)."""
    size = ["--size", str(config.max_file_mb << 20)] if "--size" in host.bwrap_options else []
    args = [host.bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--as-pid-1",
            "--new-session", "--clearenv", "--setenv", "PATH", _PATH, "--setenv", "HOME", WORK_DIR,
            "--setenv", "LANG", "C.UTF-8", "--hostname", "sandbox",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
            *size, "--tmpfs", "/dev/shm",  # multiprocessing needs it
            *size, "--tmpfs", WORK_DIR, "--chdir", WORK_DIR,
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL",
            "--json-status-fd", str(status_fd)]  # reports "child-pid" once the program is spawned
    args += ["--disable-userns"] if "--disable-userns" in host.bwrap_options else []
    # --as-pid-1: no bwrap init in between. That init is orphaned to the host's init as a zombie when bwrap
    # exits (measured); the program as pid 1 is reaped by bwrap itself, and its exit still kills the whole
    # pid namespace. Cost: like any pid 1 it ignores signals it has no handler for, sent from inside.
    for name, content in files.items():
        fd = sandbox_host.memfd(name, content, owned)
        child_fds.append(fd)
        args += ["--ro-bind-data", str(fd), f"{WORK_DIR}/{name}"]
    if host.seccomp_bpf and config.seccomp:
        fd = sandbox_host.memfd("seccomp", host.seccomp_bpf, owned)
        child_fds.append(fd)
        args += ["--seccomp", str(fd)]
    # bwrap's / and /dev are tmpfs without a size limit, writable by the program (measured): read-only, so
    # the only writable places are the two size-capped tmpfs above.
    return args + ["--remount-ro", "/dev", "--remount-ro", "/", "--"]


def _launcher(host: _Host, config: SandboxConfig, cgroups: list[str]) -> list[str]:
    """sh (joins the run's cgroups, then execs) -> prlimit (rlimits) -> setpriv (uid 65534) -> ..."""
    cmd = ["/bin/sh", "-c", _JOIN_CGROUPS, "sh", *(f"{d}/cgroup.procs" for d in cgroups), "--"] if cgroups else []
    if host.prlimit:
        cpu = math.ceil(config.time_limit_s) + 1  # a backstop: the wall-clock kill normally comes first
        cmd += [host.prlimit, f"--as={config.memory_mb << 20}", f"--cpu={cpu}:{cpu + 1}",
                f"--fsize={config.max_file_mb << 20}", f"--nofile={config.max_open_files}", "--core=0"]
        cmd += [f"--nproc={_NPROC_BACKSTOP}", "--"] if host.setpriv else ["--"]
    if host.setpriv:
        cmd += [host.setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--"]
    return cmd
