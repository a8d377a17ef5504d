"""The tensor layer: ``Tensor``, local and global, and what makes and converts one.

Modules: ``tensor`` (the class), ``size`` (``Size``), ``legacy`` (OneFlow's ``Tensor(...)``
forms), ``conversion`` (``to_global``/``to_local`` of a tensor), ``structures`` (of nested
structures), ``meta`` (ranks agreeing on a conversion), ``tape`` (grad mode and the autograd
tape that ops record on), ``creation`` (``zeros``, ``tensor``, ...) and ``random``
(counter-based random numbers). The public names are re-exported by :mod:`mpiflow`; this
package is named ``tensors`` because ``mpiflow.tensor`` is the creation function.
"""
