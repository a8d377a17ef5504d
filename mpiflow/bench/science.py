"""The science suite (``--suite science``): distributed array work beside numpy doing it alone.

Its parts, each a module of this package with ``run(settings) -> rows`` (collective) and
``format(rows, markdown) -> str``, run one after the other in one job:

* ``stats``: :mod:`.science_stats` (sort, unique, quantiles, histograms);
* ``scan``: :mod:`.science_scan` (cumsum, a boolean mask, fancy rows, reshape across a split);
* ``fft``: :mod:`.science_fft` (``fft2`` and a distributed 1-D FFT);
* ``linalg``: :mod:`.science_linalg` (tall-skinny QR and SVD, solve, matmuls);
* ``io``: :mod:`.science_io` (HDF5, netCDF, Zarr, CSV and ``.npy`` beside raw MPI-IO).

Each part times numpy on one process doing the whole job (rank 0, the others waiting) and
mpiflow on every rank, in the same run, and prints the ratio. ``MPIFLOW_SCIENCE_PARTS`` (a
comma-separated list) picks parts; the default is every one. Run with one thread per rank::

    OMP_NUM_THREADS=1 mpiexec -n 2 python -m mpiflow.bench --suite science
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from ..core import settings
from .plan import Settings

__all__ = ["PARTS", "format_science", "run_science", "selected_parts"]

PARTS = {"stats": "science_stats", "scan": "science_scan", "fft": "science_fft",
         "linalg": "science_linalg", "io": "science_io"}
_TITLES = {"stats": "Sorting and statistics", "scan": "Scans, masks and indexing",
           "fft": "FFT", "linalg": "Linear algebra", "io": "Files"}


def selected_parts() -> list[str]:
    """The parts ``MPIFLOW_SCIENCE_PARTS`` names (all by default), in :data:`PARTS` order.

    Raises:
        ValueError: an unknown part.

    Examples:
        >>> "scan" in selected_parts()
        True
    """
    names = [n.strip() for n in settings.read("MPIFLOW_SCIENCE_PARTS").split(",") if n.strip()]
    unknown = sorted(set(names) - set(_available()))
    if unknown:
        raise ValueError(f"MPIFLOW_SCIENCE_PARTS names unknown parts {unknown}; choose from "
                         f"{', '.join(_available())}")
    return [p for p in _available() if not names or p in names]


def _available() -> list[str]:
    return [p for p, module in PARTS.items()
            if importlib.util.find_spec(f"{__package__}.{module}") is not None]


def _module(part: str) -> Any:
    return importlib.import_module(f"{__package__}.{PARTS[part]}")


def run_science(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """Run every selected part (collective): its rows, by part."""
    return {part: _module(part).run(settings) for part in selected_parts()}


def format_science(results: dict[str, list[dict[str, Any]]], markdown: bool) -> str:
    """Each part's table under its title."""
    out = []
    for part, rows in results.items():
        title = _TITLES[part]
        out.append(f"### {title}" if markdown else f"== {title}")
        out.append(_module(part).format(rows, markdown))
        out.append("")
    return "\n".join(out).rstrip()
