"""``__array_namespace_info__()``: what this namespace supports, its devices and dtypes.

Examples:
    >>> from mpiflow import array_api as xp
    >>> info = xp.__array_namespace_info__()
    >>> info.default_dtypes()["real floating"], info.capabilities()["boolean indexing"]
    (mpiflow.float64, True)
"""

from __future__ import annotations

from typing import Any

from .. import cuda
from .. import dtypes as _dt
from .common import DEFAULT_COMPLEX, DEFAULT_FLOAT, DEFAULT_INT
from .data_types import DTYPES, isdtype

__all__ = ["Info", "__array_namespace_info__"]

_KINDS = ("bool", "signed integer", "unsigned integer", "integral", "real floating",
          "complex floating", "numeric")


class Info:
    """The standard's inspection namespace for mpiflow's array API."""

    def capabilities(self) -> dict[str, Any]:
        """Boolean indexing and data-dependent shapes are supported, dimensions unbounded."""
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": None}

    def default_device(self) -> str:
        """"cpu": arrays on the default placement's host memory."""
        return "cpu"

    def devices(self) -> list[str]:
        """"cpu", and "cuda" where CuPy and a GPU are there (each with the default placement;
        ``device=`` also takes a placement or an array's ``.device``)."""
        return ["cpu", "cuda"] if cuda.is_available() else ["cpu"]

    def default_dtypes(self, *, device: Any = None) -> dict[str, _dt.DType]:
        """float64, complex128, int64 (and int64 for indexing)."""
        return {"real floating": DEFAULT_FLOAT, "complex floating": DEFAULT_COMPLEX,
                "integral": DEFAULT_INT, "indexing": DEFAULT_INT}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, _dt.DType]:
        """The dtypes of ``kind`` (a kind's name or a tuple of them; all by default), by
        name."""
        if kind is not None:
            for k in kind if isinstance(kind, tuple) else (kind,):
                if k not in _KINDS:
                    raise ValueError(f"dtypes: unknown kind {k!r}")
        return {d.name: d for d in DTYPES if kind is None or isdtype(d, kind)}


_INFO = Info()


def __array_namespace_info__() -> Info:
    """The inspection namespace (one object, its methods the standard's)."""
    return _INFO
