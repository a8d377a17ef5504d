"""Debugging aids: ``count_collectives`` (``counting``) and debug mode's argument checks
(``mode``, ``MPIFLOW_DEBUG=1``), which raise ``CollectiveMismatchError`` on every rank.
"""

from .counting import count_collectives
from .mode import CollectiveMismatchError

__all__ = ["CollectiveMismatchError", "count_collectives"]
