"""The error of a bad global-tensor argument: both a ``RuntimeError`` and a ``ValueError``.

OneFlow raises ``RuntimeError`` for a bad placement, sbp, split axis or local shape in
``to_global``, and for operands on different placements; Python code catches a bad value with
``except ValueError``. :class:`GlobalTensorError` subclasses both, so code written either way
catches mpiflow's errors at those places.
"""

from __future__ import annotations

__all__ = ["GlobalTensorError"]


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
