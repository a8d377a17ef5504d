"""mpiflow: MPI-native tensors with a consistent global view, collectives and training.

``import mpiflow`` initializes MPI, checks that the launcher matches the MPI library, and makes an
uncaught exception on any rank abort the whole job instead of leaving the others waiting.

Examples:
    >>> import mpiflow as flow
    >>> x = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> p = flow.placement("cpu", ranks=list(range(flow.env.get_world_size())))
    >>> g = x.to_global(p, flow.sbp.broadcast)       # the same value on every rank
    >>> (g * 2).sum().item()
    20.0
"""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # a `python -m` module is being found: only then can it be launch
    from .launch import main as _launch
    from .launch import started_as_launcher as _started_as_launcher

    if _started_as_launcher(_sys.argv, getattr(_sys, "orig_argv", ())):
        _sys.exit(_launch())  # before MPI starts: the launcher starts the job, not MPI

from .core import settings as _settings

# Every MPIFLOW_* variable is checked here, before mpiflow starts MPI: a malformed one stops every
# rank with the same error (they share the environment) before any rank can wait on another.
try:
    _settings.validate()
except _settings.SettingError as _error:
    # Another rank's environment may be valid, and that rank would wait for this one inside
    # MPI forever (the launchers do not end a job for a process that exits before or without
    # MPI_Finalize): end the whole job, starting MPI for that if it is not started yet.
    print(f"mpiflow: {type(_error).__name__}: {_error}", file=_sys.stderr, flush=True)
    from mpi4py import MPI as _MPI

    _MPI.COMM_WORLD.Abort(1)
    raise

from . import runtime as _runtime

_runtime.install_abort_handler()

from .communication import watchdog as _watchdog  # noqa: E402

_watchdog.start()  # collective: every rank imports mpiflow at the same point

from . import (  # noqa: E402
    array_api,  # noqa: F401 - flow.array_api; binds Tensor.__array_namespace__
    autograd,
    comm,
    distributed,
    env,
    fft,
    linalg,
    nn,
    ops,
    optim,
    random,  # noqa: F401 - flow.random, the public module
    sbp,
    utils,
)
from ._version import __version__  # noqa: E402
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402
from .communication import ReduceOp  # noqa: E402
from .communication.debug.mode import CollectiveMismatchError  # noqa: E402
from .core.buffers import register_buffer_type as _register_buffer_type  # noqa: E402
from .core.deterministic import (  # noqa: E402
    are_deterministic_algorithms_enabled,
    deterministic,
    use_deterministic_algorithms,
)
from .core.device import device  # noqa: E402
from .core.errors import GlobalTensorError  # noqa: E402
from .dtypes import (  # noqa: E402
    DType,
    bool,
    complex64,
    complex128,
    double,
    float,
    float16,
    float32,
    float64,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .io import load, save  # noqa: E402
from .ops import *  # noqa: E402, F403
from .ops import __all__ as _ops_all  # noqa: E402
from .placement import placement  # noqa: E402
from .tensors.creation import *  # noqa: E402, F403
from .tensors.creation import __all__ as _creation_all  # noqa: E402
from .tensors.random import *  # noqa: E402, F403
from .tensors.random import __all__ as _random_all  # noqa: E402
from .tensors.structures import to_global, to_local  # noqa: E402
from .tensors.tensor import Size, Tensor  # noqa: E402

_register_buffer_type(Tensor, lambda t: t._data)

dtype = DType

__all__ = [
    "CollectiveMismatchError", "DType", "GlobalTensorError", "ReduceOp", "Size", "Tensor",
    "__version__", "autograd",
    "are_deterministic_algorithms_enabled", "deterministic", "use_deterministic_algorithms",
    "bool", "comm",
    "complex64", "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled",
    "complex128", "device", "distributed", "double", "dtype", "env", "fft", "float", "float16",
    "float32", "float64", "half", "int", "int8", "int16", "int32", "int64", "linalg", "load",
    "long", "nn", "ops",
    "optim", "placement", "save", "to_global", "to_local", "utils",
    "sbp", "uint8", "uint16", "uint32", "uint64",
    *_creation_all, *_ops_all, *_random_all,
]
