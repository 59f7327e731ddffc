"""The sandbox's own properties, checked from inside it (sandbox-facts.md lists what each layer should do)."""
from __future__ import annotations

import glob
import json
import os
import threading
import time

import pytest

from rlvr.verifiers.code import sandbox
from rlvr.verifiers.code.sandbox import Probe, SandboxConfig, SandboxUnavailable, probe, run_sandboxed

_PROBE = probe()
pytestmark = pytest.mark.sandbox  # skips without bubblewrap, fails under CI=true (conftest.py)
FAST = SandboxConfig(time_limit_s=5.0)

INSPECT = r"""
import errno, json, os, socket
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as err:
        return errno.errorcode.get(err.errno, str(err.errno))
def connect(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect((host, port))
print(json.dumps({
    "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
    "capeff": int(status["CapEff"], 16), "nonewprivs": status["NoNewPrivs"].strip(),
    "seccomp": status["Seccomp"].strip(), "env": sorted(os.environ), "cwd": os.getcwd(),
    "root": sorted(os.listdir("/")), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "work": os.path.exists("/work"), "home_root": os.path.exists("/root"), "etc": os.path.exists("/etc"),
    "write_usr": attempt(lambda: open("/usr/rlvr-test", "w")),
    "write_tmp": attempt(lambda: open("/tmp/scratch", "w").write("x")),
    "write_shm": attempt(lambda: open("/dev/shm/scratch", "w").write("x")),
    "write_root": attempt(lambda: open("/scratch", "w")), "write_dev": attempt(lambda: open("/dev/scratch", "w")),
    "net_out": attempt(lambda: connect("1.1.1.1", 53)),
    "net_lo": attempt(lambda: connect("127.0.0.1", 22)),
    "unix_pair": attempt(lambda: socket.socketpair()),
    "nics": sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]),
}))
"""


@pytest.fixture(scope="module")
def inside() -> dict:
    result = run_sandboxed(INSPECT, b"", FAST)
    assert result.exit_code == 0, result.stderr.decode()
    return json.loads(result.stdout)


def test_probe_works_here_and_is_cached():
    state = probe()
    assert state.ok and "bubblewrap works" in state.reason
    ok, reason = state  # unpacks like a tuple
    assert ok and probe() is state


def test_runs_as_nobody_without_capabilities(inside):
    assert (inside["uid"], inside["euid"], inside["gid"]) == (65534, 65534, 65534)
    assert inside["capeff"] == 0 and inside["nonewprivs"] == "1"


def test_seccomp_filter_applied_when_available(inside):
    assert inside["seccomp"] == ("2" if _PROBE.seccomp else "0")
    if _PROBE.seccomp:  # other socket families are refused before the network is even consulted
        assert inside["net_out"] == inside["net_lo"] == "EPERM" and inside["unix_pair"] == "ok"


def test_no_network_even_without_seccomp():
    result = run_sandboxed(INSPECT, b"", SandboxConfig(time_limit_s=5.0, seccomp=False))
    data = json.loads(result.stdout)
    assert data["seccomp"] == "0"
    assert data["net_out"] == "ENETUNREACH" and data["net_lo"] == "ECONNREFUSED"  # private, empty loopback
    assert data["nics"] == ["lo"]


def test_filesystem_view(inside):
    assert not inside["work"] and not inside["home_root"] and not inside["etc"]
    assert set(inside["root"]) <= {"usr", "bin", "lib", "lib64", "proc", "dev", "tmp"}
    assert inside["write_usr"] in ("EROFS", "EACCES") and inside["write_tmp"] == inside["write_shm"] == "ok"
    assert inside["write_root"] == inside["write_dev"] == "EROFS"  # bwrap's own tmpfs mounts have no size cap
    assert inside["cwd"] == "/tmp"


def test_environment_cleared_and_pids_private(inside):
    assert set(inside["env"]) <= {"PATH", "PWD", "LC_CTYPE", "LANG", "HOME"}
    assert max(inside["pids"]) < 10  # only bwrap's init and the program are visible


def test_stdin_files_channel_and_argv():
    program = ("import sys, os\n"
               "os.write(int(sys.argv[1]), open('data.txt').read().encode() + sys.stdin.read().encode())\n"
               "try:\n    open('data.txt', 'w')\nexcept OSError as e:\n    print(type(e).__name__)")
    result = run_sandboxed(program, b" world", FAST, files={"data.txt": b"hello"}, channel=True)
    assert result.channel == b"hello world" and result.stdout.strip() in (b"PermissionError", b"OSError")
    assert result.started and result.sandboxed and result.exit_code == 0


def test_wall_clock_kill_and_output_cap():
    result = run_sandboxed("import time\nprint('x' * 5000, flush=True)\ntime.sleep(60)", b"",
                           SandboxConfig(time_limit_s=1.0, max_output_bytes=1000))
    assert result.timed_out and result.signal == 9 and result.exit_code is None
    assert 1.0 <= result.wall_s < 3.0
    assert len(result.stdout) == 1000 and result.truncated == frozenset({"stdout"})


def test_stream_over_its_cap_is_closed():
    # a flood was drained until the deadline (0.7 s of parent CPU in 3 s); now the program's next
    # write after the cap fails with EPIPE, so it ends at once (exit 3 here) and the parent reads 64 KiB only
    program = ("import os, sys\ntry:\n    while True:\n        os.write(1, b'x' * 65536)\n"
               "except BrokenPipeError:\n    sys.exit(3)")
    cpu = time.process_time()
    result = run_sandboxed(program, b"", SandboxConfig(time_limit_s=10.0, max_output_bytes=1 << 16))
    assert result.exit_code == 3 and result.truncated == frozenset({"stdout"}) and len(result.stdout) == 1 << 16
    assert result.wall_s < 5.0 and time.process_time() - cpu < 0.2


def test_a_byte_at_a_time_is_read_in_batches():
    # after 64 wakeups with data the parent reads at most every 5 ms: ~200 reads/s, not one per byte written
    cpu = time.process_time()
    result = run_sandboxed("import os, time\nwhile True:\n    os.write(1, b'x')\n    time.sleep(0.0001)", b"",
                           SandboxConfig(time_limit_s=2.0))
    assert result.timed_out and len(result.stdout) > 1000
    assert time.process_time() - cpu < 0.1  # measured: 17 ms/s throttled, 84 ms/s reading every byte


def test_cut_after_marker_shortens_the_deadline():
    program = "import os, sys, time\nos.write(int(sys.argv[1]), b'needed\\nMARK\\n')\ntime.sleep(30)"
    cut = run_sandboxed(program, b"", SandboxConfig(time_limit_s=10.0), channel=True, cut_after=(b"MARK\n", 0.3))
    assert cut.cut and not cut.timed_out and cut.channel == b"needed\nMARK\n" and cut.wall_s < 5.0
    late = run_sandboxed(program, b"", SandboxConfig(time_limit_s=1.0), channel=True, cut_after=(b"NEVER\n", 0.3))
    assert late.timed_out and not late.cut  # no marker: the full limit, a timeout


def test_memory_file_size_and_process_limits():
    config = SandboxConfig(time_limit_s=10.0, memory_mb=256, max_file_mb=1, max_processes=8)
    memory = run_sandboxed("x = bytearray(1 << 30)", b"", config)
    assert memory.exit_code == 1 and b"MemoryError" in memory.stderr
    big = run_sandboxed("open('f', 'wb').write(b'x' * (4 << 20))", b"", config)
    assert b"File too large" in big.stderr
    fill = run_sandboxed("for i in range(8):\n    open(f'/tmp/f{i}', 'wb').write(b'x' * ((1 << 20) - 4096))",
                         b"", config)
    if "--size" in sandbox._host.bwrap_options:  # bwrap >= 0.8
        assert b"No space left" in fill.stderr  # many files below the size limit still hit the tmpfs size
    forks = run_sandboxed("import os, time\nn = 0\ntry:\n    for _ in range(100):\n        if os.fork() == 0:\n"
                          "            time.sleep(30)\n        n += 1\nexcept OSError:\n    pass\nprint(n)",
                          b"", config)
    assert int(forks.stdout) <= 8 if _PROBE.cgroups else int(forks.stdout) <= 100
    assert not forks.timed_out  # the sleeping children died with the sandbox's pid namespace


def test_cgroups_are_removed_after_runs():
    run_sandboxed("print(1)", b"", FAST)
    if _PROBE.cgroups:
        left = glob.glob(f"/sys/fs/cgroup/*/**/rlvr-sbx-{os.getpid()}-*", recursive=True)
        assert left == []


def test_parallel_runs_are_independent():
    results = [None] * 4

    def work(i):
        results[i] = run_sandboxed(f"import sys\nprint(int(sys.stdin.read()) * {i})", b"7", FAST)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [int(r.stdout) for r in results] == [0, 7, 14, 21]


def test_refuses_without_sandbox_unless_opted_in(monkeypatch, capsys):
    from rlvr.config.run import ConfigError
    from rlvr.verifiers.code.verifier import CodeVerifier

    monkeypatch.setattr(sandbox, "_probe", Probe(False, "bwrap missing (simulated)"))
    monkeypatch.setattr(sandbox, "_warned", False)
    with pytest.raises(SandboxUnavailable, match="simulated"):
        run_sandboxed("print(1)", b"", FAST)
    with pytest.raises(ConfigError, match="apt-get install bubblewrap"):
        CodeVerifier()
    verifier = CodeVerifier(sandbox=SandboxConfig(time_limit_s=5.0, allow_unsandboxed=True))
    assert "WITHOUT A SANDBOX" in capsys.readouterr().err
    verdict = verifier.verify("def add(a, b):\n    return a + b", json.dumps({"asserts": ["assert add(1, 2) == 3"]}))
    assert verdict.score == 1.0
    result = run_sandboxed("import os\nprint(os.getuid())", b"", SandboxConfig(allow_unsandboxed=True))
    assert not result.sandboxed and int(result.stdout) == (65534 if os.geteuid() == 0 else os.getuid())

