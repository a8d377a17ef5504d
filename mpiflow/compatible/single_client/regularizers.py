"""``flow.regularizers``: penalties on variables, added to a train job's loss.

Examples:
    >>> l2(0.5)
    Regularizer(l1=0.0, l2=0.5)
"""

from .variables import Regularizer, l1, l1_l2, l2

__all__ = ["Regularizer", "l1", "l1_l2", "l2"]
