"""The error of a received message whose size differs from the receive buffer's.

Kept apart from the communicators so that the fast paths (:mod:`.fast`) and the general path
(:mod:`.mpi`) raise the same error without importing each other.
"""

from __future__ import annotations

from typing import Any

import numpy

__all__ = ["MessageSizeError"]

Array = Any


class MessageSizeError(ValueError):
    """A received message's size differs from the receive buffer's; the message is consumed.

    Attributes:
        source: the sender's rank in the communicator, or None when unknown.
        expected: the receive buffer's size in bytes.
        received: the message's size in bytes, or None when larger than the buffer (MPI tells
            only that it did not fit).
    """

    def __init__(self, source: int | None, tag: int, buf: Array, received: int | None,
                 sender: str | None = None) -> None:
        self.source = None if source is None or source < 0 else int(source)
        self.tag, self.received, self.expected = tag, received, int(buf.nbytes)
        self._buf = (buf.size, buf.dtype)
        who = sender or ("a sender" if self.source is None else f"rank {self.source}")
        itemsize = buf.dtype.itemsize or 1
        if received is None:
            got = "a larger message (MPI_ERR_TRUNCATE; its data is lost)"
        elif received % itemsize == 0:
            got = f"{received // itemsize} elements ({received} bytes)"
        else:
            got = f"{received} bytes"
        super().__init__(
            f"recv from {who} (tag {tag}): expected {buf.size} elements of {buf.dtype} "
            f"({self.expected} bytes), received {got}; the sender and the receiver disagree "
            "on the message's shape or dtype")

    def with_sender(self, sender: str) -> MessageSizeError:
        """The same error, naming the sender as ``sender`` (its world rank, say)."""
        size, dtype = self._buf
        return MessageSizeError(self.source, self.tag, _Like(size, dtype), self.received, sender)


class _Like:
    """Size and dtype of a buffer, for :class:`MessageSizeError`."""

    def __init__(self, size: int, dtype: numpy.dtype) -> None:
        self.size, self.dtype, self.nbytes = size, dtype, size * dtype.itemsize
