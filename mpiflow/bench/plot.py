"""``--plot out.png``: bandwidth against message size, mpiflow beside raw mpi4py.

One log-log subplot per operation measured in the run: every OSU case (algbw, the size by the
nccl-tests convention) and every redistribution conversion (the tensor's bytes over the time;
even shapes as lines, uneven ones as single markers). matplotlib is imported only when a plot
is written (``pip install matplotlib``); :func:`bandwidth_series` and
:func:`series_from_json` are pure.

A run's ``--json`` file can be drawn again without running anything:
``python -m mpiflow.bench.plot results.json out.png``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..core.extras import install_hint
from .metrics import Row

__all__ = ["Series", "bandwidth_series", "have_matplotlib", "main", "series_from_json",
           "write_plot"]


class Series(NamedTuple):
    """One subplot's data.

    Attributes:
        title: the operation.
        sizes: message sizes in bytes, ascending.
        mpiflow: mpiflow's bandwidth at each size, GB/s.
        raw: raw mpi4py's bandwidth at each size, GB/s.
        extra: further points ``(label, size, mpiflow GB/s, raw GB/s)`` (uneven shapes).
    """

    title: str
    sizes: tuple[int, ...]
    mpiflow: tuple[float, ...]
    raw: tuple[float, ...]
    extra: tuple[tuple[str, int, float, float], ...] = ()


def bandwidth_series(results: Mapping[str, Sequence[Row]], redistribution: Sequence[Any] = ()
                     ) -> list[Series]:
    """The subplots of a run: each OSU case's rows, then each redistribution conversion.

    Args:
        results: the OSU rows by case name.
        redistribution: :class:`.redistribution.RedistRow` results.

    Returns:
        The series, OSU cases first (run order), then conversions (first-seen order).
    """
    series = []
    for op, rows in results.items():
        if rows:
            ordered = sorted(rows, key=lambda r: r.nbytes)
            series.append(Series(op, tuple(r.nbytes for r in ordered),
                                 tuple(r.algbw("mpiflow") for r in ordered),
                                 tuple(r.algbw("raw") for r in ordered)))
    names = list(dict.fromkeys(r.conversion for r in redistribution))
    for name in names:
        even = sorted((r for r in redistribution if r.conversion == name and r.even),
                      key=lambda r: r.nbytes)
        uneven = [r for r in redistribution if r.conversion == name and not r.even]
        series.append(Series(f"to_global {name}", tuple(r.nbytes for r in even),
                             tuple(r.gbps("mpiflow") for r in even),
                             tuple(r.gbps("raw") for r in even),
                             tuple((f"{r.shape[0]}x{r.shape[1]}", r.nbytes, r.gbps("mpiflow"),
                                    r.gbps("raw")) for r in uneven)))
    return series


def series_from_json(data: Mapping[str, Any]) -> list[Series]:
    """The same subplots as :func:`bandwidth_series`, from a ``--json`` file's data."""
    series = []
    for op, rows in data.get("results", {}).items():
        if rows:
            ordered = sorted(rows, key=lambda r: r["nbytes"])
            series.append(Series(op, tuple(r["nbytes"] for r in ordered),
                                 tuple(r["mpiflow"]["algbw_GBps"] for r in ordered),
                                 tuple(r["raw"]["algbw_GBps"] for r in ordered)))
    redistribution = data.get("suites", {}).get("redistribution", [])
    for name in dict.fromkeys(r["conversion"] for r in redistribution):
        even = sorted((r for r in redistribution if r["conversion"] == name and r["even"]),
                      key=lambda r: r["bytes"])
        uneven = [r for r in redistribution if r["conversion"] == name and not r["even"]]
        series.append(Series(f"to_global {name}", tuple(r["bytes"] for r in even),
                             tuple(r["GBps"]["mpiflow"] for r in even),
                             tuple(r["GBps"]["raw"] for r in even),
                             tuple(("x".join(map(str, r["shape"])), r["bytes"],
                                    r["GBps"]["mpiflow"], r["GBps"]["raw"]) for r in uneven)))
    return series


def plot_title(meta: Mapping[str, Any]) -> str:
    return f"mpiflow vs raw mpi4py, {meta.get('ranks', '?')} rank(s), {meta.get('mpi_library', '')}"


def have_matplotlib() -> bool:
    """Whether matplotlib can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def write_plot(path: str, series: Sequence[Series], title: str = "", dpi: int = 80) -> None:
    """Draw the series, one log-log subplot each, into a PNG at ``path`` (not collective).

    Raises:
        ValueError: no series to draw.
        ImportError: matplotlib is not installed (the message says how to get it).
    """
    if not series:
        raise ValueError("nothing to plot: the run measured no operation with sizes")
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    except ImportError as exc:
        raise ImportError(
            f"--plot needs matplotlib: {install_hint('examples', 'matplotlib')}") from exc
    from .plan import format_bytes

    size_label = FuncFormatter(lambda x, _: format_bytes(int(x)).replace(" ", "") if x >= 1
                               else "")
    cols = min(3, len(series))
    rows = math.ceil(len(series) / cols)
    fig = Figure(figsize=(4.2 * cols, 3.0 * rows + (0.4 if title else 0)), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[len(series):]:
        ax.set_visible(False)
    for ax, s in zip(axes.flat, series, strict=False):
        ax.plot(s.sizes, s.mpiflow, "o-", color="tab:blue", markersize=3, label="mpiflow")
        ax.plot(s.sizes, s.raw, "s--", color="tab:orange", markersize=3, label="raw mpi4py")
        for k, (_, size, flow, raw) in enumerate(s.extra):
            ax.plot([size], [flow], "o", color="tab:blue", markerfacecolor="none",
                    label="uneven shape" if k == 0 else None)
            ax.plot([size], [raw], "s", color="tab:orange", markerfacecolor="none")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(LogLocator(base=16))
        ax.xaxis.set_minor_locator(LogLocator(base=2))
        ax.xaxis.set_major_formatter(size_label)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_yscale("log")
        values = [v for v in (*s.mpiflow, *s.raw, *(e[2] for e in s.extra),
                              *(e[3] for e in s.extra)) if v > 0]
        narrow = bool(values) and max(values) < 30 * min(values)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=_FINE if narrow else (1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(s.title, fontsize=10)
        ax.set_xlabel("bytes", fontsize=8)
        ax.set_ylabel("GB/s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", alpha=0.3)
    for ax, s in zip(axes.flat, series, strict=False):
        if s is series[0] or s.extra:
            ax.legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title, fontsize=10)
    _save_small(fig, path, dpi)


_FINE = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mpiflow.bench.plot RESULTS.json OUT.png``: draw a run's JSON file again."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m mpiflow.bench.plot",
                                     description="Draw the bandwidth plot of a "
                                                 "`python -m mpiflow.bench --json` file.")
    parser.add_argument("results", help="the JSON file of a run")
    parser.add_argument("out", help="the PNG file to write")
    args = parser.parse_args(argv)
    with open(args.results, encoding="utf-8") as f:
        data = json.load(f)
    write_plot(args.out, series_from_json(data), plot_title(data.get("meta", {})))
    return 0


def _save_small(fig: Any, path: str, dpi: int) -> None:
    """Save as a PNG of at most 64 colours (a third of the bytes; Pillow comes with
    matplotlib), or as matplotlib writes it if Pillow cannot."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    try:
        from PIL import Image

        with Image.open(buffer) as image:
            image.convert("RGB").quantize(colors=64).save(path, format="PNG", optimize=True)
    except ImportError:  # pragma: no cover - Pillow is a dependency of matplotlib
        with open(path, "wb") as f:
            f.write(buffer.getvalue())


if __name__ == "__main__":
    import sys

    sys.exit(main())
