"""Opening a run to continue it (rlvr/checkpoint/resume.py): `checkpoint.resume=auto` is one line for a fresh
start and every restart, a damaged run directory is one clear error naming its file, and the logs are cut back to
the checkpoint's step whatever a crash left in them. No model is loaded: open_run reads only the directory, and the
checkpoints here are written by store.py with placeholder files (verification reads the manifest, not the weights)."""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from rlvr.checkpoint.resume import hold_run_lock, open_run, truncate_logs
from rlvr.checkpoint.rundir import CLAIM
from rlvr.checkpoint.store import write_checkpoint
from rlvr.config.run import ConfigError, load_config

_ROOT = str(Path(__file__).resolve().parent.parent)  # this tree's rlvr in the child, also in a mutated copy


def _buffered_env() -> dict[str, str]:
    """This process's environment as of the call (a coverage or mutation harness may set variables after import),
    without PYTHONUNBUFFERED, so a child's stdout is block-buffered as under `nohup ... > log`."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
            "PYTHONPATH": os.pathsep.join([_ROOT, os.environ.get("PYTHONPATH", "")])}


def config_for(out: Path, *extra: str):
    return load_config(None, [f"output_dir={out}", "checkpoint.resume=auto", "max_steps=4", *extra])


def started(out: Path, *extra: str) -> Path:
    """A run as a trainer leaves it once set-up is done: claimed, its config.yaml written (as dump_config writes it),
    a first metrics line; no checkpoint yet."""
    run_dir, checkpoint = open_run(config_for(out, *extra), None)
    assert checkpoint is None and (run_dir / CLAIM).is_file()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config_for(out, *extra).model_dump(mode="json")))
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    return run_dir


def checkpointed(run_dir: Path, step: int = 1) -> None:
    write_checkpoint(run_dir / "checkpoints", step, lambda d: (d / "trainer_state.pt").write_bytes(b"s"))


def test_resume_auto_restarts_a_run_killed_before_its_first_checkpoint(tmp_path, capsys):
    """docs/runs.md: `output_dir=runs/long checkpoint.resume=auto` is the same line for a fresh start
    and every restart. A run preempted after writing its config.yaml but before its first checkpoint has nothing to
    resume: the same line starts it again, its files moved aside, never deleted (it was once
    refused with "start a new run with another output_dir")."""
    out = started(tmp_path / "run")
    torn = out / "checkpoints" / "step-000001"  # killed after the rename, before the marker: not complete
    torn.mkdir(parents=True)
    run_dir, checkpoint = open_run(config_for(out), None)
    assert run_dir == out and checkpoint is None
    assert sorted(p.name for p in out.iterdir()) == [CLAIM]  # a fresh, claimed directory
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("run.incomplete-")]
    assert (aside / "metrics.jsonl").read_text() == '{"step": 1}\n' and (aside / "checkpoints" / "step-000001").is_dir()
    assert f"moved to {aside} and starting the run again" in capsys.readouterr().out
    os.close(hold_run_lock(out))  # the fresh claim can be locked: the lock taken on the old one went with it
    # stopped once more before a checkpoint (within the same second): the second copy aside gets its own name
    (out / "config.yaml").write_text(yaml.safe_dump(config_for(out).model_dump(mode="json")))
    assert open_run(config_for(out), None) == (out, None)
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("run.incomplete-")]) == 2


def test_resume_auto_takes_over_a_run_killed_before_it_wrote_anything(tmp_path, capsys):
    """Killed in set-up, before its config.yaml: the directory holds only its claim, and the run starts in it."""
    out = tmp_path / "run"
    open_run(config_for(out), None)
    assert sorted(p.name for p in out.iterdir()) == [CLAIM]
    assert open_run(config_for(out), None) == (out, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing moved aside
    assert "holds no file yet" in capsys.readouterr().out
    os.close(hold_run_lock(out))  # the caller locks it next: open_run let go of the lock it took to look


def test_resume_auto_restarts_a_run_whose_config_yaml_the_kill_tore(tmp_path):
    out = started(tmp_path / "run")
    (out / "config.yaml").write_text("model: {name_or_path: ")  # the write itself was cut
    assert open_run(config_for(out), None) == (out, None)
    assert [p.name.startswith("run.incomplete-") for p in tmp_path.iterdir()].count(True) == 1


def test_resume_auto_never_moves_a_live_run(tmp_path):
    """A run in its set-up holds the lock on its claim: the second trainer is refused and nothing is moved; each
    refusal closes the claim file it opened to try the lock (no descriptor leaks into the refused process)."""
    out = started(tmp_path / "run")
    lock = hold_run_lock(out)
    try:
        open_fds = len(os.listdir("/proc/self/fd"))
        for _ in range(3):
            with pytest.raises(ConfigError, match="is in use by another rlvr process"):
                open_run(config_for(out), None)
        assert len(os.listdir("/proc/self/fd")) == open_fds
    finally:
        os.close(lock)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] and (out / "metrics.jsonl").is_file()


def test_resume_auto_refuses_a_stopped_run_of_another_config_or_with_damaged_checkpoints(tmp_path, capsys):
    """Starting over is for the same line: a stopped run of another config is not moved aside for this one, and
    a run whose complete checkpoints all fail verification is refused with each named (they are for the user to
    look at); an unclaimed directory is not a run and is never touched."""
    out = started(tmp_path / "run", "seed=3")
    with pytest.raises(ConfigError, match="has no complete checkpoint to resume from"):
        open_run(config_for(out, "seed=4"), None)
    assert open_run(config_for(out, "seed=4", "checkpoint.resume_force=true"), None) == (out, None)  # forced

    damaged = started(tmp_path / "damaged")
    checkpointed(damaged)
    (damaged / "checkpoints" / "step-000001" / "trainer_state.pt").write_bytes(b"x")
    capsys.readouterr()
    with pytest.raises(ConfigError, match="has no complete checkpoint to resume from"):
        open_run(config_for(damaged), None)
    assert "rlvr: skipping checkpoint step-000001" in capsys.readouterr().out
    assert (damaged / "metrics.jsonl").is_file()

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not an rlvr run directory"):
        open_run(config_for(foreign), None)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_resume_auto_continues_from_the_checkpoint(tmp_path):
    out = started(tmp_path / "run")
    checkpointed(out, 2)
    run_dir, checkpoint = open_run(config_for(out, "max_steps=9"), None)  # running further is allowed
    assert run_dir == out and checkpoint.step == 2


@pytest.mark.parametrize(("text", "says"), [
    ("", "does not hold a run's config (a mapping of sections; it holds NoneType"),
    ("just a string\n", "does not hold a run's config (a mapping of sections; it holds str 'just a string')"),
    ("- 1\n- 2\n", "does not hold a run's config (a mapping of sections; it holds list"),
    ("a: [unclosed\n", "is unreadable (while parsing a flow sequence"),
    ("rollout: 5\n", "is damaged: its section rollout is '5', not a mapping of settings"),
    (b"seed: \xff\xfe\n", "is unreadable ('utf-8' codec can't decode"),
])
def test_a_damaged_config_yaml_is_one_error_naming_it(tmp_path, text, says):
    """The config.yaml of a run with a checkpoint is what a resume compares against: when it is not a config,
    the resume stops with one error naming the file and what it holds (before, AttributeError,
    yaml's ParserError or UnicodeDecodeError came out)."""
    out = started(tmp_path / "run")
    checkpointed(out)
    config_yaml = out / "config.yaml"
    config_yaml.write_bytes(text if isinstance(text, bytes) else text.encode())
    for mode in ("auto", str(out)):
        with pytest.raises(ConfigError) as err:
            open_run(config_for(out, f"checkpoint.resume={mode}"), None)
        assert str(err.value).startswith(f"{config_yaml} ") and says in str(err.value)
        assert "\n" not in str(err.value) and "restore it to resume" in str(err.value)


def test_a_long_value_in_a_damaged_config_yaml_is_cut_short_in_the_error(tmp_path):
    """The error shows what the file holds, cut to its first 40 characters: a config.yaml overwritten with a long
    text (or binary junk) must not flood the one-line error."""
    out = started(tmp_path / "run")
    checkpointed(out)
    long = "x" * 39 + "yz"
    for text, shown in ((long, f"it holds str {long[:40]!r})"), (f"seed: 1\nrollout: {long}\n", f"is {long[:40]!r},")):
        (out / "config.yaml").write_text(text)
        with pytest.raises(ConfigError) as err:
            open_run(config_for(out, f"checkpoint.resume={out}"), None)
        assert shown in str(err.value) and "z" not in str(err.value).split(str(out))[-1]


def test_a_run_directory_without_its_claim_file_is_locked_all_the_same(tmp_path):
    """A run copied without its hidden .rlvr-run (cp dir/*) is still resumed under the lock: the claim file is
    created by the lock itself."""
    out = started(tmp_path / "run")
    checkpointed(out)
    (out / CLAIM).unlink()
    assert open_run(config_for(out, f"checkpoint.resume={out}"), None)[1].step == 1
    lock = hold_run_lock(out)
    try:
        assert (out / CLAIM).is_file()
        with pytest.raises(ConfigError, match="is in use by another rlvr process"):
            hold_run_lock(out)
    finally:
        os.close(lock)


_RESUME_IN_AN_ASCII_LOCALE = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from rlvr.checkpoint.resume import open_run, run_in_directory
    from rlvr.config.run import ConfigError, load_config
    out, other = Path(sys.argv[1]), Path(sys.argv[2])

    def killed():
        try:  # a coverage harness (the mutation tool's) keeps what this child ran: os._exit skips its save
            import coverage
            measuring = coverage.Coverage.current()
            if measuring:
                measuring.stop()
                measuring.save()
        except ImportError:
            pass
        os._exit(0)
    try:  # a run of another seed, stopped before its first checkpoint: its config.yaml must be read to refuse it
        open_run(load_config(None, [f"output_dir={other}", "checkpoint.resume=auto", "max_steps=4", "seed=4"]), None)
    except ConfigError as err:
        print("refused:", str(err).splitlines()[0])
    config = load_config(None, [f"output_dir={out}", "checkpoint.resume=auto", "max_steps=4"])
    run_in_directory(config, None, lambda config, run_dir: killed(), None)  # killed as set-up begins
""")


def test_resume_reads_config_yaml_as_utf8_and_its_messages_reach_the_log_at_once(tmp_path):
    """In a process whose locale encoding is ASCII (LC_ALL=C without Python's UTF-8 mode), a config.yaml edited
    by hand with UTF-8 text is still read (as UTF-8, as load_config reads it), and the lines naming a skipped
    checkpoint and the run directory with the checkpoint it resumes from are flushed when printed: a trainer that
    hangs or is killed in its set-up still leaves them in the log (stdout is a pipe here, block-buffered)."""
    out = started(tmp_path / "run")
    checkpointed(out, 1)
    checkpointed(out, 2)
    (out / "checkpoints" / "step-000002" / "trainer_state.pt").write_bytes(b"x")
    other = started(tmp_path / "other", "seed=3")
    for run in (out, other):
        (run / "config.yaml").write_text("# edited by hand: modèle de départ\n" + (run / "config.yaml").read_text(),
                                         encoding="utf-8")
    # stdout block-buffered (no PYTHONUNBUFFERED): an unflushed line is lost at os._exit
    env = {**_buffered_env(), "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    done = subprocess.run([sys.executable, "-c", _RESUME_IN_AN_ASCII_LOCALE, str(out), str(other)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"run directory: {out} (resuming from step-000001)"
    assert f"refused: {other} has no complete checkpoint to resume from" in done.stdout, done.stdout
    assert "rlvr: skipping checkpoint step-000002" in done.stdout


def test_logs_with_bytes_that_are_not_utf8_are_cut_back_without_an_error(tmp_path):
    """A crash mid-write can leave any bytes in a log's last line: that line is dropped like any torn one, and the
    other lines are kept byte for byte, non-ASCII text included (before, UnicodeDecodeError)."""
    kept = [json.dumps({"step": 1, "sample": "é"}, ensure_ascii=False).encode() + b"\n", b'{"step": 2}\n']
    (tmp_path / "samples.jsonl").write_bytes(b"".join(kept) + b'{"step": 3}\n{"step": 2, "x": "\xff\xfe torn')
    truncate_logs(tmp_path, 2)
    assert (tmp_path / "samples.jsonl").read_bytes() == b"".join(kept)


class OtherRank:
    """Rank 1 of a torchrun launch, as run_in_directory sees it: rank 0's (run directory, checkpoint) arrives by
    broadcast."""

    is_main = False

    def __init__(self, opened):
        self.opened = opened

    def broadcast(self, obj):
        assert obj is None  # this rank opened nothing itself
        return self.opened


def failing_setup(config, run_dir):
    raise RuntimeError("set-up failed (a model that does not load)")


def test_a_failed_set_up_gives_a_fresh_directory_back_on_rank_0_only(tmp_path):
    """A fresh run whose set-up fails before writing anything releases its directory (the same output_dir works
    next time) - on rank 0, which claimed it; another rank must not remove it from under rank 0."""
    from rlvr.checkpoint.resume import run_in_directory

    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError, match="set-up failed"):
        run_in_directory(config_for(fresh), None, failing_setup, lambda run, checkpoint: fresh)
    assert not fresh.exists()

    claimed, _ = open_run(config_for(tmp_path / "shared"), None)  # rank 0 claimed it and is setting up
    with pytest.raises(RuntimeError, match="set-up failed"):
        run_in_directory(config_for(claimed), None, failing_setup, lambda run, checkpoint: claimed,
                         ranks=OtherRank((claimed, None)))
    assert sorted(p.name for p in claimed.iterdir()) == [CLAIM]


def test_the_run_is_closed_and_its_lock_let_go_however_it_ends(tmp_path):
    """run_in_directory around a training loop: the loop gets the checkpoint to continue from; whether set-up
    fails, the loop fails or it returns, the lock on the run is let go (the same process, e.g. a recipe, can open
    the run again), and the run set up is closed (its logger, engine and reward workers) once."""
    from rlvr.checkpoint.resume import run_in_directory

    out = started(tmp_path / "run")
    checkpointed(out, 3)
    config = config_for(out, f"checkpoint.resume={out}")
    with pytest.raises(RuntimeError, match="set-up failed"):
        run_in_directory(config, None, failing_setup, lambda run, checkpoint: out)
    os.close(hold_run_lock(out))
    assert (out / "checkpoints" / "step-000003").is_dir()  # a resumed run's directory is never given back

    closed, seen = [], []

    def loop(run, checkpoint):
        seen.append((run, checkpoint.step, run_dir_of(run)))
        if run == "failing run":
            raise RuntimeError("the loop failed")
        return out / "final"

    def run_dir_of(run):
        return config.output_dir

    with pytest.raises(RuntimeError, match="the loop failed"):
        run_in_directory(config, None, lambda c, d: "failing run", loop, close=closed.append)
    os.close(hold_run_lock(out))
    assert run_in_directory(config, None, lambda c, d: "run", loop, close=closed.append) == out / "final"
    os.close(hold_run_lock(out))
    assert closed == ["failing run", "run"] and seen == [("failing run", 3, str(out)), ("run", 3, str(out))]


def test_a_refusal_to_open_the_run_is_its_own_error_on_rank_0_and_named_as_rank_0_s_on_the_others(tmp_path, capsys):
    """On rank 0 (and in one process) the reason the run cannot open is raised as it is; the other ranks, which
    would otherwise wait for rank 0 forever, get it by broadcast, prefixed with whose it is."""
    from rlvr.checkpoint.resume import run_in_directory

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    config = load_config(None, [f"output_dir={taken}"])
    with pytest.raises(ConfigError) as err:
        run_in_directory(config, None, failing_setup, lambda run, checkpoint: taken)
    assert str(err.value) == f"output_dir {str(taken)!r} already holds files; choose a new output_dir=PATH"
    reason = f"rank 0 could not open the run directory: {err.value}"
    with pytest.raises(ConfigError) as err:
        run_in_directory(config, None, failing_setup, lambda run, checkpoint: taken, ranks=OtherRank(reason))
    assert str(err.value) == reason
    assert "run directory:" not in capsys.readouterr().out


def test_the_run_directory_is_announced_with_the_checkpoint_it_resumes_from(tmp_path, capsys):
    from rlvr.checkpoint.resume import run_in_directory

    out = started(tmp_path / "run")
    capsys.readouterr()
    run_in_directory(config_for(tmp_path / "new"), None, lambda c, d: None, lambda run, checkpoint: None)
    assert capsys.readouterr().out == f"run directory: {tmp_path / 'new'}\n"
    checkpointed(out, 7)
    run_in_directory(config_for(out), None, lambda c, d: None, lambda run, checkpoint: None)
    assert capsys.readouterr().out == f"run directory: {out} (resuming from step-000007)\n"


def test_resume_auto_without_an_output_dir_is_one_error_naming_the_setting(tmp_path, monkeypatch):
    """Without output_dir a fresh run would get a new runs/<date-time> every time: auto could never continue it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^checkpoint.resume=auto needs output_dir=PATH \(the run to continue or "):
        open_run(load_config(None, ["checkpoint.resume=auto"]), None)
    assert list(tmp_path.iterdir()) == []  # no run directory was made


def test_the_stop_message_gives_the_time_this_process_ran_and_the_command_that_resumes(tmp_path):
    import time

    from rlvr.checkpoint.resume import stop_message

    message = stop_message(tmp_path, 7, "SIGTERM", time.monotonic() - 42.2)
    assert message == (f"rlvr: stopped on SIGTERM after step 7 (42 s in this process); checkpoint saved. Resume with: "
                       f"rlvr train --resume {tmp_path}")




def test_what_resume_says_reaches_a_piped_log_at_once():
    """Under a scheduler or `nohup ... > log` stdout is a pipe, block-buffered: resume's messages (which checkpoint
    was skipped, why the run starts again) must be in the log while the run goes on, not only when it ends. The
    child says one line and then waits for the line to be read back. Mutations caught: flush=True dropped or
    False in _say."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys
        from rlvr.checkpoint.resume import _say
        _say("skipped step-000002")
        sys.stdin.readline()  # until the test has read the line; then a normal exit (a coverage harness saves)
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_buffered_env())
    try:
        ready, _, _ = select.select([child.stdout], [], [], 45.0)  # a buffered line would come only at exit
        assert ready and child.poll() is None
        assert child.stdout.readline() == "rlvr: skipped step-000002\n"
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
