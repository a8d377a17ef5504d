"""mpiflow's ops on local and global tensors: one definition each (kernel, shape, dtype and
layout rules side by side), exposed as functions and as Tensor methods."""

from ..tensors import (  # noqa: F401 - binds the conversions (to_global, ...) the ops rely on
    conversion as _layout,
)
from . import (
    methods,  # noqa: F401 - binds the operators and the pointwise methods
    slicing,  # noqa: F401 - the slice ops (getitem's, of split dims)
)
from .conv import conv2d
from .deterministic_sum import nansum, vdot
from .diagonals import diagonal, trace
from .distance import cdist
from .engine import OpDef, apply
from .gathers import *  # noqa: F403
from .gathers import __all__ as _gathers_all
from .histograms import *  # noqa: F403
from .histograms import __all__ as _histograms_all
from .indexing import *  # noqa: F403 - each module's __all__ is part of this package's API
from .indexing import __all__ as _indexing_all
from .join import *  # noqa: F403
from .join import __all__ as _join_all
from .linalg import *  # noqa: F403
from .linalg import __all__ as _linalg_all
from .moments import *  # noqa: F403
from .moments import __all__ as _moments_all
from .pointwise import *  # noqa: F403
from .pointwise import __all__ as _pointwise_all
from .pointwise_more import *  # noqa: F403
from .pointwise_more import __all__ as _pointwise_more_all
from .pooling import avg_pool2d, max_pool2d
from .quantiles import *  # noqa: F403
from .quantiles import __all__ as _quantiles_all
from .ranking import *  # noqa: F403
from .ranking import __all__ as _ranking_all
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
from .shifts import *  # noqa: F403
from .shifts import __all__ as _shifts_all
from .softmax import *  # noqa: F403
from .softmax import __all__ as _softmax_all
from .sorting import *  # noqa: F403
from .sorting import __all__ as _sorting_all

__all__ = ["OpDef", "apply", "nansum", "vdot", *_pointwise_all, *_pointwise_more_all,
           *_reduction_all, *_softmax_all,
           *_linalg_all, *_shape_all, *_join_all, *_scans_all, *_sorting_all,
           *_indexing_all, *_gathers_all, *_shifts_all, *_moments_all, *_selection_all,
           "cdist", "conv2d", "diagonal", "trace", "max_pool2d", "avg_pool2d", *_ranking_all,
           *_quantiles_all, *_sets_all, *_histograms_all, *_searching_all]
