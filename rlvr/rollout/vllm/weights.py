"""The data plane of vLLM server mode's weight sync: how the trainer's tensors reach a
`vllm serve` process while the HTTP control plane (rollout/vllm/server.py) tells the server what to expect.

vLLM's native weight-transfer API (vLLM >= 0.22, docs.vllm.ai/en/latest/training/weight_transfer/ and
examples/rl/rlhf_http_nccl.py): the trainer is rank 0 of a group whose ranks 1..W are the server's workers; every
tensor is broadcast from rank 0, in the order the `/update_weights` request lists them. A sender is one small
Protocol so the NCCL sender (GPU, vLLM's own communicator) and a gloo sender (CPU; the tests' stand-in server
receives with gloo) are interchangeable.

vLLM's trainer-side API changed in 0.28: the static `NCCLWeightTransferEngine.trainer_init/trainer_send_weights`
gave way to a stateful `NCCLTrainerWeightTransferEngine` that also drives the HTTP calls, and the `packed` wire
flag moved from the per-update info to the init info. rlvr drives the HTTP calls itself (deadlines, one error),
so it uses only what both generations share: vLLM's `StatelessProcessGroup` + `PyNcclCommunicator` for the group
and one-by-one broadcasts (`packed=False`), with the flag placed where the installed vLLM's dataclasses declare it
(feature-detected, not versioned). This module imports vllm only inside NCCLWeightSender.
"""
from __future__ import annotations

import dataclasses
import socket
from datetime import timedelta
from typing import Any, Iterable, Protocol

import torch

from rlvr.rollout.vllm.convert import VLLMError

GLOO_PREFIX = "rlvr-vllm-weights"  # the store keys of the gloo group (tests' stand-in server uses the same)


class WeightSender(Protocol):
    """Rank 0 of the weight-transfer group. `init` joins the group (it returns once every server worker has
    joined too, so the control plane issues the server's init concurrently); `send` broadcasts every tensor in
    order. The extra fields are what this sender's receiver expects in the init / update requests."""

    init_fields: dict[str, Any]
    update_fields: dict[str, Any]

    def init(self, master_address: str, master_port: int, world_size: int) -> None: ...

    def send(self, named: Iterable[tuple[str, torch.Tensor]]) -> None: ...

    def close(self) -> None: ...


def free_port() -> int:
    """A TCP port free now on this machine (the group's rendezvous; a race with another process taking it is
    reported as a failed init, not a hang)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def address_seen_by(host: str, port: int) -> str:
    """This machine's address on the route to `host` (the interface the server reaches the trainer through):
    a UDP 'connect' picks the route without sending anything."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((socket.gethostbyname(host), port))
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"


class GlooWeightSender:
    """CPU tensors over a torch.distributed gloo group built from a TCPStore this side hosts (as the hf_process
    engine does, rollout/process.py): no default process group is needed or disturbed."""

    def __init__(self, timeout_s: float):
        self.init_fields: dict[str, Any] = {}
        self.update_fields: dict[str, Any] = {}
        self.timeout = timedelta(seconds=timeout_s)
        self.store, self.group = None, None

    def init(self, master_address: str, master_port: int, world_size: int) -> None:
        from torch.distributed import PrefixStore, ProcessGroupGloo, TCPStore

        self.store = TCPStore(master_address, master_port, world_size, True, timeout=self.timeout,
                              wait_for_workers=False)
        self.group = ProcessGroupGloo(PrefixStore(GLOO_PREFIX, self.store), 0, world_size, self.timeout)

    def send(self, named: Iterable[tuple[str, torch.Tensor]]) -> None:
        with torch.no_grad():
            for _, tensor in named:
                self.group.broadcast(tensor.detach().to("cpu").contiguous(), 0).wait()

    def close(self) -> None:
        self.group, self.store = None, None


def _declared_fields(module: Any, name: str) -> set[str]:
    cls = getattr(module, name, None)
    return {f.name for f in dataclasses.fields(cls)} if cls is not None and dataclasses.is_dataclass(cls) else set()


class NCCLWeightSender:
    """CUDA tensors over vLLM's own NCCL communicator, as the server's NCCL weight-transfer engine receives them
    (`vllm serve ... --weight-transfer-config '{"backend":"nccl"}'`)."""

    def __init__(self):
        try:
            from vllm.distributed.weight_transfer import nccl_engine
        except ImportError as err:
            raise VLLMError("rollout.engine.vllm_mode=server needs vLLM >= 0.22 on the trainer too (its NCCL "
                            f"weight-transfer API, vllm.distributed.weight_transfer): {err}") from err

        # Where does the installed vLLM read `packed`? Before 0.28 on the update info, since on the init info.
        packed = {"packed": False}
        self.init_fields = packed if "packed" in _declared_fields(nccl_engine, "NCCLWeightTransferInitInfo") else {}
        self.update_fields = packed if "packed" in _declared_fields(nccl_engine, "NCCLWeightTransferUpdateInfo") \
            else {}
        self.communicator = None

    def init(self, master_address: str, master_port: int, world_size: int) -> None:
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        from vllm.distributed.utils import StatelessProcessGroup

        group = StatelessProcessGroup.create(host=master_address, port=master_port, rank=0, world_size=world_size)
        self.communicator = PyNcclCommunicator(group, device=torch.cuda.current_device())

    def send(self, named: Iterable[tuple[str, torch.Tensor]]) -> None:
        stream = torch.cuda.current_stream()
        with torch.no_grad():
            for _, tensor in named:
                self.communicator.broadcast(tensor.detach().to("cuda").contiguous(), src=0, stream=stream)
        stream.synchronize()  # the tensors may be freed or updated once this returns

    def close(self) -> None:
        self.communicator = None
