"""mpiflow's ops on local and global tensors: one definition each (kernel, shape, dtype and
layout rules side by side), exposed as functions and as Tensor methods."""

from ..tensors import (  # noqa: F401 - binds the conversions (to_global, ...) the ops rely on
    conversion as _layout,
)
from . import methods  # noqa: F401 - binds the operators and the pointwise methods
from .conv import conv2d
from .deterministic_sum import nansum, vdot
from .engine import OpDef, apply
from .histograms import *  # noqa: F403
from .histograms import __all__ as _histograms_all
from .indexing import *  # noqa: F403 - each module's __all__ is part of this package's API
from .indexing import __all__ as _indexing_all
from .join import *  # noqa: F403
from .join import __all__ as _join_all
from .linalg import *  # noqa: F403
from .linalg import __all__ as _linalg_all
from .pointwise import *  # noqa: F403
from .pointwise import __all__ as _pointwise_all
from .pooling import avg_pool2d, max_pool2d
from .quantiles import *  # noqa: F403
from .quantiles import __all__ as _quantiles_all
from .reduction import *  # noqa: F403
from .reduction import __all__ as _reduction_all
from .scans import *  # noqa: F403
from .scans import __all__ as _scans_all
from .searching import *  # noqa: F403
from .searching import __all__ as _searching_all
from .selection import *  # noqa: F403
from .selection import __all__ as _selection_all
from .sets import *  # noqa: F403
from .sets import __all__ as _sets_all
from .shape import *  # noqa: F403
from .shape import __all__ as _shape_all
from .softmax import *  # noqa: F403
from .softmax import __all__ as _softmax_all
from .sorting import *  # noqa: F403
from .sorting import __all__ as _sorting_all

__all__ = ["OpDef", "apply", "nansum", "vdot", *_pointwise_all, *_reduction_all, *_softmax_all,
           *_linalg_all, *_shape_all, *_join_all, *_scans_all, *_sorting_all,
           *_indexing_all, "conv2d", "max_pool2d", "avg_pool2d", *_selection_all,
           *_quantiles_all, *_sets_all, *_histograms_all, *_searching_all]
