"""Shared by the tests of mpiflow.io's data files (HDF5, netCDF, Zarr, CSV, .npy): the layouts
to save from and load into, global tensors of a value in each, and a directory every rank sees.

Layouts include 2-D meshes (at 2 and 4 ranks), uneven splits (values of ``3 * SIZE + 1`` rows)
and placements of fewer ranks than the job, so that a file saved by some ranks is loaded by
others (a different rank count, in one job).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy
import pytest

import mpiflow as flow
from mpiflow.communication.mpi.group import world_comm

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, B, P = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum
ROWS = 3 * SIZE + 1  # uneven everywhere; empty shards at 4 ranks along short dims


def layouts(short: bool = False) -> list[tuple[flow.placement, tuple[Any, ...]]]:
    """The (placement, sbp) pairs of the round trips at this job's size (``short``: four of
    them, a column split, a partial sum, a 2-D mesh and fewer ranks, for the formats that
    share the layout code of a format tested with all)."""
    out: list[tuple[flow.placement, tuple[Any, ...]]] = [(ALL, (s,)) for s in (S0, S1, B, P)]
    if SIZE == 4:
        mesh = flow.placement("cpu", [[0, 1], [2, 3]])
        out += [(mesh, (S0, S1)), (mesh, (S1, S0)), (mesh, (S0, S0)), (mesh, (B, P))]
    elif SIZE == 2:
        mesh = flow.placement("cpu", [[0], [1]])
        out += [(mesh, (S0, S1)), (mesh, (P, B))]
    if SIZE > 1:
        out.append((flow.placement("cpu", [SIZE - 1]), (S0,)))  # one rank saves or loads
    if SIZE > 2:
        out.append((flow.placement("cpu", list(range(1, SIZE))), (S1,)))
    if short:
        meshes = [pair for pair in out if pair[0].ndim == 2][:1]
        fewer = [pair for pair in out if len(pair[0].rank_list) < SIZE][:1]
        return [out[1], out[3], *meshes, *fewer]
    return out


def value(shape: tuple[int, ...], dtype: Any = numpy.float64, seed: int = 0) -> numpy.ndarray:
    """Distinct values (small integers scaled, exact in every float type), the same everywhere."""
    rng = numpy.random.default_rng(seed)
    return (rng.permutation(int(numpy.prod(shape))).reshape(shape) / 4).astype(dtype)


def global_tensor(full: numpy.ndarray, placement: flow.placement, sbp: tuple[Any, ...]
                  ) -> flow.Tensor:
    """``full`` laid out as ``(placement, sbp)``; partial axes get parts that differ per rank
    (coordinate ``c`` of ``k`` adds ``c - (k - 1) / 2``) and sum to ``full`` exactly."""
    plain = tuple(B if s == P else s for s in sbp)
    t = flow.tensor(full, placement=placement, sbp=plain)
    if plain == tuple(sbp):
        return t
    coords = placement.coordinates(RANK)
    local = t._data
    if coords is not None:
        first = all(coords[a] == 0 for a, s in enumerate(sbp) if s == P)
        local = local * (1.0 if first else 0.0)
        for a, s in enumerate(sbp):
            if s == P:
                local = local + (coords[a] - (placement.ranks.shape[a] - 1) / 2)
    return flow.Tensor(local.astype(full.dtype), placement, tuple(sbp), full.shape)


@pytest.fixture
def shared_dir(mpi_tmp_path: Path) -> Path:
    """A fresh directory, the same path on every rank (pytest-mpi's ``mpi_tmp_path``)."""
    return mpi_tmp_path


def on_rank0(action: Any) -> Any:
    """Run ``action`` on rank 0 only (writing or reading a file with another library); every
    rank gets its result (the broadcast also makes the others wait for it)."""
    result = action() if RANK == 0 else None
    return world_comm.mpi_comm.bcast(result, root=0)


def on_all(mine: Any) -> list[Any]:
    """Every rank's ``mine``, in rank order, on every rank."""
    return world_comm.mpi_comm.allgather(mine)


def leftovers(directory: Path) -> list[str]:
    """Temporary files or directories a save left in ``directory`` (there must be none)."""
    return sorted(p.name for p in directory.iterdir() if ".tmp-" in p.name)
