"""``mpiflow.device``: OneFlow's and PyTorch's device object, for programs that pass one.

mpiflow names devices with strings ("cpu", "cuda"); every function that takes a ``device=``
also takes a :class:`device`, and a device compares equal to its string, so
``tensor.device == flow.device("cpu")`` holds whichever of the two ``tensor.device`` is. A
device without an index stands for this rank's device of its type: it equals one with any
index (``flow.device("cpu") == flow.device("cpu", 1)``), as a OneFlow program expects of its
rank's tensors.
"""

from __future__ import annotations

from typing import Any

from .errors import GlobalTensorError

__all__ = ["device"]

_TYPES = ("cpu", "cuda")


class device:
    """A device: its type ("cpu" or "cuda") and an optional index.

    Args:
        type: "cpu", "cuda", "cuda:1", or another device.
        index: the device index (not with an index in the string).

    Raises:
        ValueError: an unknown type or a malformed string.

    Examples:
        >>> d = flow.device("cpu")
        >>> d.type, d.index, str(d), d == "cpu"
        ('cpu', None, 'cpu', True)
    """

    __slots__ = ("index", "type")

    def __init__(self, type: Any, index: int | None = None) -> None:
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        text = str(type)
        kind, _, number = text.partition(":")
        if kind not in _TYPES:
            raise GlobalTensorError(f"Expected one of {', '.join(_TYPES)} device type at start "
                                    f"of device string: {text}")
        if number:
            if index is not None or not number.isdigit():
                raise ValueError(f"invalid device string {text!r}")
            index = int(number)
        self.type: str = kind
        self.index: int | None = None if index is None else int(index)

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else
                                                f", index={self.index}") + ")"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except ValueError:
                return False
        if not isinstance(other, device):
            return NotImplemented
        # No index means this rank's device of the type (mpiflow's tensors say "cpu"), which
        # OneFlow's programs compare with flow.device("cpu", rank).
        return self.type == other.type and (self.index is None or other.index is None
                                            or self.index == other.index)

    def __hash__(self) -> int:
        return hash(self.type)
