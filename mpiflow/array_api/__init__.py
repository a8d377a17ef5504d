"""The Python array API standard (2024.12) for mpiflow's tensors: ``x.__array_namespace__()``.

Array-API-aware libraries (SciPy, scikit-learn, array-api-extra) run on mpiflow's arrays
through this namespace unchanged. Its array type is mpiflow's :class:`~mpiflow.Tensor`, local
or global; where the standard and PyTorch disagree (type promotion with Python scalars, the
dtype of ``sum``, ``std(correction=)``, ``unique_*``, ``copy=``, the default float64), the
functions here follow the standard and the torch-named ``mpiflow.*`` ones follow PyTorch.

Creation functions make **distributed** arrays: by default on every rank of the world, split
along dim 0 (0-d arrays broadcast); ``device=`` takes a placement (or an array's ``.device``),
and :func:`default_layout` / :func:`set_default_layout` change the default
(:mod:`mpiflow.array_api.layout`). Functions on split arrays work where the data lies, never
gathering a whole array onto one rank or every rank.

The one difference from the standard's array object: ``x.size`` is PyTorch's method
(``x.size()``), not the element count; use ``math.prod(x.shape)``.

Examples:
    >>> from mpiflow import array_api as xp
    >>> x = xp.linspace(0.0, 1.0, 5)
    >>> float(xp.sum(x)), x.__array_namespace__() is xp
    (2.5, True)
"""

import math as _math

from . import fft, linalg
from .array_object import *  # noqa: F403
from .creation import *  # noqa: F403
from .creation import __all__ as _creation_all
from .data_types import *  # noqa: F403
from .data_types import __all__ as _data_types_all
from .elementwise import *  # noqa: F403
from .elementwise import __all__ as _elementwise_all
from .info import __array_namespace_info__
from .layout import default_layout, get_default_layout, set_default_layout
from .linear_algebra import *  # noqa: F403
from .linear_algebra import __all__ as _linear_algebra_all
from .manipulation import *  # noqa: F403
from .manipulation import __all__ as _manipulation_all
from .searching import *  # noqa: F403
from .searching import __all__ as _searching_all
from .sets import *  # noqa: F403
from .sets import __all__ as _sets_all
from .statistical import *  # noqa: F403
from .statistical import __all__ as _statistical_all

__array_api_version__ = "2024.12"

e = _math.e
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None

__all__ = ["__array_api_version__", "__array_namespace_info__", "default_layout", "e", "fft",
           "get_default_layout", "inf", "linalg", "nan", "newaxis", "pi", "set_default_layout",
           *_creation_all, *_data_types_all, *_elementwise_all, *_linear_algebra_all,
           *_manipulation_all, *_searching_all, *_sets_all, *_statistical_all]
