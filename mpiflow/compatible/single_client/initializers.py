"""Initializers of variables (``flow.truncated_normal(0.1)``, ...), drawn by numpy.

Every rank draws the same values: the generator is seeded by the variable's name (and the
seed, when given), so a variable is the same at any rank count and layout.

Examples:
    >>> init = truncated_normal(0.1)
    >>> bool(abs(init.draw((100,), "float32", "w")).max() <= 0.2)
    True
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy

__all__ = [
    "Initializer", "constant_initializer", "glorot_normal_initializer",
    "glorot_uniform_initializer", "kaiming_initializer", "ones_initializer",
    "random_normal_initializer", "random_uniform_initializer", "truncated_normal",
    "truncated_normal_initializer", "variance_scaling_initializer", "xavier_normal_initializer",
    "xavier_uniform_initializer", "zeros_initializer",
]


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """OneFlow's (and PyTorch's) fans of an ``(out, in, *kernel)`` weight."""
    if len(shape) < 2:
        return (shape[0] if shape else 1), (shape[0] if shape else 1)
    field = math.prod(shape[2:])
    return shape[1] * field, shape[0] * field


@dataclass(frozen=True)
class Initializer:
    """How to fill a new variable: ``kind`` and its parameters."""

    kind: str
    a: float = 0.0
    b: float = 1.0
    seed: int | None = None
    mode: str = "fan_in"
    distribution: str = "uniform"

    def draw(self, shape: tuple[int, ...], dtype: Any, name: str) -> numpy.ndarray:
        """The variable's values, the same on every rank (seeded by ``name``)."""
        rng = numpy.random.default_rng([zlib.crc32(name.encode()), self.seed or 0])
        kind = self.kind
        if kind == "constant":
            out = numpy.full(shape, self.a)
        elif kind == "uniform":
            out = rng.uniform(self.a, self.b, size=shape)
        elif kind == "normal":
            out = rng.normal(self.a, self.b, size=shape)
        elif kind == "truncated_normal":  # redraw beyond two standard deviations
            out = rng.normal(self.a, self.b, size=shape)
            bad = numpy.abs(out - self.a) > 2 * self.b
            while bad.any():
                out[bad] = rng.normal(self.a, self.b, size=int(bad.sum()))
                bad = numpy.abs(out - self.a) > 2 * self.b
        else:  # variance scaling: scale / fan, uniform or normal
            fan_in, fan_out = _fans(shape)
            fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[
                self.mode]
            var = self.a / max(fan, 1)
            if self.distribution == "uniform":
                limit = math.sqrt(3 * var)
                out = rng.uniform(-limit, limit, size=shape)
            else:
                out = rng.normal(0.0, math.sqrt(var), size=shape)
        return numpy.asarray(out).astype(dtype)


def constant_initializer(value: float = 0.0, dtype: Any = None) -> Initializer:
    """Every element ``value``."""
    return Initializer("constant", float(value))


def zeros_initializer(dtype: Any = None) -> Initializer:
    """Zeros."""
    return Initializer("constant", 0.0)


def ones_initializer(dtype: Any = None) -> Initializer:
    """Ones."""
    return Initializer("constant", 1.0)


def random_uniform_initializer(minval: float = 0.0, maxval: float = 1.0, dtype: Any = None
                               ) -> Initializer:
    """Uniform in ``[minval, maxval)``."""
    return Initializer("uniform", float(minval), float(maxval))


def random_normal_initializer(mean: float = 0.0, stddev: float = 1.0, seed: int | None = None,
                              dtype: Any = None) -> Initializer:
    """Normal with ``mean`` and ``stddev``."""
    return Initializer("normal", float(mean), float(stddev), seed)


def truncated_normal_initializer(mean: float = 0.0, stddev: float = 1.0) -> Initializer:
    """Normal with ``mean`` and ``stddev``, redrawn beyond two standard deviations."""
    return Initializer("truncated_normal", float(mean), float(stddev))


def truncated_normal(stddev: float = 1.0) -> Initializer:
    """``truncated_normal_initializer(0, stddev)`` (OneFlow's short form)."""
    return truncated_normal_initializer(0.0, stddev)


def variance_scaling_initializer(scale: float = 1.0, mode: str = "fan_in",
                                 distribution: str = "truncated_normal",
                                 data_format: str = "") -> Initializer:
    """Variance ``scale / fan`` (``fan_in``, ``fan_out`` or ``fan_avg``), uniform or normal.

    Raises:
        ValueError: an unknown mode or distribution.
    """
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"mode must be fan_in, fan_out or fan_avg, got {mode!r}")
    if distribution not in ("uniform", "truncated_normal", "random_normal"):
        raise ValueError(f"distribution must be uniform, truncated_normal or random_normal, got "
                         f"{distribution!r}")
    return Initializer("scaling", float(scale), mode=mode,
                       distribution="uniform" if distribution == "uniform" else "normal")


def glorot_uniform_initializer(data_format: str = "") -> Initializer:
    """Uniform with variance ``1 / fan_avg`` (Glorot, Xavier)."""
    return variance_scaling_initializer(1.0, "fan_avg", "uniform")


def glorot_normal_initializer(data_format: str = "") -> Initializer:
    """Normal with variance ``1 / fan_avg``."""
    return variance_scaling_initializer(1.0, "fan_avg", "random_normal")


xavier_uniform_initializer = glorot_uniform_initializer
xavier_normal_initializer = glorot_normal_initializer


def kaiming_initializer(shape: Any = None, distribution: str = "random_normal",
                        mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                        negative_slope: float = 0.0, data_format: str = "") -> Initializer:
    """He's initialization: variance ``gain**2 / fan`` (gain of ReLU or leaky ReLU)."""
    gain2 = 2.0 / (1 + negative_slope ** 2) if nonlinearity in ("relu", "leaky_relu") else 1.0
    return variance_scaling_initializer(gain2, mode, distribution)
