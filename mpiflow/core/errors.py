"""mpiflow's own errors: a bad global-tensor argument (both a ``RuntimeError`` and a
``ValueError``), and a matrix the linear algebra cannot factor.

OneFlow raises ``RuntimeError`` for a bad placement, sbp, split axis or local shape in
``to_global``, and for operands on different placements; Python code catches a bad value with
``except ValueError``. :class:`GlobalTensorError` subclasses both, so code written either way
catches mpiflow's errors at those places.
"""

from __future__ import annotations

import numpy

__all__ = ["GlobalTensorError", "LinAlgError"]


class GlobalTensorError(RuntimeError, ValueError):
    """A global tensor, placement, sbp or redistribution that cannot be made as asked.

    Caught by ``except RuntimeError`` (OneFlow's programs) and ``except ValueError``.

    Examples:
        >>> issubclass(GlobalTensorError, RuntimeError), issubclass(GlobalTensorError, ValueError)
        (True, True)
        >>> try:
        ...     flow.sbp.split(-1)
        ... except RuntimeError as e:
        ...     print(e)
        split dim must be a non-negative int, got -1
    """


class LinAlgError(RuntimeError, numpy.linalg.LinAlgError):
    """A matrix a linear-algebra function cannot factor: singular, not positive-definite, or
    an iteration that did not converge (torch's ``torch.linalg.LinAlgError``).

    Raised on every rank alike (the ranks agree on a failure before raising). Caught by
    ``except RuntimeError`` (torch's programs) and ``except numpy.linalg.LinAlgError``.

    Examples:
        >>> issubclass(LinAlgError, RuntimeError), issubclass(LinAlgError, ValueError)
        (True, True)
    """
