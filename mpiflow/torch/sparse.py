"""Sparse COO all-reduce for the ``"mpiflow"`` backend, as gloo does it (SUM only).

Every rank's indices and values are gathered to every rank; the sum is their concatenation,
coalesced. gloo does the same (an all-gather of the sparse parts); torch's other backends have
no sparse all-reduce on the CPU.
"""

from __future__ import annotations

from typing import Any

import torch

from ..communication import ReduceOp
from ..communication.watchdog.monitor import mark_call

__all__ = ["sparse_all_reduce"]


def sparse_all_reduce(t: torch.Tensor, op: ReduceOp, mpi_comm: Any) -> None:
    """Sum the sparse COO tensor ``t`` over the ranks of ``mpi_comm``, in place (coalesced).

    Args:
        t: a sparse COO tensor of the same size on every rank.
        op: the reduction; only ``ReduceOp.SUM`` is defined for sparse tensors.
        mpi_comm: the group's mpi4py communicator.

    Raises:
        ValueError: another op than SUM, or the ranks' sizes differ.
    """
    if op is not ReduceOp.SUM:
        raise ValueError(f"all_reduce of a sparse tensor supports ReduceOp.SUM only (as gloo), "
                         f"got {op!r}")
    mine = t.coalesce()
    mark_call()  # the watchdog's mark: a new blocking call
    parts = mpi_comm.allgather((tuple(t.shape), mine.indices(), mine.values()))
    shapes = {shape for shape, _, _ in parts}
    if len(shapes) != 1:
        raise ValueError(f"all_reduce of a sparse tensor needs one size on every rank, got "
                         f"{[shape for shape, _, _ in parts]}")
    indices = torch.cat([i for _, i, _ in parts], dim=1)
    values = torch.cat([v for _, _, v in parts], dim=0)
    total = torch.sparse_coo_tensor(indices, values, t.shape, dtype=t.dtype).coalesce()
    t.copy_(total)
