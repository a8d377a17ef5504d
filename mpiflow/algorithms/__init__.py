"""Distributed algorithms on local arrays and a communicator: no tensors, no layouts.

Each algorithm takes this rank's part of a distributed axis (a numpy or CuPy array), the
communicator of the ranks that hold the axis (in the axis' order) and the row counts every rank
holds, and returns this rank's part of the result. The ops (:mod:`mpiflow.ops`) wrap them: an
op's layout rule says on which mesh axes its kernel runs one of these, and the engine hands
the kernel the communicator of those axes (``Context.comm``). Planning who sends what is pure
(:mod:`.ranges`); the modules:

- :mod:`.ranges`: row counts, offsets and the plan of an exchange (pure);
- :mod:`.exchange`: :func:`fetch` (each rank gets the global row ranges it wants, in one
  ``all_to_all_v``), :func:`rebalance`, :func:`halo`;
- :mod:`.scans`: cumulative sums, products, extrema and log-sum-exp;
- :mod:`.samplesort`: sample sort, stable, to any output counts, with the rows' origins;
- :mod:`.indexing`: :func:`take` and :func:`put` of rows by global row number.
"""

from .exchange import fetch, gather_counts, halo, rebalance
from .indexing import put, take
from .ranges import FetchPlan, balanced, fetch_plan, offsets, pieces
from .samplesort import sort
from .scans import scan

__all__ = ["FetchPlan", "balanced", "fetch", "fetch_plan", "gather_counts", "halo", "offsets",
           "pieces", "put", "rebalance", "scan", "sort", "take"]
