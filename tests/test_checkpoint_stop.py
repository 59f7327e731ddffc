"""SIGTERM / SIGINT during training (rlvr/checkpoint/stop.py), in-process: the first signal only sets the
flag the loop reads between steps, the second exits at once with 128 + the signal's number, the handlers are put
back afterwards, and off the main thread nothing is installed. Real signals to a child process are in
test_checkpoint_state.py; here os._exit is recorded instead of ending pytest."""
from __future__ import annotations

import os
import signal
import threading

import pytest

import rlvr.checkpoint.stop as stop_module
from rlvr.checkpoint.stop import GracefulStop


@pytest.fixture
def exits(monkeypatch) -> list[int]:
    codes: list[int] = []

    def record(code: int):
        codes.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(stop_module.os, "_exit", record)
    return codes


def test_the_first_signal_sets_the_flag_and_says_so_the_second_exits_at_once(exits):
    said: list[str] = []
    with GracefulStop(say=said.append) as stop:
        assert stop.requested is False and stop.signal_name == ""
        os.kill(os.getpid(), signal.SIGTERM)  # a real signal: Python runs the handler in the main thread
        assert stop.requested is True and stop.signal_name == "SIGTERM" and exits == []
        assert said == ["rlvr: SIGTERM received: finishing this step, then saving a checkpoint (send it again to "
                        "exit at once)"]
        with pytest.raises(SystemExit):
            os.kill(os.getpid(), signal.SIGINT)
    assert exits == [128 + signal.SIGINT]  # 130: what a shell reports for a process ended by Ctrl-C
    assert said[1] == "rlvr: second SIGINT: exiting now; the last complete checkpoint is kept"


def test_the_previous_handlers_are_put_back(exits):
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with GracefulStop(say=lambda _: None) as stop:
        assert {sig: signal.getsignal(sig) for sig in previous} == {sig: stop._handle for sig in previous}
    assert {sig: signal.getsignal(sig) for sig in previous} == previous


def test_off_the_main_thread_nothing_is_installed():
    """Python delivers signals to the main thread only, and installs handlers only from it (ValueError elsewhere):
    a GracefulStop entered in another thread installs nothing and never requests a stop."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    seen: list[object] = []

    def worker():
        try:
            with GracefulStop(say=lambda _: None) as stop:
                seen.append((stop.requested, {sig: signal.getsignal(sig) for sig in handlers}))
        except Exception as err:  # noqa: BLE001 - reported to the main thread below
            seen.append(err)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [(False, handlers)]


def test_the_default_message_goes_to_stderr(exits, capsys):
    with GracefulStop():
        os.kill(os.getpid(), signal.SIGTERM)
    captured = capsys.readouterr()
    assert captured.out == "" and "rlvr: SIGTERM received: finishing this step" in captured.err
