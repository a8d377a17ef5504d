"""``mpiexec -n 2 python -m mpiflow.bench``: mpiflow's collectives beside raw mpi4py."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
