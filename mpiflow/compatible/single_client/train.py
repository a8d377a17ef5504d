"""``flow.train``: ``CheckPoint``.

Examples:
    >>> import mpiflow.compatible.single_client as flow
    >>> flow.train.CheckPoint  # doctest: +ELLIPSIS
    <class '...CheckPoint'>
"""

from .checkpoint import CheckPoint

__all__ = ["CheckPoint"]
