"""``Embedding``: a lookup table of vectors.

Examples:
    >>> import mpiflow.nn as nn
    >>> nn.Embedding(10, 3)(flow.tensor([[1, 2], [4, 1]])).shape
    mpiflow.Size([2, 2, 3])
"""

from __future__ import annotations

from typing import Any

from ...autograd import no_grad
from ...tensors.creation import empty
from ...tensors.tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module
from .parameter import Parameter

__all__ = ["Embedding"]


class Embedding(Module):
    """Row ``i`` of ``weight`` for each index ``i`` of the input (``weight[input]``).

    Args:
        num_embeddings: the number of rows.
        embedding_dim: the size of each row.
        padding_idx: this row starts at zeros and gets no gradient.
        device: of the weight.
        dtype: of the weight.

    The weight is drawn from ``N(0, 1)``; backward adds the gradients of repeated indices.

    Examples:
        >>> nn.Embedding(10, 3, padding_idx=0)
        Embedding(10, 3, padding_idx=0)
    """

    weight: Parameter

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None, _weight: Tensor | None = None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype,
                                          device=device))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError("Shape of weight does not match num_embeddings and "
                                 "embedding_dim")
            self.weight = Parameter(_weight)

    def reset_parameters(self) -> None:
        """Draw the weight from ``N(0, 1)``; zero the padding row."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        return text if self.padding_idx is None else text + f", padding_idx={self.padding_idx}"

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None) -> Embedding:
        """An embedding whose weight is (a view of) ``embeddings``; ``freeze``: no training.

        Examples:
            >>> nn.Embedding.from_pretrained(flow.ones(4, 2)).weight.requires_grad
            False
        """
        if embeddings.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        layer = cls(rows, cols, padding_idx=padding_idx, _weight=embeddings)
        layer.weight.requires_grad = not freeze
        return layer
