"""Random tensors from a counter-based generator: the same logical value on every layout.

Every random number is a pure function of ``(seed, call counter, stream, i)``, where ``i`` is the
element's row-major flat index in the *logical* shape. A generator holds only a seed and a
counter; each random call takes the counter's value and advances it by one. Since all ranks make
the same calls (SPMD), their counters agree, and each rank computes just the elements of its own
shard, with no communication: a global ``randn`` on 4 ranks, split or broadcast, has the same
logical value as the local ``randn`` on 1 rank after the same seed and calls. Ranks differing
only along broadcast mesh axes hold equal data.

Local tensors of a generator never seeded differ between ranks, as in OneFlow (whose processes
start from different seeds): the call's seed is mixed with the rank's number. After
``manual_seed(s)`` on every rank they are equal. Global tensors are the same either way.

The hash is two rounds of the SplitMix64 finalizer: ``mix(mix(i * golden + k1) ^ k2)``, where
``(k1, k2)`` are scalar keys mixed from the seed, the counter and a stream constant. Distinct
streams give independent numbers within one call (the two uniforms of Box-Muller).

Examples:
    >>> import mpiflow as flow
    >>> _ = flow.manual_seed(0)
    >>> a = flow.rand(2, 3)
    >>> _ = flow.manual_seed(0)
    >>> bool((flow.rand(2, 3) == a).all())
    True
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy

from .. import dtypes as _dtypes
from ..core.array_module import array_module
from ..core.errors import GlobalTensorError
from ..layouts.placement import Placement
from ..layouts.sbp import Partial, SbpParallel
from ..layouts.shards import check_shape, shard_slices
from ..runtime import topology
from . import trace
from .creation import check_device, layout_of, size_of
from .tensor import Tensor, bind

__all__ = [
    "Generator",
    "default_generator",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "normal",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "randperm",
    "seed",
    "set_rng_state",
]

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # 2**64 / golden ratio, SplitMix64's increment
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # SplitMix64 finalizer multipliers
_SEED_SALT, _COUNTER_SALT, _KEY2_SALT = 0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0
_RANK_SALT = 0x452821E638D01377

# One stream per independent quantity drawn in one call (odd, arbitrary digits of e).
_UNIFORM = 0xB7E151628AED2A6B
_RADIUS = 0x8AED2A6ABF715880
_ANGLE = 0x9CF4F3C762E7160F
_PERMUTATION = 0x38B4DA56A784D905

DEFAULT_SEED = 67280421310721  # PyTorch's default seed


# -- the hash ---------------------------------------------------------------------------------
def _mix_int(z: int) -> int:
    """The SplitMix64 finalizer on a Python int (scalar keys)."""
    z &= _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def _mix(xp: Any, z: Any) -> Any:
    """The SplitMix64 finalizer, in place on a 1-D uint64 array (arithmetic wraps)."""
    z ^= z >> xp.uint64(30)
    z *= xp.uint64(_M1)
    z ^= z >> xp.uint64(27)
    z *= xp.uint64(_M2)
    z ^= z >> xp.uint64(31)
    return z


@dataclass(frozen=True)
class _Call:
    """One random call: the generator's seed and the counter value the call took."""

    seed: int
    counter: int

    def keys(self, stream: int) -> tuple[int, int]:
        base = _mix_int(_mix_int(self.seed + _SEED_SALT) + self.counter * _GOLDEN + _COUNTER_SALT)
        k1 = _mix_int(base ^ stream)
        return k1, _mix_int(k1 + _KEY2_SALT)

    def bits(self, xp: Any, index: Any, stream: int) -> Any:
        """64 random bits per element of ``index`` (1-D uint64 logical flat indices)."""
        k1, k2 = self.keys(stream)
        z = index * xp.uint64(_GOLDEN)
        z += xp.uint64(k1)
        _mix(xp, z)
        z ^= xp.uint64(k2)
        return _mix(xp, z)


def _flat_index(xp: Any, shape: tuple[int, ...], region: Sequence[slice]) -> Any:
    """The logical row-major flat indices of ``region``, 1-D, built from broadcast aranges."""
    ndim = len(shape)
    index = xp.zeros((1,) * ndim, dtype=xp.uint64)
    stride = 1
    for dim in reversed(range(ndim)):
        start, stop, _ = region[dim].indices(shape[dim])
        part = xp.arange(start, max(start, stop), dtype=xp.uint64) * xp.uint64(stride)
        index = index + part.reshape((-1,) + (1,) * (ndim - 1 - dim))
        stride *= shape[dim]
    return index.reshape(-1)


def _uniform(xp: Any, bits: Any, dtype: numpy.dtype) -> Any:
    """Uniform [0, 1) from the top bits: 53 for float64, 24 for float32, 11 for float16."""
    if dtype == numpy.float64:
        return (bits >> xp.uint64(11)).astype(xp.float64) * (2.0 ** -53)
    mantissa = 11 if dtype == numpy.float16 else 24
    u = (bits >> xp.uint64(64 - mantissa)).astype(xp.float32) * xp.float32(2.0 ** -mantissa)
    return u.astype(dtype, copy=False)


def _standard_normal(xp: Any, call: _Call, index: Any) -> Any:
    """Standard normals (float64) by Box-Muller on two counter-derived 53-bit uniforms."""
    u1 = _uniform(xp, call.bits(xp, index, _RADIUS), numpy.dtype(numpy.float64))
    u2 = _uniform(xp, call.bits(xp, index, _ANGLE), numpy.dtype(numpy.float64))
    return xp.sqrt(-2.0 * xp.log1p(-u1)) * xp.cos((2.0 * math.pi) * u2)


# -- generators -------------------------------------------------------------------------------
def _seed_value(seed: Any) -> int:
    if isinstance(seed, Tensor):
        seed = seed.item()
    if isinstance(seed, bool) or not isinstance(seed, (int, numpy.integer)):
        raise TypeError(f"a seed must be an int, got {seed!r}")
    value = int(seed)
    if not -(1 << 63) <= value <= _MASK:
        raise ValueError(f"a seed must fit in 64 bits (-2**63 .. 2**64-1), got {value}")
    return value & _MASK


class Generator:
    """A counter-based random generator: a seed and a call counter.

    Args:
        device: "cpu" or "cuda" (the numbers are the same on both).

    Examples:
        >>> g = flow.Generator().manual_seed(1)
        >>> flow.rand(3, generator=g).shape
        mpiflow.Size([3])
    """

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self._seed = DEFAULT_SEED
        self._counter = 0
        # Until seeded, local tensors differ between ranks (OneFlow's and PyTorch's programs
        # seed each process apart); global tensors never do.
        self._per_rank = True

    def manual_seed(self, seed: Any) -> Generator:
        """Set the seed and reset the call counter; returns this generator. From then on,
        local random tensors are the same on every rank that set the same seed."""
        self._seed = _seed_value(seed)
        self._counter = 0
        self._per_rank = False
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the seed.

        Collective over the world: rank 0 draws the seed and broadcasts it, so that every
        rank keeps generating the same logical values.
        """
        from ..communication.mpi.group import world_comm

        value = numpy.array([int.from_bytes(os.urandom(8), "little") >> 1], dtype=numpy.uint64)
        world_comm.broadcast(value, 0)
        self.manual_seed(int(value[0]))
        return self._seed

    def initial_seed(self) -> int:
        """The seed last set (as an unsigned 64-bit int)."""
        return self._seed

    def get_state(self) -> Tensor:
        """The state: a uint64 tensor ``[seed, counter]``."""
        return Tensor(numpy.array([self._seed, self._counter], dtype=numpy.uint64))

    def set_state(self, state: Any) -> Generator:
        """Restore a state from :meth:`get_state`; returns this generator."""
        value = numpy.asarray(state.numpy() if isinstance(state, Tensor) else state)
        if value.shape != (2,) or value.dtype.kind not in "iu":
            raise ValueError(f"a generator state is 2 integers [seed, counter], got {value!r}")
        seed, counter = (int(v) for v in value)
        if counter < 0:
            raise ValueError(f"a generator state's counter is non-negative, got {counter}")
        self._seed, self._counter = _seed_value(seed), counter
        return self

    def _advance(self, local: bool = False) -> _Call:
        """The next call's keys: for a ``local`` tensor of a generator never seeded, mixed
        with this rank's number, so that the ranks draw different values."""
        seed = self._seed
        if local and self._per_rank:
            seed = _mix_int(seed ^ _mix_int(topology.rank + _RANK_SALT))
        call = _Call(seed, self._counter)
        self._counter += 1
        return call

    def __repr__(self) -> str:
        return f"mpiflow.Generator(seed={self._seed}, counter={self._counter})"


default_generator = Generator()


def manual_seed(seed: Any) -> Generator:
    """Seed the default generator and reset its counter; returns it.

    Examples:
        >>> flow.manual_seed(42).initial_seed()
        42
    """
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator non-deterministically (collective); returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state, a uint64 tensor ``[seed, counter]``."""
    return default_generator.get_state()


def set_rng_state(new_state: Any) -> None:
    """Restore the default generator's state from :func:`get_rng_state`."""
    default_generator.set_state(new_state)


# -- drawing shards ---------------------------------------------------------------------------
Fill = Callable[[Any, _Call, Any], Any]  # (xp, call, flat indices) -> 1-D values


def _no_partial(sbp: Sequence[SbpParallel], what: str) -> None:
    if any(isinstance(s, Partial) for s in sbp):
        raise GlobalTensorError(f"{what} cannot make a tensor with a partial sbp "
                                f"({', '.join(map(str, sbp))}); use split or broadcast")


def _region(shape: tuple[int, ...], placement: Placement | None,
            sbp: tuple[SbpParallel, ...] | None, what: str) -> tuple[slice, ...] | None:
    """The part of the logical value this rank computes; None outside the placement."""
    if placement is None or sbp is None:
        return tuple(slice(0, n) for n in shape)
    _no_partial(sbp, what)
    check_shape(shape, sbp)
    coords = placement.coordinates(topology.rank)
    return None if coords is None else shard_slices(shape, placement.mesh_shape, sbp, coords)


def _generate(what: str, shape: tuple[int, ...], dtype: numpy.dtype, fill: Fill,
              generator: Generator | None, placement: Placement | None, sbp: Any,
              requires_grad: bool, device: Any) -> Tensor:
    layout = layout_of(placement, sbp)
    xp = check_device(placement, device)
    if requires_grad and dtype.kind not in "fc":
        raise RuntimeError(f"only floating point tensors can require gradients, not {dtype}")
    p, s = layout if layout is not None else (None, None)
    region = _region(shape, p, s, what)
    draw = _Draw(generator if generator is not None else default_generator, fill, xp, shape,
                 region, dtype, p is None)
    out = Tensor(draw(), p, s, shape, requires_grad=requires_grad)
    recorder = trace.state.recorder
    if recorder is not None:
        if requires_grad:
            recorder.mark_unreplayable(f"{what} makes a leaf that requires grad")
        # A replay draws again: the generator's next call, as the eager program's would be.
        recorder.kernel(draw, (), out)
    return out


class _Draw:
    """One random draw of a shard: advances the generator and fills the shard (a replayable
    step of a traced graph, which draws anew on each replay)."""

    __slots__ = ("dtype", "fill", "generator", "local", "region", "shape", "xp")

    def __init__(self, generator: Generator, fill: Fill, xp: Any, shape: tuple[int, ...],
                 region: tuple[slice, ...] | None, dtype: numpy.dtype, local: bool) -> None:
        self.generator, self.fill, self.xp = generator, fill, xp
        self.shape, self.region, self.dtype = shape, region, dtype
        self.local = local  # a local tensor: per-rank draws while the generator is unseeded

    def __call__(self) -> Any:
        call = self.generator._advance(self.local)
        region, xp = self.region, self.xp
        if region is None:
            return xp.empty((0,), dtype=self.dtype)
        local = self.fill(xp, call, _flat_index(xp, self.shape, region))
        local_shape = tuple(r.stop - r.start for r in region)
        return local.astype(self.dtype, copy=False).reshape(local_shape)


def _float_dtype(dtype: Any, what: str) -> numpy.dtype:
    dt = (_dtypes.as_dtype(dtype) if dtype is not None else _dtypes.default_float).numpy
    if dt.kind != "f":
        raise TypeError(f"{what} makes floating point tensors, not {dt}")
    return dt


def _uniform_fill(dtype: numpy.dtype, low: float = 0.0, high: float = 1.0) -> Fill:
    def fill(xp: Any, call: _Call, index: Any) -> Any:
        u = _uniform(xp, call.bits(xp, index, _UNIFORM), dtype)
        if (low, high) == (0.0, 1.0):
            return u
        out = (u.astype(xp.float64) * (high - low) + low).astype(dtype)
        if low < high:  # rounding must not reach `high`
            limit = numpy.nextafter(dtype.type(high), dtype.type(low))
            out = xp.minimum(out, limit.astype(dtype))
        return out

    return fill


def _normal_fill(mean: float, std: float) -> Fill:
    def fill(xp: Any, call: _Call, index: Any) -> Any:
        z = _standard_normal(xp, call, index)
        return z if (mean, std) == (0.0, 1.0) else z * std + mean

    return fill


def rand(*dims: Any, size: Any = None, dtype: Any = None, generator: Generator | None = None,
         placement: Placement | None = None, sbp: Any = None, requires_grad: bool = False,
         device: Any = None) -> Tensor:
    """Uniform numbers in [0, 1) of shape ``size``.

    Args:
        dims: the (logical) shape, as ints or one sequence.
        size: the shape as a keyword (OneFlow's and PyTorch's ``size=``), instead of ``dims``.
        dtype: a floating dtype (default float32).
        generator: the generator to draw from (default: the default generator).
        placement: make a global tensor; each rank computes only its shard. Partial
        sbp: make a global tensor; each rank computes only its shard. Partial
            layouts are not allowed.
        requires_grad: record operations for autograd.

    Returns:
        The tensor; its logical value does not depend on the placement or sbp.

    Examples:
        >>> x = flow.rand(2, 3)
        >>> bool(((x >= 0) & (x < 1)).all())
        True
    """
    dt = _float_dtype(dtype, "rand")
    return _generate("rand", size_of(dims, size), dt, _uniform_fill(dt), generator, placement, sbp,
                     requires_grad, device)


def randn(*dims: Any, size: Any = None, dtype: Any = None, generator: Generator | None = None,
          placement: Placement | None = None, sbp: Any = None, requires_grad: bool = False,
          device: Any = None) -> Tensor:
    """Standard normal numbers of shape ``size`` (arguments as :func:`rand`).

    Examples:
        >>> flow.randn(4, 5, dtype=flow.float64).dtype
        mpiflow.float64
    """
    dt = _float_dtype(dtype, "randn")
    return _generate("randn", size_of(dims, size), dt, _normal_fill(0.0, 1.0), generator, placement,
                     sbp, requires_grad, device)


def normal(mean: float, std: float, size: Sequence[int], *, dtype: Any = None,
           generator: Generator | None = None, placement: Placement | None = None,
           sbp: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """Normal numbers of mean ``mean`` and standard deviation ``std`` (numbers), of shape ``size``.

    Examples:
        >>> flow.normal(2.0, 0.5, (3,)).shape
        mpiflow.Size([3])
    """
    mean, std = _number(mean, "mean"), _number(std, "std")
    if std < 0:
        raise ValueError(f"normal needs std >= 0, got {std}")
    dt = _float_dtype(dtype, "normal")
    return _generate("normal", size_of((size,)), dt, _normal_fill(mean, std), generator,
                     placement, sbp, requires_grad, device)


def _number(value: Any, name: str) -> float:
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise TypeError(f"{name} must be a number (only the scalar form is supported), got "
                            f"a tensor of shape {tuple(value.shape)}")
        value = value.item()
    return float(value)


def _int_bounds(low: Any, high: Any, dt: numpy.dtype) -> tuple[int, int]:
    low, high = int(low), int(high)
    if low >= high:
        raise ValueError(f"randint needs low < high, got low={low}, high={high}")
    if dt.kind in "iu":
        info = numpy.iinfo(dt)
        if low < int(info.min) or high - 1 > int(info.max):
            raise ValueError(f"[{low}, {high}) does not fit dtype {dt}")
    elif dt.kind == "b" and (low < 0 or high > 2):
        raise ValueError(f"[{low}, {high}) does not fit dtype bool")
    if high - low > 1 << 64:
        raise ValueError(f"randint's range [{low}, {high}) spans more than 2**64 values")
    return low, high


def _randint_fill(low: int, high: int) -> Fill:
    span = high - low

    def fill(xp: Any, call: _Call, index: Any) -> Any:
        bits = call.bits(xp, index, _UNIFORM)
        if span < 1 << 64:  # bias below span / 2**64
            bits %= xp.uint64(span)
        bits += xp.uint64(low & _MASK)  # wraps: exact in two's complement
        return bits.view(xp.int64) if low < 0 else bits

    return fill


def randint(low: Any = 0, high: Any = None, size: Any = None, *, dtype: Any = None,
            generator: Generator | None = None, placement: Placement | None = None,
            sbp: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """Integers uniform in ``[low, high)``: ``randint(high, size)`` or ``randint(low, high, size)``.

    Args:
        low: the bounds (``low`` defaults to 0).
        high: the bounds (``low`` defaults to 0).
        size: the shape (a sequence).
        dtype: the dtype (default int64; floating dtypes hold the integers as floats).
        generator: as :func:`rand`.
        placement: as :func:`rand`.
        sbp: as :func:`rand`.
        requires_grad: as :func:`rand`.

    Examples:
        >>> x = flow.randint(3, 7, (5,))
        >>> bool(((x >= 3) & (x < 7)).all()), x.dtype
        (True, mpiflow.int64)
    """
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint needs a size: randint(high, size) or randint(low, high, size)")
    dt = (_dtypes.as_dtype(dtype) if dtype is not None else _dtypes.int64).numpy
    lo, hi = _int_bounds(low, high, dt)
    return _generate("randint", size_of((size,)), dt, _randint_fill(lo, hi), generator,
                     placement, sbp, requires_grad, device)


def randperm(n: int, *, dtype: Any = None, generator: Generator | None = None,
             placement: Placement | None = None, sbp: Any = None, requires_grad: bool = False,
             device: Any = None) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype``).

    Every rank computes the same permutation (``n`` random keys, sorted) and keeps its shard.

    Examples:
        >>> sorted(flow.randperm(5).tolist())
        [0, 1, 2, 3, 4]
    """
    n = int(n)
    if n < 0:
        raise ValueError(f"randperm needs n >= 0, got {n}")
    dt = (_dtypes.as_dtype(dtype) if dtype is not None else _dtypes.int64).numpy

    def fill(xp: Any, call: _Call, index: Any) -> Any:
        keys = call.bits(xp, xp.arange(n, dtype=xp.uint64), _PERMUTATION)
        return xp.argsort(keys, kind="stable")[index.astype(xp.int64)]

    return _generate("randperm", (n,), dt, fill, generator, placement, sbp, requires_grad,
                     device)


# -- "like" forms -----------------------------------------------------------------------------
def _like(t: Tensor, dtype: Any, placement: Any, sbp: Any) -> dict[str, Any]:
    if placement is None and sbp is None and t.is_global:
        placement, sbp = t.placement, t.sbp
    return {"dtype": dtype if dtype is not None else t.dtype, "placement": placement, "sbp": sbp}


def rand_like(t: Tensor, *, dtype: Any = None, generator: Generator | None = None,
              placement: Any = None, sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """:func:`rand` with ``t``'s shape, dtype and layout."""
    return rand(tuple(t.shape), generator=generator, requires_grad=requires_grad,
                **_like(t, dtype, placement, sbp))


def randn_like(t: Tensor, *, dtype: Any = None, generator: Generator | None = None,
               placement: Any = None, sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """:func:`randn` with ``t``'s shape, dtype and layout."""
    return randn(tuple(t.shape), generator=generator, requires_grad=requires_grad,
                 **_like(t, dtype, placement, sbp))


def randint_like(t: Tensor, low: Any = 0, high: Any = None, *, dtype: Any = None,
                 generator: Generator | None = None, placement: Any = None, sbp: Any = None,
                 requires_grad: bool = False) -> Tensor:
    """:func:`randint` with ``t``'s shape, dtype and layout: ``randint_like(t, high)`` or
    ``randint_like(t, low, high)``."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(t.shape), generator=generator, requires_grad=requires_grad,
                   **_like(t, dtype, placement, sbp))


# -- in place ---------------------------------------------------------------------------------
def _fill_(t: Tensor, what: str, fill: Fill, generator: Generator | None) -> Tensor:
    """Overwrite ``t``'s shard with its region of a fresh random logical value."""
    if t.dtype.numpy.kind != "f":
        raise TypeError(f"{what} needs a floating point tensor, not {t.dtype!r}")
    shape = tuple(t.shape)
    region = _region(shape, t._placement, t._sbp, what)
    call = (generator if generator is not None else default_generator)._advance(
        t._placement is None)
    if trace.state.recorder is not None:
        trace.state.recorder.mark_unreplayable(f"{what} draws random numbers")
    if region is not None:
        xp = array_module(t._data)
        values = fill(xp, call, _flat_index(xp, shape, region))
        t._data[...] = values.astype(t._data.dtype, copy=False).reshape(t._data.shape)
    t._version += 1
    return t


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, *,
             generator: Generator | None = None) -> Tensor:
    """Fill ``t`` in place with numbers uniform in ``[a, b)``; returns ``t``.

    A global ``t`` gets, on each rank, its region of the logical value (partial layouts are
    not allowed).

    Examples:
        >>> x = flow.zeros(3).uniform_(2, 3)
        >>> bool(((x >= 2) & (x < 3)).all())
        True
    """
    a, b = _number(a, "a"), _number(b, "b")
    if a > b:
        raise ValueError(f"uniform_ needs a <= b, got a={a}, b={b}")
    return _fill_(t, "uniform_", _uniform_fill(t.dtype.numpy, a, b), generator)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, *,
            generator: Generator | None = None) -> Tensor:
    """Fill ``t`` in place with normal numbers; returns ``t`` (layouts as :func:`uniform_`).

    Examples:
        >>> flow.zeros(2, 2).normal_(0.0, 2.0).shape
        mpiflow.Size([2, 2])
    """
    mean, std = _number(mean, "mean"), _number(std, "std")
    if std < 0:
        raise ValueError(f"normal_ needs std >= 0, got {std}")
    return _fill_(t, "normal_", _normal_fill(mean, std), generator)


bind({"uniform_": uniform_, "normal_": normal_})
