"""Trainer ranks as Ray actors: `rlvr train ray.enabled=true ray.trainer_ranks=N` makes the
`rlvr train` process a thin Ray driver. It places N actors in one placement group, gives each the rendezvous
environment torchrun gives a rank (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and
each actor then calls the driver's training function (rlvr.grpo.loop.train) on the driver's own RunConfig (the
one `rlvr train` read from its command line): the very code path of a torchrun rank from there on (grpo/loop.py
train -> distributed/context.py init_distributed). Both come from the caller, as Ray Train takes its
train_loop_per_worker, so that this package imports neither the CLI nor grpo, which import it (no
import circles). Rank 0 alone writes the run directory, `--resume` reads it, and each rank keeps its in-process
engine and verifiers, all as under torchrun.
No algorithm code lives here: only placement, environment, waiting and stopping.

Placement strategy PACK, not STRICT_PACK: PACK puts the ranks on as few nodes as it can (collectives inside a node
are the fast ones) yet still places a run that no single node can hold, which is what several machines are for;
STRICT_PACK would refuse that run, and SPREAD would split ranks that fit on one node for nothing.
"""
from __future__ import annotations

import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from rlvr.cluster.session import RayBackendError, acquire, check_resources, get, release
from rlvr.config.base import ConfigError

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig

# What each rank actor runs: rlvr.grpo.loop.train, handed in by the CLI (see the module docstring).
Train = Callable[["RunConfig"], object]
POLL_S = 0.5  # how often the driver looks at its ranks and at a pending stop signal
CALL_TIMEOUT_S = 120.0  # an actor's small calls: where it landed, a free port
# Once one rank has returned, the others are past the last collective (grpo.train's final barrier): one that has
# not returned this long after is stuck, and is stopped rather than waited for.
FINISH_GRACE_S = 300.0
PLACEMENT = "PACK"  # see the module docstring


@dataclass(frozen=True)
class RankPlace:
    """Where one trainer-rank actor landed, as it reports it."""

    bundle: int  # its bundle in the placement group (and its index in TrainerRanks.actors)
    node_id: str
    node_ip: str
    gpu_ids: tuple[str, ...]  # the GPUs Ray reserved for it (ray.trainer_gpus), as Ray names them
    pid: int


@dataclass(frozen=True)
class RankLaunch:
    """One rank: its actor's place and the torchrun environment it trains under."""

    rank: int
    place: RankPlace
    env: dict[str, str]


def drives_ranks(trainer_ranks: int, env: Mapping[str, str] = os.environ) -> bool:
    """True: this `rlvr train` process is the Ray driver of `trainer_ranks` actors. False: it trains itself (one
    process or a torchrun rank; the Ray rank actors call the training function directly and never ask). Started by
    torchrun with ray.trainer_ranks > 1 it would start N actors per torchrun rank: one clear error instead."""
    if trainer_ranks == 1:
        return False
    world = env.get("WORLD_SIZE", "1").strip()
    if world not in ("", "1"):
        raise ConfigError(f"ray.trainer_ranks={trainer_ranks} starts the trainer ranks as Ray actors, but this process "
                          f"is already one of WORLD_SIZE={world} ranks (torchrun?): run `rlvr train` once without "
                          "torchrun, or keep torchrun and leave ray.trainer_ranks=1")
    return True


def order_ranks(places: list[RankPlace]) -> list[RankPlace]:
    """Rank order: node by node (in placement order), so that LOCAL_RANK counts within a node; within a node by
    GPU id, so that LOCAL_RANK indexes the node's trainer GPUs in the order rank_environments lists them."""
    nodes = list(dict.fromkeys(p.node_id for p in places))
    return sorted(places, key=lambda p: (nodes.index(p.node_id), _gpu_order(p.gpu_ids), p.bundle))


def _gpu_order(ids: tuple[str, ...]) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(i)) if i.isdigit() else (1, i) for i in ids)


def rank_environments(ordered: list[RankPlace], master_port: int) -> list[RankLaunch]:
    """torchrun's environment for each rank; MASTER_ADDR is rank 0's node, MASTER_PORT free there. Every rank of
    a node sees all of that node's trainer GPUs (CUDA_VISIBLE_DEVICES in local-rank order): init_distributed's
    torch.cuda.set_device(LOCAL_RANK) is then the actor's own GPU, and NCCL sees its neighbours' GPUs (Ray alone
    would show each actor only its own, as device 0)."""
    master, world = ordered[0], len(ordered)
    launches = []
    for rank, place in enumerate(ordered):
        mates = [p for p in ordered if p.node_id == place.node_id]
        env = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(mates.index(place)),
               "LOCAL_WORLD_SIZE": str(len(mates)), "MASTER_ADDR": master.node_ip, "MASTER_PORT": str(master_port)}
        gpus = [g for p in mates for g in p.gpu_ids]
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        launches.append(RankLaunch(rank, place, env))
    return launches


class TrainerRankActor:
    """What runs inside each actor: say where it is, find a free port, then train as a torchrun rank."""

    def place(self, bundle: int) -> RankPlace:
        import ray

        gpus = tuple(str(g) for g in ray.get_gpu_ids())
        return RankPlace(bundle, ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address(), gpus,
                         os.getpid())

    def free_port(self) -> int:
        # bound and released at once, as torchrun's --standalone does: the port is free on this node for the
        # moment it takes rank 0 to bind it again
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("", 0))
            return int(probe.getsockname()[1])

    def train(self, train: Train, config: RunConfig, env: dict[str, str], cwd: str) -> str:
        """What `train` returned (the final model's directory, or the checkpoint a stop signal saved), as text:
        the driver says it itself, since Ray forwards an actor's printed lines late or, at exit, not at all."""
        os.environ.update(env)  # before torch initialises CUDA or a process group
        if os.path.isdir(cwd):  # relative paths in the config mean what they meant to the driver (another node:
            os.chdir(cwd)       # the same path on a shared filesystem, as under torchrun)
        return str(train(config))


def rank_zero_outcome(wrote: str, received: list[str]) -> str:
    """The driver's last line: where rank 0 left the run, and after a passed-on stop how to go on."""
    if received and Path(wrote).parent.name == "checkpoints":  # <run>/checkpoints/step-N (resume.CHECKPOINTS)
        return (f"rlvr: the trainer ranks stopped on {received[0]}; checkpoint {wrote} saved. Resume with: "
                f"rlvr train --resume {Path(wrote).parent.parent}")
    return f"rlvr: the trainer ranks finished; rank 0 saved {wrote}"


def _send_signal(pid: int, signum: int) -> None:
    os.kill(pid, signum)


class StopSignals:
    """SIGINT/SIGTERM while the driver runs. Once the ranks train (`graceful`), the first is passed on to rank 0
    as SIGTERM, which its GracefulStop turns into "finish the step, checkpoint, exit 0"; before that,
    or at the second, the actors are stopped at once (KeyboardInterrupt, which Ray's own waits re-raise as a
    plain one: `received` says which signal it was). Handlers are only set in the main thread."""

    def __init__(self) -> None:
        self.pending, self.graceful = False, False  # a stop to pass on; the ranks train (a stop can be graceful)
        self.received: list[str] = []
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: object) -> None:
        self.received.append(signal.Signals(signum).name)
        if len(self.received) > 1 or not self.graceful:
            raise KeyboardInterrupt(self.received[-1])
        self.pending = True  # forwarded by the wait loop: no Ray call from inside a signal handler


class TrainerRanks:
    """The N rank actors of one run, in one placement group."""

    def __init__(self, ray: Any, group: Any, size: int):
        self._ray, self._group, self.size = ray, group, size
        self.actors: list[Any] = []
        self.places: list[RankPlace] = []
        self._stopped = False

    @classmethod
    def place(cls, ray: Any, config: RunConfig) -> TrainerRanks:
        """Reserve the bundles (refused at once if the cluster can never hold them; an error after
        ray.trainer_start_timeout_s if it is only busy), then start one actor in each and ask where it landed."""
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        r, n = config.ray, config.ray.trainer_ranks
        bundle = {"CPU": r.trainer_cpus, **({"GPU": r.trainer_gpus} if r.trainer_gpus else {})}
        check_resources(ray, {k: v * n for k, v in bundle.items()}, f"{n} Ray trainer ranks",
                        "ray.trainer_ranks x ray.trainer_cpus / trainer_gpus")
        _check_a_node_fits(ray, bundle)
        ranks = cls(ray, placement_group([dict(bundle) for _ in range(n)], strategy=PLACEMENT), n)
        try:
            if not ranks._group.wait(timeout_seconds=r.trainer_start_timeout_s):
                raise RayBackendError(f"the Ray cluster did not free {n} x {bundle} for the trainer ranks within "
                                      f"ray.trainer_start_timeout_s={r.trainer_start_timeout_s:g}s (it is busy: "
                                      f"available now {ray.available_resources()})")
            remote = ray.remote(TrainerRankActor)
            ranks.actors = [remote.options(
                num_cpus=r.trainer_cpus, num_gpus=r.trainer_gpus, max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(ranks._group, placement_group_bundle_index=i),
            ).remote() for i in range(n)]
            ranks.places = [ranks._call(ranks.actors[i].place, (i,), f"starting Ray trainer-rank actor {i}",
                                        r.trainer_start_timeout_s) for i in range(n)]
        except BaseException:
            ranks.stop()
            raise
        return ranks

    def _call(self, method: Any, args: tuple, what: str, timeout_s: float = CALL_TIMEOUT_S) -> Any:
        return get(self._ray, method.remote(*args), timeout_s, what, on_error=self.stop)

    def run(self, train: Train, config: RunConfig, cwd: str, signals: StopSignals) -> None:
        """Rendezvous, then `train(config)` on every rank; returns when all ranks have returned."""
        ordered = order_ranks(self.places)
        port = self._call(self.actors[ordered[0].bundle].free_port, (), "finding a free port on trainer rank 0")
        launches = rank_environments(ordered, port)
        nodes = sorted({p.node_ip for p in ordered})
        print(f"rlvr: {self.size} trainer ranks as Ray actors on {len(nodes)} node(s) {nodes}; rendezvous at "
              f"{ordered[0].node_ip}:{port}", flush=True)
        pending = {self.actors[x.place.bundle].train.remote(train, config, x.env, cwd): x for x in launches}
        signals.graceful = True
        self._wait(pending, signals)

    def _wait(self, pending: dict[Any, RankLaunch], signals: StopSignals) -> None:
        """Until every rank returns. The first rank to raise or die is the error (the others are stopped at
        once: they would wait in a collective for it); after a rank has returned the rest get FINISH_GRACE_S."""
        finish_by = None
        while pending:
            ready, _ = self._ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for ref in ready:
                launch = pending.pop(ref)
                self._call_done(ref, launch, signals)
                finish_by = finish_by or time.monotonic() + FINISH_GRACE_S
            if signals.pending:
                signals.pending = False
                self.signal_rank_zero(signal.SIGTERM)
            if pending and finish_by is not None and time.monotonic() > finish_by:
                self.stop()
                stuck = sorted(x.rank for x in pending.values())
                raise RayBackendError(f"trainer rank(s) {stuck} did not finish within {FINISH_GRACE_S:g}s of the "
                                      "other ranks; their actors were stopped")

    def _call_done(self, ref: Any, launch: RankLaunch, signals: StopSignals) -> None:
        wrote = get(self._ray, ref, CALL_TIMEOUT_S, f"trainer rank {launch.rank} of {self.size} (Ray actor on "
                                                    f"{launch.place.node_ip}, pid {launch.place.pid})",
                    on_error=self.stop)
        if launch.rank == 0:
            print(rank_zero_outcome(wrote, signals.received), flush=True)

    def signal_rank_zero(self, signum: int) -> None:
        """Send `signum` to rank 0's process, on its node (a zero-CPU task pinned there). One rank is enough: the
        ranks agree to stop through a max over ranks of their stop flags (grpo/loop.py _train_loop), so all
        checkpoint the same step. Signalling every rank, as torchrun does, raced here: a rank whose signal came
        after that agreed stop had already left GracefulStop, and Ray's own SIGTERM handler killed it mid-save."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        print(f"rlvr: {signal.Signals(signum).name} passed on to trainer rank 0: the {self.size} ranks finish the "
              "step and checkpoint (send it again to stop them now)", flush=True)
        place = order_ranks(self.places)[0]
        sender = self._ray.remote(num_cpus=0, max_retries=0)(_send_signal)
        sender.options(scheduling_strategy=NodeAffinitySchedulingStrategy(place.node_id, soft=False)
                       ).remote(place.pid, signum)

    def stop(self) -> None:
        """Kill every actor and free the placement group. Idempotent; also the error path of every wait."""
        if self._stopped:
            return
        self._stopped = True
        from ray.util.placement_group import remove_placement_group

        for actor in self.actors:
            self._ray.kill(actor, no_restart=True)
        remove_placement_group(self._group)


def _check_a_node_fits(ray: Any, bundle: dict[str, float]) -> None:
    """A bundle lives on one node: enough CPUs and GPUs in all, but no node with one bundle's, can never place."""
    alive = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive", True)]
    if not any(all(have.get(k, 0.0) >= v for k, v in bundle.items()) for have in alive):
        biggest = [{k: have.get(k, 0.0) for k in bundle} for have in alive]
        raise RayBackendError(f"no Ray node can hold one trainer rank's {bundle} (ray.trainer_cpus / trainer_gpus); "
                              f"the nodes have {biggest}")


def drive_trainer_ranks(config: RunConfig, train: Train) -> int:
    """`rlvr train` as the Ray driver: what the ranks would refuse is refused here before any actor starts, then
    the ranks are placed and run; whatever happens, the actors are stopped and the cluster released."""
    from rlvr.distributed.checks import check_supported
    from rlvr.distributed.context import DistContext

    check_supported(config, DistContext(0, config.ray.trainer_ranks, 0, None))
    ray, ranks, signals = acquire(config.ray.address), None, StopSignals()
    try:
        with signals:
            ranks = TrainerRanks.place(ray, config)
            ranks.run(train, config, os.getcwd(), signals)
    except KeyboardInterrupt:
        cause = " then ".join(signals.received) or "KeyboardInterrupt"
        raise RayBackendError(f"stopped by {cause}: the trainer-rank actors were killed at once (the run directory "
                              "keeps its last complete checkpoint)") from None
    finally:
        if ranks is not None:
            ranks.stop()
        release()
    return 0
