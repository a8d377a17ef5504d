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
- :mod:`.indexing`: :func:`take` and :func:`put` of rows by global row number, and
  :func:`take_along`/:func:`put_along` of single elements;
- :mod:`.segments`: an axis made of pieces of another (:func:`assemble`: roll, pad), the
  adjoint (:func:`scatter_sum`), and :func:`differences` (``diff``: a halo and a rebalance);
- :mod:`.compaction`: :func:`compress` (rows a mask marks, balanced), :func:`expand` (its adjoint),
  :func:`concatenate` (the ranks' parts joined, balanced);
- :mod:`.moments`: per-part counts, means and squared deviations, combined (``var_mean``);
- :mod:`.selection`: order statistics by selection (sample bracketing, no sort): k-th values
  and medians with their rows, quantiles, top k;
- :mod:`.runs`: runs of equal values (the starts with a halo of one row, their compaction to
  balanced parts, run numbers, the mode);
- :mod:`.search`: ``searchsorted`` in a split sorted sequence and ``isin`` with split test
  elements (each value routed to the one rank that decides it).
"""

from .compaction import compress, concatenate, expand
from .exchange import fetch, gather_counts, halo, rebalance
from .indexing import put, put_along, take, take_along
from .moments import moments
from .ranges import FetchPlan, balanced, fetch_plan, offsets, pieces
from .runs import compact_runs, mode, run_ids, run_starts
from .samplesort import sort
from .scans import arg_scan, scan
from .search import isin, searchsorted
from .segments import assemble, differences, scatter_sum
from .selection import kth_values, order_statistics, quantiles, topk

__all__ = ["FetchPlan", "arg_scan", "assemble", "balanced", "compact_runs", "compress",
           "concatenate", "differences", "expand", "fetch", "fetch_plan", "gather_counts", "halo",
           "isin", "kth_values", "mode", "moments", "offsets", "order_statistics", "pieces", "put",
           "put_along", "quantiles", "rebalance", "run_ids", "run_starts", "scan", "scatter_sum",
           "searchsorted", "sort", "take", "take_along", "topk"]
