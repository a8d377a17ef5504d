"""How far two float results may lie apart when the same sums are added in another order.

A BLAS product ``a @ b`` sums ``k`` products per element, in an order the library's kernel picks:
it changes with the CPU (OpenBLAS picks its kernel at run time: Haswell, SkylakeX, Zen...), the
library's version, the operands' shapes and layouts, and the thread count. Two computations of
the same product by different calls (``g.T @ x`` against ``(x.T @ g).T``, one product of a
flattened batch against one per entry, a swapped product) are therefore equal only up to
rounding, and a test must not ask for their bits to agree. The same BLAS call on the same
operands (same shapes, layouts and threads) does give the same bits on one machine.

The bound used is the classical one for a sum of ``n`` terms in floating point (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1): whatever the order,
``|fl(sum) - sum| <= gamma(n) * sum(|terms|)`` with ``gamma(n) = n u / (1 - n u)`` and ``u``
the unit roundoff (``eps / 2``); for a dot product the products' own roundings are included.
Two computations in different orders thus lie within ``2 gamma(n) * sum(|terms|)`` of each
other; that is what :func:`assert_same_sums` checks, element by element, from the sizes and the
magnitudes of the terms (no tolerance picked by hand).

Examples:
    >>> import numpy
    >>> a = numpy.random.default_rng(0).standard_normal((8, 300), dtype=numpy.float32)
    >>> b = numpy.random.default_rng(1).standard_normal((300, 5), dtype=numpy.float32)
    >>> assert_same_sums((b.T @ a.T).T, a @ b, terms=abs(a) @ abs(b), length=300)
"""

from __future__ import annotations

from typing import Any

import numpy

__all__ = ["assert_same_sums", "gamma", "order_bound"]


def gamma(n: int, dtype: Any) -> float:
    """Higham's ``gamma(n) = n u / (1 - n u)`` for ``dtype``'s unit roundoff ``u``.

    Examples:
        >>> gamma(1, "float32") == 2.0 ** -24 / (1 - 2.0 ** -24)
        True
    """
    u = float(numpy.finfo(dtype).eps) / 2
    if n * u >= 1:
        raise ValueError(f"{n} terms: no rounding bound in {numpy.dtype(dtype)}")
    return n * u / (1 - n * u)


def order_bound(terms: Any, length: int, dtype: Any, computations: int = 2) -> numpy.ndarray:
    """The largest difference, element by element, between ``computations`` evaluations of
    sums of ``length`` terms in ``dtype`` (2: two orders; 1: one order against the exact sum).

    Args:
        terms: each element's sum of the terms' magnitudes (``abs(a) @ abs(b)`` for ``a @ b``).
        length: the number of terms in each sum (the contraction length; one more for an added
            bias).
        dtype: the dtype the sums are computed in.
        computations: 2 for two rounded results, 1 for a rounded result against an exact one.
    """
    return computations * gamma(length, dtype) * numpy.asarray(terms, dtype=numpy.float64)


def assert_same_sums(actual: Any, expected: Any, *, terms: Any, length: int,
                     dtype: Any = None, computations: int = 2) -> None:
    """Assert that ``actual`` and ``expected`` are the same sums up to the order of their
    additions (:func:`order_bound`); NaNs and infinities must match exactly.

    Args:
        actual, expected: the two results.
        terms: each element's sum of the magnitudes of its terms.
        length: the number of terms in each sum.
        dtype: the dtype they were computed in (default: ``actual``'s).
        computations: 2 when both sides are rounded sums, 1 when ``expected`` is exact.
    """
    actual, expected = numpy.asarray(actual), numpy.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    finite = numpy.isfinite(actual) & numpy.isfinite(expected)
    numpy.testing.assert_array_equal(actual[~finite], expected[~finite])
    bound = numpy.broadcast_to(order_bound(terms, length, dtype or actual.dtype, computations),
                               actual.shape)
    error = numpy.abs(actual.astype(numpy.float64) - expected.astype(numpy.float64))
    bad = finite & (error > bound)
    assert not bad.any(), (
        f"{int(bad.sum())} of {actual.size} elements differ by more than summation order "
        f"allows ({length} terms): worst {error[bad].max():.3g} against a bound of "
        f"{bound[bad][numpy.argmax(error[bad])]:.3g}")
