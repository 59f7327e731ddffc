"""What this host offers the sandbox beyond bubblewrap: per-run cgroup v1 children, a seccomp BPF program,
memfds for the child's inputs, and the unsandboxed mode's scratch dir.

Split from sandbox.py to keep each file readable; nothing here runs untrusted code.
Facts cited were measured on a 2-core Debian VM with bubblewrap (docs/verifiers.md, "How a completion is judged").
"""
from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import tempfile
import time

log = logging.getLogger(__name__)

SYSTEM_PYTHON = "/usr/bin/python3"
CGROUP_PREFIX = "rlvr-sbx-"  # run cgroups are named rlvr-sbx-<creator pid>-<n>, so leaks can be swept
_counter = itertools.count()
_LIMIT_FILES = {"pids": "pids.max", "memory": "memory.limit_in_bytes"}
_DENY_SYSCALLS = (
    "ptrace process_vm_readv process_vm_writev mount umount2 pivot_root chroot unshare setns bpf "
    "perf_event_open userfaultfd keyctl add_key request_key kexec_load kexec_file_load init_module "
    "finit_module delete_module io_uring_setup io_uring_enter io_uring_register open_by_handle_at "
    "name_to_handle_at personality swapon swapoff reboot syslog acct quotactl fanotify_init").split()
# Runs under Debian's python3, because python3-seccomp is packaged for it, not for our venv.
# Sockets other than AF_UNIX are refused (asyncio and multiprocessing need socketpair); the network
# namespace is private anyway, so this is depth, not the only wall.
_SECCOMP_SCRIPT = r"""
import errno, socket, sys, tempfile, seccomp
f = seccomp.SyscallFilter(seccomp.ALLOW)
f.add_rule(seccomp.ERRNO(errno.EPERM), "socket", seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
for name in sys.argv[1:]:
    try:
        f.add_rule(seccomp.ERRNO(errno.EPERM), name)
    except (RuntimeError, ValueError):
        pass  # not a system call on this architecture
with tempfile.TemporaryFile() as out:
    f.export_bpf(out); out.seek(0); sys.stdout.buffer.write(out.read())
"""


def seccomp_program() -> tuple[bytes | None, str]:
    """(BPF bytes for `bwrap --seccomp FD`, note) or (None, why not)."""
    if not os.path.exists(SYSTEM_PYTHON):
        return None, f"off (no {SYSTEM_PYTHON})"
    try:
        done = subprocess.run([SYSTEM_PYTHON, "-I", "-c", _SECCOMP_SCRIPT, *_DENY_SYSCALLS], capture_output=True,
                              timeout=30, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"off ({err})"
    if done.returncode != 0 or not done.stdout:
        return None, "off (apt-get install python3-seccomp to enable)"
    return done.stdout, "deny-list on"


def bwrap_options(bwrap: str | None, wanted: tuple[str, ...]) -> frozenset[str]:
    """Which of the `wanted` optional flags this bwrap supports (Debian 12 has 0.8.0; Ubuntu 22.04 0.6)."""
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10) if bwrap else None
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(flag for flag in wanted if done and f"{flag} " in done.stdout + done.stderr)


def cgroup_bases() -> tuple[dict[str, str], str]:
    """Per controller (pids, memory), our own v1 cgroup, if we may create children there (root only).

    Children go under our *own* cgroup, so they also stay inside whatever limits we run under (facts: the
    memory child was made under this process's memory cgroup). Stale run cgroups are swept on the way.
    """
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return {}, "off (not root)"
    try:
        with open("/proc/self/cgroup") as f:
            own = {c: path for line in f for _, ctrls, path in [line.rstrip("\n").split(":", 2)]
                   for c in ctrls.split(",")}
    except OSError as err:
        return {}, f"off (unreadable /proc/self/cgroup: {err})"
    bases: dict[str, str] = {}
    for ctrl, limit in _LIMIT_FILES.items():
        base = os.path.normpath(f"/sys/fs/cgroup/{ctrl}/{own.get(ctrl, '/')}")
        trial = os.path.join(base, f"{CGROUP_PREFIX}{os.getpid()}-probe")
        try:
            os.mkdir(trial)
            ok = os.path.exists(os.path.join(trial, limit))
            os.rmdir(trial)
        except OSError as err:
            return {}, f"off (cannot create a {ctrl} cgroup under {base}: {err.strerror})"
        if not ok:
            return {}, f"off (no {limit} in {base}: not cgroup v1?)"
        bases[ctrl] = base
        for name in os.listdir(base):  # left by processes that died mid-run
            if name.startswith(CGROUP_PREFIX) and not os.path.exists(f"/proc/{name.split('-')[2]}"):
                destroy([os.path.join(base, name)])
    return bases, "pids+memory"


def create(bases: dict[str, str], max_pids: int, memory_bytes: int) -> list[str]:
    """This run's cgroup directories, limits written (facts: pids.max stops a root fork loop, the memory
    limit OOM-kills a root memory bomb). memsw too where present, or the cap could be dodged via swap."""
    name, dirs = f"{CGROUP_PREFIX}{os.getpid()}-{next(_counter)}", []
    limits = {"pids": {"pids.max": max_pids},
              "memory": {"memory.limit_in_bytes": memory_bytes, "memory.memsw.limit_in_bytes": memory_bytes}}
    try:
        for ctrl, base in bases.items():
            dirs.append(os.path.join(base, name))
            os.mkdir(dirs[-1])
            for file, value in limits[ctrl].items():
                if os.path.exists(os.path.join(dirs[-1], file)):
                    with open(os.path.join(dirs[-1], file), "w") as f:
                        f.write(str(value))
    except OSError:
        destroy(dirs)
        raise
    return dirs


def kill(dirs: list[str]) -> None:
    """SIGKILL every process in the cgroups.

    cgroup v1 has no cgroup.kill; a pid read here could in theory exit and be reused before the kill, but
    by the time we sweep, every member is already doomed by the killpg / pid-namespace teardown.
    """
    for path in dirs:
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            continue
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def destroy(dirs: list[str]) -> None:
    """Kill what is left and remove the directories (retried: killed tasks leave the cgroup a moment later)."""
    for _ in range(200):
        kill(dirs)
        for path in list(dirs):
            try:
                os.rmdir(path)
                dirs.remove(path)
            except FileNotFoundError:
                dirs.remove(path)
            except OSError:
                pass
        if not dirs:
            return
        time.sleep(0.005)
    log.warning("could not remove sandbox cgroups %s (processes left?)", dirs)


def memfd(name: str, content: bytes, owned: list[int]) -> int:
    """An fd positioned at the start of `content`: the child reads a file, so no writer thread is needed."""
    fd = os.memfd_create(name, 0)  # no MFD_CLOEXEC: bwrap reads it after exec
    owned.append(fd)
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def scratch_dir(files: dict[str, bytes], drop: bool) -> str:
    """Work dir of the unsandboxed mode (removed after the run)."""
    scratch = tempfile.mkdtemp(prefix="rlvr-unsandboxed-")
    for name, content in files.items():
        with open(os.path.join(scratch, name), "wb") as f:
            f.write(content)
    if drop:  # the program runs as uid 65534 and needs its cwd writable
        os.chown(scratch, 65534, 65534)
    return scratch
