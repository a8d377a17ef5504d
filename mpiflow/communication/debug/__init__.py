"""Debugging aids: ``count_collectives`` (``counting``) and debug mode's argument checks
(``mode``, ``MPIFLOW_DEBUG=1``), which raise ``CollectiveMismatchError`` on every rank, and
the sampled checks on by default (``sampled``, ``MPIFLOW_CHECK``).
"""

from .counting import count_collectives
from .mode import CollectiveMismatchError
from .sampled import check_mode

__all__ = ["CollectiveMismatchError", "check_mode", "count_collectives"]
