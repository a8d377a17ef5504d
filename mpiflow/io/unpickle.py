"""Reading a checkpoint's ``objects.pkl`` without running its code: a restricted unpickler.

Unpickling calls whatever functions the pickle names, so a checkpoint from elsewhere could
run any code on every rank. By default (``weights_only=True``, as ``torch.load`` since
PyTorch 2.6) :func:`loads` only rebuilds what :func:`mpiflow.io.save` pickles for ordinary
state: JSON-less scalars (``nan``, complex numbers, bytes), sets, frozensets, ``OrderedDict``,
``slice``, ``range``, numpy scalars, dtypes and arrays of non-object dtypes. Any other class
or function named in the pickle is refused with an error naming it; ``weights_only=False``
opts in to plain :mod:`pickle` for checkpoints whose source you trust.

Examples:
    >>> import pickle
    >>> loads(pickle.dumps({1, 2}))
    {1, 2}
    >>> try:
    ...     loads(pickle.dumps(print))
    ... except pickle.UnpicklingError as exc:
    ...     print(str(exc).split(",")[0])
    objects.pkl names builtins.print
"""

from __future__ import annotations

import _compat_pickle
import io
import pickle
from typing import Any

__all__ = ["SAFE_GLOBALS", "loads"]

# (module, name) pairs a weights-only load may look up: constructors of data, none of which
# runs code it is given. numpy's private paths moved from numpy.core to numpy._core in 2.0.
SAFE_GLOBALS = frozenset(
    [("builtins", n) for n in ("complex", "set", "frozenset", "bytearray", "slice", "range")]
    + [("collections", "OrderedDict"), ("_codecs", "encode"), ("numpy", "dtype"),
       ("numpy", "ndarray")]
    + [(f"numpy.{core}.{module}", n)
       for core in ("core", "_core")
       for module, n in (("multiarray", "scalar"), ("multiarray", "_reconstruct"),
                         ("numeric", "_frombuffer"))])


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        # Python 2's names (protocols 0-2), checked as what pickle maps them to
        mapped = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        mapped = (_compat_pickle.IMPORT_MAPPING.get(mapped[0], mapped[0]), mapped[1])
        if mapped not in SAFE_GLOBALS:
            raise pickle.UnpicklingError(
                f"objects.pkl names {module}.{name}, which a weights_only load does not allow "
                "(pass weights_only=False to load a checkpoint whose source you trust)")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("objects.pkl uses persistent ids, which a weights_only "
                                     "load does not allow")


def loads(data: bytes, weights_only: bool = True) -> Any:
    """Unpickle ``data``, refusing anything but plain data unless ``weights_only`` is False.

    Args:
        data: the pickled bytes.
        weights_only: allow only the classes and functions in :data:`SAFE_GLOBALS`.

    Returns:
        The unpickled object.

    Raises:
        pickle.UnpicklingError: the pickle names a class or function that is not allowed.

    Examples:
        >>> import collections, pickle
        >>> loads(pickle.dumps(collections.OrderedDict(a=1j)))
        OrderedDict([('a', 1j)])
    """
    if not weights_only:
        return pickle.loads(data)
    return _Restricted(io.BytesIO(data)).load()
