"""Sample inputs of the FFT ops (merged into :data:`mpiflow.ops.samples.SAMPLES`).

Sizes are uneven and one is prime (5 and 7 rows: 2, 3 and 4 ranks get uneven and empty shards,
and a 1-D transform of 7 runs Bluestein's algorithm); the signal sizes pad or cut some dims.
Each sample's ``moves`` (the collective signatures) are the ones the public functions choose
for an input split along a transformed dim on the sweep's mesh.

Examples:
    >>> sorted(SAMPLES)
    ['fft_c2c', 'fft_c2r', 'fft_r2c']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy

if TYPE_CHECKING:
    from .samples import Sample

__all__ = ["SAMPLES"]

Mesh = tuple[int, ...]
Shape = tuple[int, ...]


# (imported at the call: :mod:`.samples` imports this module at its end, to merge the table)
def _sample(*args: Any, **kwargs: Any) -> Sample:
    from .samples import Sample

    return Sample(*args, **kwargs)


def _values(shape: Shape, dtype: numpy.dtype, seed: int) -> numpy.ndarray:
    from .samples import sample_values

    return sample_values(shape, dtype, seed)


def _attrs(kind: str, shape: Shape, dims: Shape, sizes: Shape, split: int, mesh: Mesh,
           **extra: Any) -> dict[str, Any]:
    """The attributes the public function passes for an input split along ``split``."""
    from ..layouts.sbp import Split
    from .spectral import plan_moves

    moves = plan_moves(shape, (Split(split),), mesh[:1], kind, dims, sizes)
    return {"dims": dims, "sizes": sizes, "source": shape, "moves": moves, **extra}


def _c2c(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 7), dtype, 1)
    return [
        _sample((x,), _attrs("c2c", (5, 7), (0, 1), (5, 7), 0, mesh, norm="backward",
                             forward=True, real=False)),
        _sample((x,), _attrs("c2c", (5, 7), (1,), (6,), 1, mesh, norm="ortho",
                             forward=False, real=False)),
        _sample((x,), _attrs("c2c", (5, 7), (1, 0), (8, 4), 1, mesh, norm="forward",
                             forward=True, real=False)),
        _sample((_values((7,), dtype, 2),),
                _attrs("c2c", (7,), (0,), (7,), 0, mesh, norm="backward", forward=True,
                       real=False)),
        _sample((_values((6,), dtype, 3),),
                _attrs("c2c", (6,), (0,), (4,), 0, mesh, norm="ortho", forward=False,
                       real=dtype.kind != "c")),
    ]


def _r2c(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 6), dtype, 4)
    return [
        _sample((x,), _attrs("r2c", (5, 6), (0, 1), (5, 6), 0, mesh, norm="backward",
                             forward=True)),
        _sample((x,), _attrs("r2c", (5, 6), (0, 1), (5, 7), 1, mesh, norm="ortho",
                             forward=False)),
        _sample((_values((7,), dtype, 5),),
                _attrs("r2c", (7,), (0,), (8,), 0, mesh, norm="forward", forward=True)),
    ]


def _c2r(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 4), dtype, 6)
    return [
        _sample((x,), _attrs("c2r", (5, 4), (0, 1), (5, 6), 1, mesh, norm="backward",
                             forward=False)),
        _sample((x,), _attrs("c2r", (5, 4), (0, 1), (5, 7), 0, mesh, norm="ortho",
                             forward=True)),
        _sample((_values((4,), dtype, 7),),
                _attrs("c2r", (4,), (0,), (6,), 0, mesh, norm="backward", forward=False)),
    ]


Generator = Callable[[numpy.dtype, Mesh], "list[Sample]"]

#: op name -> (the input dtypes it accepts, its sample generator).
SAMPLES: dict[str, tuple[tuple[str, ...], Generator]] = {
    "fft_c2c": (("complex128", "complex64", "float64"), _c2c),
    "fft_r2c": (("float64", "float32"), _r2c),
    "fft_c2r": (("complex128", "complex64", "float64"), _c2r),
}
