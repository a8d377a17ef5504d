"""torch rendezvous under an MPI launcher: ranks, size and a store from MPI, no MASTER_ADDR.

``init_process_group`` runs a rendezvous before it makes any group: by default ``env://``,
which needs ``MASTER_ADDR``/``MASTER_PORT`` and opens a TCP listener on rank 0 for its store.
Under ``mpiexec``/``srun`` MPI already knows the ranks, so :func:`install` adds

- ``init_method="mpi://"``: rank and world size from MPI, and an :class:`~.store.MPIStore`
  (a key-value store served over MPI by rank 0: no socket is opened);
- the same for the default ``env://`` when ``MASTER_ADDR`` is unset (where torch's own handler
  would fail) or is the value mpiflow set for torchrun's contract (agreed over MPI, recorded
  in ``MPIFLOW_LAUNCHER_ENV``); with a ``MASTER_ADDR`` of the user's, torch's handler runs
  unchanged.

A ``RANK``/``WORLD_SIZE`` in the environment (or the url) that disagrees with MPI is an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlparse

__all__ = ["install", "mpi_rendezvous"]

_DEFAULT_TIMEOUT = timedelta(minutes=30)


def _expected(url: str, name: str) -> int | None:
    values = parse_qs(urlparse(url).query).get(name)
    if values:
        return int(values[0])
    env = os.environ.get(name.upper())
    return int(env) if env not in (None, "") else None


def mpi_rendezvous(url: str, timeout: timedelta = _DEFAULT_TIMEOUT,
                   **kwargs: Any) -> Iterator[tuple[Any, int, int]]:
    """torch's rendezvous handler for ``mpi://``: ``(store, rank, world_size)`` from MPI.

    Collective over the MPI world (the store is made on every rank).

    Raises:
        ValueError: a rank or world size given in the url or environment differs from MPI's.
    """
    from ..communication.mpi.group import world_comm
    from .store import MPIStore

    rank, size = world_comm.rank, world_comm.size
    for name, actual in (("rank", rank), ("world_size", size)):
        expected = _expected(url, name)
        if expected is not None and expected not in (-1, actual):
            raise ValueError(f"Error initializing torch.distributed using mpi:// rendezvous: "
                             f"{name}={expected} was given, but MPI says {actual}; leave it "
                             f"unset under an MPI launcher")
    store = MPIStore(timeout=timeout)
    yield store, rank, size
    raise RuntimeError("Unable to perform re-rendezvous using mpi:// method")


def install() -> None:
    """Add the ``mpi://`` rendezvous and let ``env://`` fall back to it (idempotent)."""
    from _mpiflow_torch_autoload import install_rendezvous

    install_rendezvous()
