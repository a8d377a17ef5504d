"""Stateless neural-network functions, as ``torch.nn.functional`` (local and global tensors).

Example:
    >>> import mpiflow.nn.functional as F
    >>> F.relu(flow.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

from ..ops import gelu, log_softmax, relu, sigmoid, softmax, tanh

__all__ = ["gelu", "log_softmax", "relu", "sigmoid", "softmax", "tanh"]
