"""``flow.losses.add_loss``: a loss for the job's update (the older API's ``minimize``).

Examples:
    >>> import mpiflow.compatible.single_client as flow
    >>> flow.losses.add_loss  # doctest: +ELLIPSIS
    <function add_loss at ...>
"""

from __future__ import annotations

from ...tensors.tensor import Tensor
from .session import SESSION

__all__ = ["add_loss"]


def add_loss(loss: Tensor) -> None:
    """Add ``loss`` to the losses the train job minimizes (by ``function_config().train``'s
    update, or with those of ``optimizer.minimize``).

    Raises:
        RuntimeError: outside a train job.
    """
    call = SESSION.current_call("flow.losses.add_loss")
    if not call.train:
        raise RuntimeError("flow.losses.add_loss needs a job of type='train'")
    call.losses.append(loss)
