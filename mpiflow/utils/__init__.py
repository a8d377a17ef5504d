"""Utilities, as ``torch.utils``: :mod:`mpiflow.utils.data` loads datasets in batches."""

from . import data

__all__ = ["data"]
