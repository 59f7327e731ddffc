"""torch.distributed for `rlvr train` under torchrun: DDP and FSDP2.

context.py  who this process is (DistContext), the process group, the collectives the loop needs
wrap.py     the policy under DDP / FSDP2, gradient summing, unsharded rollouts
gather.py   the global batch's rollouts and rewards for metrics.jsonl
state.py    checkpoints gathered on every rank and written by rank 0
checks.py   what a multi-rank run refuses, and the per-rank sampling seed
exit.py     how a rank ends: Python's exit steps, then no interpreter teardown (torch-free, for the CLI)
"""
