"""The engine process of rollout.engine.kind=hf_process: what runs in the child that
rollout/process.py spawns. It holds an EngineHost (its own transformers copy of the policy) and serves the
parent's commands over a Pipe, one at a time and in the order sent, one Reply each. Weights arrive over a
two-rank gloo group of their own (trainer = rank 0, engine = rank 1): a Sync command announces the tensors, then
every one of them is broadcast from rank 0 in `synced_parameters` order.

Because commands run in order, a Sync sent while a Generate is running waits in the pipe until that generation
is done: the asynchronous loop (max_staleness 1) relies on this to know which weights sampled a batch.
"""
from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Iterator

import torch

from rlvr.rollout.base import SamplingParams
from rlvr.types import Prompt, RolloutBatch

if TYPE_CHECKING:
    from rlvr.rollout.host import HostSettings

GROUP_PREFIX = "rlvr-engine-sync"  # the store keys of this group, apart from any other group using the store
CONNECT_TIMEOUT_S = 120.0  # forming the gloo group: both sides are up by then (the parent waited for Ready)


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class Generate:
    prompts: list[Prompt]
    group_size: int
    sampling: SamplingParams


@dataclass(frozen=True)
class Continue:
    """One turn of multi-turn episodes: token contexts in, SampledTurns out."""

    contexts: list[list[int]]
    group_size: int
    sampling: SamplingParams


@dataclass(frozen=True)
class CheckLayout:
    """Sent once at start: a trainer whose parameters the engine's model lacks is one clear error, not a hang
    in the middle of a broadcast."""

    specs: list[TensorSpec]


@dataclass(frozen=True)
class Sync:
    version: int  # the trainer step whose weights follow
    specs: list[TensorSpec]  # what the broadcasts carry, in order (dtypes: the receive buffers)


@dataclass(frozen=True)
class TeacherForced:
    rollouts: RolloutBatch
    temperature: float


@dataclass(frozen=True)
class Close:
    pass


@dataclass(frozen=True)
class Reply:
    ok: bool
    value: Any = None  # Generate: (RolloutBatch, version that sampled); TeacherForced: [B, C]; Sync: version
    error: str = ""  # the child's exception, one line, when not ok


def layout_problems(own: dict[str, torch.Tensor], specs: list[TensorSpec]) -> list[str]:
    """Names/shapes the trainer sends that the engine's model does not have, and parameters it would never get."""
    problems = [f"{s.name} {tuple(s.shape)}" for s in specs
                if s.name not in own or tuple(own[s.name].shape) != tuple(s.shape)]
    missing = sorted(set(own) - {s.name for s in specs})
    return problems + [f"{name} (never sent)" for name in missing]


def _exit_with_parent(parent_pid: int) -> None:
    """The engine never outlives the trainer: a SIGKILLed parent closes no pipe while we are busy generating, so
    a watcher notices the re-parenting and ends the process."""
    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:
                os._exit(3)
            time.sleep(1.0)

    threading.Thread(target=watch, name="rlvr-engine-parent-watch", daemon=True).start()


def _receive(group, specs: list[TensorSpec]) -> Iterator[tuple[str, torch.Tensor]]:
    """The broadcast tensors one at a time (one buffer alive at once), for EngineHost.load_parameters."""
    for spec in specs:
        buffer = torch.empty(spec.shape, dtype=spec.dtype)  # host: gloo broadcasts CPU tensors
        group.broadcast(buffer, 0).wait()
        yield spec.name, buffer


def _handle(host, group, command) -> Reply:
    # The pipe carries host tensors both ways: a CUDA tensor sent to another process arrives as a shared
    # handle that cannot be sent on again, and keeps the sender's memory pinned until the receiver lets it go.
    if isinstance(command, Generate):
        rollouts = host.generate(command.prompts, command.group_size, command.sampling)
        return Reply(True, (rollouts.to("cpu"), host.version))
    if isinstance(command, Continue):
        return Reply(True, host.continue_tokens(command.contexts, command.group_size, command.sampling))
    if isinstance(command, TeacherForced):
        rollouts = command.rollouts.to(host.device)
        return Reply(True, host.teacher_forced_logprobs(rollouts, command.temperature).cpu())
    if isinstance(command, CheckLayout):
        problems = layout_problems(dict(host.parameters_in_order()), command.specs)
        if problems:
            return Reply(False, error="the engine's model does not match the trainer's parameters: "
                                      + ", ".join(problems[:5]) + " (trainer and engine must load the same model)")
        return Reply(True)
    if isinstance(command, Sync):
        host.load_parameters(_receive(group, command.specs), command.version)
        return Reply(True, host.version)
    return Reply(False, error=f"unknown command {type(command).__name__}")


def serve(conn, settings: HostSettings, store_host: str, store_port: int, parent_pid: int) -> None:
    """The child's main: load the model, say Ready, join the gloo group, then serve until Close or EOF."""
    from torch.distributed import PrefixStore, ProcessGroupGloo, TCPStore

    from rlvr.rollout.host import EngineHost

    _exit_with_parent(parent_pid)
    # A terminal's Ctrl-C (and a job scheduler's SIGTERM) reaches the whole process group: the trainer finishes
    # its step and checkpoints (checkpoint/stop.py), which needs this engine alive; it closes us afterwards.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    try:
        host = EngineHost(settings)
    except Exception as err:  # noqa: BLE001 - reported to the parent as one line, then the child ends
        conn.send(Reply(False, error=f"could not load the engine's model: {_one_line(err)}"))
        return
    conn.send(Reply(True, "ready"))
    store = TCPStore(store_host, store_port, 2, False, timeout=timedelta(seconds=CONNECT_TIMEOUT_S))
    group = ProcessGroupGloo(PrefixStore(GROUP_PREFIX, store), 1, 2, timedelta(seconds=CONNECT_TIMEOUT_S))
    while True:
        try:
            command = conn.recv()
        except (EOFError, OSError):  # the parent closed its end: nothing more will come
            return
        if isinstance(command, Close):
            conn.send(Reply(True))
            return
        try:
            reply = _handle(host, group, command)
        except Exception as err:  # noqa: BLE001 - the parent raises it as EngineProcessError
            traceback.print_exc()
            reply = Reply(False, error=_one_line(err))
        conn.send(reply)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"
