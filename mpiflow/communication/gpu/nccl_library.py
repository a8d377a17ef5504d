"""The NCCL library as :class:`~.nccl.NCCLCommunicator` uses it: CuPy's, or a test's stand-in.

:class:`NcclBackend` names the few calls the communicator makes (a unique id, joining a
communicator, group start and end, dtype and op codes); :class:`CupyNccl` implements them over
``cupy.cuda.nccl``, which it imports only when made (so this module imports without CuPy).

Example:
    >>> from mpiflow.communication.gpu.nccl_library import NcclBackend
    >>> sorted(NcclBackend.__abstractmethods__)
    ['connect', 'dtype', 'group_end', 'group_start', 'op', 'unique_id']
"""

from __future__ import annotations

import abc
import importlib
import warnings
from typing import Any, ClassVar

from .transport import NCCL_INSTALL_HINT

__all__ = ["CupyNccl", "NcclBackend"]


class NcclBackend(abc.ABC):
    """What :class:`NCCLCommunicator` needs from an NCCL library (CuPy's, or a test's).

    Communicators returned by :meth:`connect` have CuPy's ``NcclCommunicator`` methods:
    ``allReduce``, ``reduce``, ``broadcast``, ``bcast``, ``reduceScatter``, ``allGather``,
    ``send``, ``recv``, taking device pointers, element counts and a stream handle.
    """

    has_avg: bool = False

    @abc.abstractmethod
    def unique_id(self) -> tuple[int, ...]:
        """A new NCCL unique id (its 128 bytes as ints, signed or not)."""

    @abc.abstractmethod
    def connect(self, nranks: int, uid: tuple[int, ...], rank: int, bootstrap: Any,
                members: tuple[int, ...] | None) -> Any:
        """Join the NCCL communicator ``uid`` of ``nranks`` ranks as ``rank``.

        Args:
            nranks, uid, rank: as ``ncclCommInitRank``.
            bootstrap: the mpi4py communicator the id came over (unused by real NCCL).
            members: the ranks of ``bootstrap`` joining (None: all of them).
        """

    @abc.abstractmethod
    def group_start(self) -> None:
        """``ncclGroupStart``."""

    @abc.abstractmethod
    def group_end(self) -> None:
        """``ncclGroupEnd``."""

    @abc.abstractmethod
    def dtype(self, name: str) -> int:
        """The NCCL datatype of a numpy dtype name (``"float32"``)."""

    @abc.abstractmethod
    def op(self, name: str) -> int:
        """The NCCL reduction ``"sum"``, ``"prod"``, ``"min"``, ``"max"`` or ``"avg"``."""


class CupyNccl(NcclBackend):
    """:class:`NcclBackend` over ``cupy.cuda.nccl`` (imported here, lazily)."""

    _OPS: ClassVar[dict[str, str]] = {"sum": "NCCL_SUM", "prod": "NCCL_PROD",
                                      "min": "NCCL_MIN", "max": "NCCL_MAX", "avg": "NCCL_AVG"}

    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._nccl = importlib.import_module("cupy.cuda.nccl")
        if not getattr(self._nccl, "available", True):
            raise RuntimeError(f"CuPy was installed without NCCL ({NCCL_INSTALL_HINT})")
        try:
            version = int(self._nccl.get_version())
        except Exception:
            version = 0
        self.version = version
        self.has_avg = hasattr(self._nccl, "NCCL_AVG") and version >= 21000

    def unique_id(self) -> tuple[int, ...]:
        # CuPy 14 gives bytes (ints 0..255 here); older CuPy a tuple of C chars (-128..127 on
        # x86-64, 0..255 where char is unsigned). connect() takes either.
        return tuple(self._nccl.get_unique_id())

    def connect(self, nranks: int, uid: tuple[int, ...], rank: int, bootstrap: Any,
                members: tuple[int, ...] | None) -> Any:
        raw = bytes(v & 0xFF for v in uid)
        make = self._nccl.NcclCommunicator
        try:  # CuPy 14 and later: NcclCommunicator(int ndev, bytes commId, int rank)
            return make(nranks, raw, rank)
        except TypeError:  # CuPy 13 and earlier: (int ndev, tuple commId, int rank)
            pass
        try:  # the tuple's items are C chars: signed on x86-64...
            return make(nranks, tuple(b - 256 if b > 127 else b for b in raw), rank)
        except OverflowError:  # ...and unsigned on ARM and POWER
            return make(nranks, tuple(raw), rank)

    def group_start(self) -> None:
        self._nccl.groupStart()

    def group_end(self) -> None:
        self._nccl.groupEnd()

    def dtype(self, name: str) -> int:
        return int(getattr(self._nccl, "NCCL_" + name.upper()))

    def op(self, name: str) -> int:
        return int(getattr(self._nccl, self._OPS[name]))
