"""Reverse-mode automatic differentiation on local and global tensors.

Examples:
    >>> x = flow.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad.tolist()
    [2.0, 4.0]
"""

from .gradcheck import gradcheck
from .graph import (
    Node,
    backward,
    enable_grad,
    is_grad_enabled,
    no_grad,
    queue_callback,
    record,
    set_grad_enabled,
)

__all__ = ["Node", "backward", "enable_grad", "gradcheck", "is_grad_enabled", "no_grad",
           "queue_callback", "record", "set_grad_enabled"]
