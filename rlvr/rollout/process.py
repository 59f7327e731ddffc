"""rollout.engine.kind=hf_process: the transformers engine in a child process with its own weights, the trainer's
side. The child (rollout/process_worker.py) is spawned with torch.multiprocessing's
"spawn" context and serves commands over a Pipe; weights travel over a two-rank gloo group built directly from a
TCPStore, so it neither needs nor disturbs torch.distributed's default group (torchrun's, when there is one).

Transport choices, CPU-first:
- Rollouts and log-probs come back over the Pipe by pickling, which copies them through a socket. That is cheap
  for CPU tensors of a batch; a GPU engine would instead hand over CUDA IPC handles (torch.multiprocessing
  shares CUDA tensors that way) or keep the batch on its GPU.
- Weights go over gloo (CPU tensors). A GPU engine would sync over NCCL between the two GPUs: future work.

Never a hang: every wait on the child polls its liveness and has a deadline; a crashed or killed child is one
EngineProcessError with its exit code. The child dies with the parent (daemon + a parent watcher).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch

from rlvr.errors import UserFacingError
from rlvr.rollout.base import SampledTurn, SamplingParams
from rlvr.rollout.host import HostSettings, synced_parameters
from rlvr.rollout.process_worker import (
    CONNECT_TIMEOUT_S,
    GROUP_PREFIX,
    CheckLayout,
    Close,
    Continue,
    Generate,
    Reply,
    Sync,
    TeacherForced,
    TensorSpec,
    serve,
)
from rlvr.types import Prompt, RolloutBatch

# The longest any one command may take, generation included. No config field: a step of the real 135M model on
# CPU takes well under a minute, and a hang, not a slow step, is what this guards against.
REPLY_TIMEOUT_S = 600.0
CLOSE_TIMEOUT_S = 30.0  # close(): how long the child gets to finish what it is doing before it is killed
POLL_S = 0.5  # how often a wait checks that the child is still alive


class EngineProcessError(UserFacingError, RuntimeError):
    """The engine process failed, died, or did not answer in time."""


def _exit_text(exitcode: int | None) -> str:
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


@dataclass
class PendingRollouts:
    """A submitted generation; `result()` waits for it (with the deadline and liveness checks)."""

    engine: ProcessEngine
    ticket: int
    version: int | None = None  # once done: the weights version that sampled it (the child's last loaded sync)

    def result(self, timeout: float | None = None) -> RolloutBatch:
        return self.engine.rollouts_of(self, timeout)


class ProcessEngine:
    """SyncedEngine (rollout/base.py) over a child process. Use `start`."""

    def __init__(self, process, conn, store, device: str = "cpu"):
        self.process, self.conn, self.store = process, conn, store
        self.device = device  # the trainer's: rollouts arrive as host tensors and are moved here
        self.group = None  # the gloo group, formed once the child has loaded its model
        self.sent, self.received = 0, 0  # tickets: replies arrive in the order commands were sent
        self.replies: dict[int, Reply] = {}
        self.closed = False

    @classmethod
    def start(cls, settings: HostSettings, policy, tokenizer) -> ProcessEngine:
        """Spawn the engine, form the gloo group, and push the policy's current weights (a resumed run's policy,
        or one changed in memory, is not the checkpoint on disk the child loaded). `settings` go to the child,
        which loads settings.model; rollouts come back to settings.model.device, the trainer's."""
        from torch.distributed import PrefixStore, ProcessGroupGloo, TCPStore

        context = torch.multiprocessing.get_context("spawn")
        # port 0: the OS picks a free port; the store lives in the trainer, the child connects to it
        store = TCPStore("127.0.0.1", 0, 2, True, timeout=timedelta(seconds=CONNECT_TIMEOUT_S),
                         wait_for_workers=False)
        ours, theirs = context.Pipe()
        process = context.Process(target=serve, name="rlvr-engine", daemon=True,
                                  args=(theirs, settings, "127.0.0.1", store.port, os.getpid()))
        process.start()
        theirs.close()
        engine = cls(process, ours, store, settings.model.device)
        try:
            engine._wait(engine._expect(), "loading its model")  # the child's Ready
            engine.group = ProcessGroupGloo(PrefixStore(GROUP_PREFIX, store), 0, 2,
                                            timedelta(seconds=REPLY_TIMEOUT_S))
            engine._wait(engine._send(CheckLayout(_specs(synced_parameters(policy)))), "checking the model")
            engine.sync_weights(policy, 0)
        except BaseException:
            engine.close()
            raise
        return engine

    # --- commands -----------------------------------------------------------------------------------------------

    def submit(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> PendingRollouts:
        """Send a generation and return at once: the child samples while the trainer goes on (max_staleness 1)."""
        return PendingRollouts(self, self._send(Generate(list(prompts), group_size, sampling)))

    def generate(self, prompts: list[Prompt], group_size: int, sampling: SamplingParams) -> RolloutBatch:
        return self.submit(prompts, group_size, sampling).result()

    def continue_tokens(self, contexts: list[list[int]], group_size: int, sampling: SamplingParams
                        ) -> list[SampledTurn]:
        """One turn of episodes in the engine process; the environments stay in the trainer's."""
        return self._wait(self._send(Continue([list(c) for c in contexts], group_size, sampling)), "sampling a turn")

    def rollouts_of(self, pending: PendingRollouts, timeout: float | None = None) -> RolloutBatch:
        rollouts, pending.version = self._wait(pending.ticket, "generating rollouts", timeout)
        return rollouts.to(self.device)

    def sync_weights(self, model: torch.nn.Module, version: int) -> None:
        """One Sync command, then a broadcast of every tensor in order. Queued behind a running generation, the
        broadcast waits for it (the child joins after it): the batch in flight keeps the weights it started with."""
        named = synced_parameters(model)
        ticket = self._send(Sync(version, _specs(named)))
        try:
            with torch.no_grad():
                for _, tensor in named:
                    # gloo sends CPU tensors; on CPU this is the parameter itself, no copy
                    self.group.broadcast(tensor.detach().to("cpu").contiguous(), 0).wait()
        except RuntimeError as err:
            raise self._failure(f"receiving weights ({str(err).splitlines()[0] if str(err) else err!r})") from None
        self._wait(ticket, "loading the synced weights")

    def teacher_forced_logprobs(self, rollouts: RolloutBatch, temperature: float) -> torch.Tensor:
        # host tensors over the pipe, both ways (process_worker._handle says why)
        scored = self._wait(self._send(TeacherForced(rollouts.to("cpu"), temperature)), "scoring the agreement probe")
        return scored.to(rollouts.completion_ids.device)

    def close(self) -> None:
        """Ask the child to exit; what it is still doing may finish (CLOSE_TIMEOUT_S), then it is killed."""
        if self.closed:
            return
        self.closed = True
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        try:
            if self.process.is_alive():
                self.conn.send(Close())
            while self.process.is_alive() and time.monotonic() < deadline:
                if self.conn.poll(POLL_S):
                    self.conn.recv()  # replies nobody waits for any more (a prefetched batch at a stop)
        except (EOFError, OSError, BrokenPipeError):
            pass  # the child closed its end: it is exiting, or gone already
        # it may still be shutting down (its end of the pipe closes before the interpreter exits): a loaded machine
        # took longer than one poll, and the child was killed mid-exit (a flaky exit code -9 in the tests)
        self.process.join(timeout=max(deadline - time.monotonic(), POLL_S))
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=CLOSE_TIMEOUT_S)
        self.conn.close()
        self.group, self.store = None, None  # the group's sockets close with it

    # --- the pipe -----------------------------------------------------------------------------------------------

    def _send(self, command: Any) -> int:
        if self.closed:
            raise EngineProcessError("the engine process was closed; no more commands can be sent")
        try:
            self.conn.send(command)
        except (BrokenPipeError, OSError):
            raise self._failure(f"receiving a {type(command).__name__} command") from None
        return self._expect()

    def _expect(self) -> int:
        ticket, self.sent = self.sent, self.sent + 1
        return ticket

    def _wait(self, ticket: int, doing: str, timeout: float | None = None) -> Any:
        """The reply to `ticket`'s command (earlier replies are kept for their own waits)."""
        limit = REPLY_TIMEOUT_S if timeout is None else timeout
        deadline = time.monotonic() + limit
        while ticket not in self.replies:
            if self.conn.poll(POLL_S):
                try:
                    self.replies[self.received] = self.conn.recv()
                except (EOFError, OSError):
                    raise self._failure(doing) from None
                self.received += 1
            elif not self.process.is_alive():
                raise self._failure(doing)
            elif time.monotonic() > deadline:
                self.process.kill()  # a stuck child is ended, not left behind
                raise EngineProcessError(f"the engine process did not answer within {limit:.0f} s while {doing}; "
                                         "it was stopped")
        reply = self.replies.pop(ticket)
        if not reply.ok:
            raise EngineProcessError(f"the engine process failed while {doing}: {reply.error}")
        return reply.value

    def _failure(self, doing: str) -> EngineProcessError:
        self.process.join(timeout=POLL_S)
        return EngineProcessError(f"the engine process (pid {self.process.pid}) {_exit_text(self.process.exitcode)} "
                                  f"while {doing} (rollout.engine.kind=hf_process); see its output above")


def _specs(named: list[tuple[str, torch.Tensor]]) -> list[TensorSpec]:
    return [TensorSpec(name, tuple(t.shape), t.dtype) for name, t in named]
