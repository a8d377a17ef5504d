"""Benchmarks of mpiflow, each beside the raw alternative timed in the same run.

Run ``mpiexec -n 2 python -m mpiflow.bench`` (``--help`` for the options; ``--suite`` picks the
tables: OSU-style collectives, redistribution, gradient sync, the DDP step, checkpoints, the
watchdog). The
package keeps the pure parts apart from the parts that communicate:

* :mod:`.plan`: message sizes, iteration counts, :class:`Settings` (pure);
* :mod:`.metrics`: buffer layouts, bandwidths, bus factors, ratios, goals, timings (pure);
* :mod:`.report`: tables, summaries and JSON (pure);
* :mod:`.cases`: the registry of OSU cases (mpiflow call and raw call on shared buffers), and
  :mod:`.cuda_cases` the same on CuPy buffers (``--device cuda``);
* :mod:`.runner`: warm-up, interleaved timed batches and the max over ranks (collective);
* :mod:`.redistribution`, :mod:`.training`, :mod:`.checkpoint`, :mod:`.watchdog`: the other
  suites, and :mod:`.suites` their registry;
* :mod:`.plot`: ``--plot`` (matplotlib, imported only then);
* :mod:`.cli`: the command line.
"""

from . import cuda_cases  # noqa: F401 - registers the CUDA cases (after the CPU ones)
from .cases import CASES, BenchCase, Context, Prepared, register, select
from .cli import main
from .metrics import GOALS, Goal, Layout, Row, Timings, summarize
from .plan import SUITES, Settings, iterations, message_sizes
from .runner import measure, measure_interleaved, run

__all__ = [
    "CASES",
    "GOALS",
    "BenchCase",
    "Context",
    "Goal",
    "Layout",
    "Prepared",
    "Row",
    "SUITES",
    "Settings",
    "Timings",
    "iterations",
    "main",
    "measure",
    "measure_interleaved",
    "message_sizes",
    "register",
    "run",
    "select",
    "summarize",
]
