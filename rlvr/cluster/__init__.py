"""Ray for several machines (issue #11, item 5): the rollout engine and the verifiers run as Ray actors, placed
anywhere on a Ray cluster, while the trainer stays the driver process.

- session.py: join a cluster (`ray.address`) or start one sized to this machine; shut down only what we started.
- ray_backend.py: `RayEngine`, a SyncedEngine whose weights live in an actor (rlvr/rollout/host.py EngineHost).
- ray_rewards.py: `RayRewardService`, the verifier pool of rlvr/reward_service.py with actors for processes.

Trainer ranks as Ray actors are out of scope: the trainer is the driver, and several trainer ranks are
launched with torchrun (rlvr/distributed). No algorithm code lives here: this layer only places existing
pieces (EngineHost, build_verifiers, safe_verify, combine) and moves their inputs and outputs."""
