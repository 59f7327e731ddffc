"""`python -m rlvr ...` is the `rlvr` command; torchrun needs it: `torchrun --nproc_per_node 2 -m rlvr train ...`."""
import sys

from rlvr.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
