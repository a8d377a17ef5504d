"""Hello from every rank: where each process runs, and a few collectives checked against numpy.

Run: ``mpiexec -n 4 python examples/hello.py`` (or ``scripts/demo``).
"""

from __future__ import annotations

import socket

import numpy

import mpiflow as flow
import mpiflow.distributed as dist


def main() -> None:
    rank, size = flow.env.get_rank(), flow.env.get_world_size()

    # Where everyone is: one object collective.
    where = [None] * size
    dist.all_gather_object(where, (socket.gethostname(), flow.env.get_local_rank()))

    # A sum over ranks, in place, as with torch.distributed.
    x = numpy.arange(4, dtype=numpy.float32) * (rank + 1)
    dist.all_reduce(x)
    expected = numpy.arange(4, dtype=numpy.float32) * size * (size + 1) / 2
    assert numpy.array_equal(x, expected), (x, expected)

    # OneFlow's reduce_scatter_tensor: every rank keeps its row of the summed matrix.
    full = numpy.arange(size * 3, dtype=numpy.float64).reshape(size, 3)
    mine = numpy.empty(3)
    flow.comm.reduce_scatter_tensor(mine, full)
    assert numpy.array_equal(mine, full[rank] * size)

    # An asynchronous all-gather overlapping some local work.
    gathered = numpy.empty((size, 2), dtype=numpy.int64)
    work = dist.all_gather_into_tensor(gathered, numpy.array([rank, rank**2]), async_op=True)
    local = sum(i * i for i in range(10_000))
    work.wait()

    if rank == 0:
        print(f"mpiflow {flow.__version__}: {size} rank(s) on {flow.env.get_node_size()} node(s)")
        for r, (host, local_rank) in enumerate(where):
            print(f"  rank {r}: host {host}, local rank {local_rank}")
        print(f"  all_reduce         -> {x.tolist()}")
        print(f"  gathered (r, r^2)  -> {gathered.tolist()}")
        print(f"  local work meanwhile: {local}")
        print("all checks passed")


if __name__ == "__main__":
    main()
