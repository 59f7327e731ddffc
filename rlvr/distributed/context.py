"""Who this process is under torchrun, and the few collectives the GRPO loop needs.

torchrun starts one process per rank and tells each its place through the environment (WORLD_SIZE, RANK,
LOCAL_RANK, MASTER_ADDR/PORT). Without WORLD_SIZE, or with WORLD_SIZE=1, this is the single-process run and
nothing is initialised: every collective below is then the identity, so the loop has one code path.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from rlvr.config.run import ConfigError


class DistributedError(ConfigError):
    """A setting that cannot run under this torchrun launch; one line, exit 2 (rlvr.cli.main)."""


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    backend: str | None  # "gloo" | "nccl"; None = one process, no process group

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes the run directory (logs, config, checkpoints, final/)."""
        return self.rank == 0

    def _device(self) -> torch.device:
        # NCCL reduces CUDA tensors only; gloo CPU ones.
        return torch.device("cuda", torch.cuda.current_device()) if self.backend == "nccl" else torch.device("cpu")

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum over ranks, in float64 so that adding two ranks' partial sums loses nothing."""
        return self._reduce(values, "sum")

    def max(self, values: list[float]) -> list[float]:
        return self._reduce(values, "max")

    def _reduce(self, values: list[float], op: str) -> list[float]:
        if not self.enabled or not values:
            return [float(v) for v in values]
        import torch.distributed as dist

        buffer = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self._device())
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
        return buffer.cpu().tolist()

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank (small picklable records only: rows, metrics)."""
        if not self.enabled:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank."""
        if not self.enabled:
            return obj
        import torch.distributed as dist

        box = [obj if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def cat_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """[b, C_r] per rank -> [sum b, max C_r], rank order, right-padded with zeros (masks of the step's batch)."""
        if not self.enabled:
            return rows
        parts = self.gather(rows.detach().cpu())
        width = max(p.shape[1] for p in parts)
        padded = [torch.nn.functional.pad(p, (0, width - p.shape[1])) for p in parts]
        return torch.cat(padded, dim=0).to(rows.device)

    def micro_batch(self, policy: Any, last: bool) -> contextlib.AbstractContextManager:
        """Gradient sync only on the step's last micro-batch (gradient_sync below)."""
        if not self.enabled:
            return contextlib.nullcontext()
        return gradient_sync(policy, last)

    def share(self, items: list, what: str = "rollout.prompts_per_step") -> list:
        """This rank's contiguous slice of the step's items: rank r keeps [r*n, (r+1)*n). Every rank draws the
        same items from the same seeded stream, so the slices partition them and a prompt's G completions (its
        group) are all generated, scored and normalised on one rank."""
        if len(items) % self.world_size:
            raise DistributedError(f"{what}={len(items)} must be divisible by the number of ranks "
                                   f"({self.world_size}): each rank rolls out an equal share of whole groups")
        n = len(items) // self.world_size
        return items[self.rank * n:(self.rank + 1) * n]

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.barrier()


SINGLE = DistContext(rank=0, world_size=1, local_rank=0, backend=None)


def from_env(env: Mapping[str, str] | None = None) -> tuple[int, int, int]:
    """(rank, world_size, local_rank) as torchrun set them; (0, 1, 0) outside torchrun."""
    env = os.environ if env is None else env
    try:
        world = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
        local = int(env.get("LOCAL_RANK", str(rank)))
    except ValueError as err:
        raise DistributedError(f"torchrun's WORLD_SIZE/RANK/LOCAL_RANK are not integers: {err}") from None
    if world < 1 or not 0 <= rank < world:
        raise DistributedError(f"RANK={rank} is not in [0, WORLD_SIZE={world})")
    return rank, world, local


def choose_backend(setting: str) -> str:
    """'auto': NCCL when CUDA is present (the GPU collective library), gloo on CPU."""
    if setting == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if setting == "nccl" and not torch.cuda.is_available():
        raise DistributedError("distributed.backend=nccl needs CUDA GPUs; use distributed.backend=gloo on CPU")
    return setting


def init_distributed(backend_setting: str, env: Mapping[str, str] | None = None) -> DistContext:
    """The DistContext of this process, with the default process group initialised when WORLD_SIZE > 1."""
    rank, world, local = from_env(env)
    if world == 1:
        return SINGLE
    import torch.distributed as dist

    if not dist.is_available():
        raise DistributedError("this torch build has no torch.distributed; run without torchrun")
    backend = choose_backend(backend_setting)
    if backend == "nccl":
        torch.cuda.set_device(local)  # one GPU per rank; NCCL picks the current device
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    return DistContext(rank=rank, world_size=world, local_rank=local, backend=backend)


def shutdown(ctx: DistContext, finished: bool = True) -> None:
    """Tear the process group down. `finished`: every rank got here normally, so wait for all of them first (a
    rank that closes its connections while a peer still talks to it makes gloo abort the peer). After an error
    there is no wait: the failing rank may be alone, and torchrun stops the others when it exits."""
    import torch.distributed as dist

    if ctx.enabled and dist.is_initialized():
        if finished:
            dist.barrier()
        dist.destroy_process_group()


def gradient_sync(policy: torch.nn.Module, last: bool) -> contextlib.AbstractContextManager:
    """Accumulate micro-batch gradients locally and communicate once, in the last micro-batch's backward.
    Every rank runs the same number of micro-batches (equal shares), so the collectives line up. Here, not in
    wrap.py with the wrappers it reads, so that wrap.py depends on this module and not back."""
    if hasattr(policy, "no_sync"):  # DDP
        return contextlib.nullcontext() if last else policy.no_sync()
    if hasattr(policy, "set_requires_gradient_sync"):  # FSDP2
        policy.set_requires_gradient_sync(last)
    return contextlib.nullcontext()
