"""Ray for several machines. Two layouts, chosen by ray.trainer_ranks:

- trainer_ranks=1: the rollout engine and the verifiers run as Ray actors placed anywhere on the cluster, while
  the trainer stays the driver process (ray_backend.py, ray_rewards.py).
- trainer_ranks=N: the `rlvr train` process is a thin driver of N trainer-rank actors in one placement group;
  each runs `rlvr train` as a torchrun rank would, with its in-process engine and verifiers (trainers.py).

- session.py: join a cluster (`ray.address`) or start one sized to this machine; shut down only what we started.
- ray_backend.py: `RayEngine`, a SyncedEngine whose weights live in an actor (rlvr/rollout/host.py EngineHost).
- ray_rewards.py: `RayRewardService`, Ray actors as the transport of rlvr/rewards/pool.py's verifier pool.
- trainers.py: the trainer ranks as actors: placement, torchrun's rendezvous environment, waiting, stopping.

No algorithm code lives here: this layer only places existing pieces (EngineHost, build_verifiers, safe_verify,
combine, the `rlvr train` command) and moves their inputs and outputs."""
