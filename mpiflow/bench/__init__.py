"""OSU-style benchmarks of mpiflow's communication, each beside raw mpi4py on the same buffers.

Run ``mpiexec -n 2 python -m mpiflow.bench`` (``--help`` for the options). The package keeps the
pure parts apart from the parts that communicate:

* :mod:`.plan`: message sizes, iteration counts, :class:`Settings` (pure);
* :mod:`.metrics`: buffer layouts, bandwidths, bus factors, ratios and goals (pure);
* :mod:`.report`: tables, summaries and JSON (pure);
* :mod:`.cases`: the registry of benchmark cases (mpiflow call and raw call on shared buffers);
* :mod:`.runner`: warm-up, interleaved timed batches and the max over ranks (collective);
* :mod:`.cli`: the command line.
"""

from .cases import CASES, BenchCase, Context, Prepared, register, select
from .cli import main
from .metrics import GOALS, Goal, Layout, Row, summarize
from .plan import Settings, iterations, message_sizes
from .runner import measure, run

__all__ = [
    "CASES",
    "GOALS",
    "BenchCase",
    "Context",
    "Goal",
    "Layout",
    "Prepared",
    "Row",
    "Settings",
    "iterations",
    "main",
    "measure",
    "message_sizes",
    "register",
    "run",
    "select",
    "summarize",
]
