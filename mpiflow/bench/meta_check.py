"""What ``to_global``'s agreement check costs: the ``to_global_check`` suite of
``python -m mpiflow.bench``.

Ranks must agree on what a ``to_global`` call means (:mod:`mpiflow.tensors.meta`). For a local
tensor the check is on by default (``check_meta=True``); the alternative a user would pick is
to skip it (``check_meta=False`` with ``shape=``). For a global tensor it runs only under
``MPIFLOW_DEBUG=1``; its cost there is one :func:`mpiflow.tensors.meta.agree` before the
redistribution. Each group times both sides, interleaved, on float32 tensors of a few sizes
on a 1-D placement of every rank.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy

from ..communication.mpi.group import world_comm
from ..layouts.placement import Placement
from ..layouts.sbp import Broadcast, Split
from ..tensors.creation import zeros
from ..tensors.meta import agree
from ..tensors.tensor import Tensor
from .plan import Settings
from .report import format_grid, section_heading
from .runner import measure_interleaved

__all__ = ["format_meta_check", "run_meta_check"]

_S0, _B = Split(0), Broadcast()
ELEMENTS = (8, 1 << 16)  # float32 elements per rank


def _groups(n: int) -> list[tuple[str, str, str, Callable[[], Any], Callable[[], Any]]]:
    """(case, checked side, alternative, checked call, alternative call) for ``n`` elements."""
    p = Placement.all("cpu")
    local = zeros(n)
    whole = (n * world_comm.size,)
    g = local.to_global(p, _S0)

    def debug_checked() -> Tensor:
        agree("to_global", p, (_B,), numpy.float32, whole, target=f"{p!r} (S(0))")
        return g.to_global(sbp=_B)

    return [
        (f"local->global S(0), {n} floats/rank", "check_meta=True (default)",
         "check_meta=False, shape=", lambda: local.to_global(p, _S0),
         lambda: local.to_global(p, _S0, check_meta=False, shape=whole)),
        (f"global S(0)->B, {n} floats/rank", "with the MPIFLOW_DEBUG=1 check",
         "default (unchecked)", debug_checked, lambda: g.to_global(sbp=_B)),
    ]


def run_meta_check(settings: Settings) -> dict[str, Any]:
    """Time each case with and without the check (collective).

    Returns:
        ``ranks``, ``rounds`` and ``rows``: per case its sides, the best round of each in
        microseconds (slowest rank) and their ratio (checked / alternative).
    """
    cases = [c for n in ELEMENTS for c in _groups(n)]
    iters = [max(1, settings.iters // (10 if i < 2 else 50)) for i in range(len(cases))]
    timer = world_comm.mpi_comm.Dup()
    try:
        times = measure_interleaved([[c[3], c[4]] for c in cases], iters,
                                    [max(1, settings.warmup // 10)] * len(cases),
                                    settings.rounds, timer)
    finally:
        timer.Free()
    rows = []
    for (case, checked, other, _, _), t in zip(cases, times):
        best = t.min(axis=0) * 1e6
        rows.append({"case": case, "checked": checked, "alternative": other,
                     "checked_us": float(best[0]), "alternative_us": float(best[1]),
                     "ratio": float(best[0] / best[1])})
    return {"ranks": world_comm.size, "rounds": settings.rounds, "rows": rows}


def format_meta_check(result: Mapping[str, Any], markdown: bool = False) -> str:
    """The table of a :func:`run_meta_check` result."""
    head = section_heading("to_global_check", [
        f"to_global with and without the ranks' agreement check on {result['ranks']} rank(s); "
        f"best of {result['rounds']} interleaved rounds, slowest rank"], markdown)
    cells = [[r["case"], r["checked"], f"{r['checked_us']:.1f}", r["alternative"],
              f"{r['alternative_us']:.1f}", f"{r['ratio']:.2f}"] for r in result["rows"]]
    grid = format_grid(["case", "checked", "us", "alternative", "us", "ratio"], cells,
                       [False, False, True, False, True, True], markdown)
    return "\n".join([*head, *grid])
