"""OneFlow 0.x's single-client API on mpiflow: ``import mpiflow.compatible.single_client as flow``.

Programs written for OneFlow's first API (``@flow.global_function`` job functions with
``flow.typing`` placeholders, ``flow.layers``, ``flow.optimizer.*.minimize``, the consistent
and mirrored views, ``flow.config``/``flow.env`` for the machines) run on mpiflow's eager
tensors under ``mpiexec``, each job function traced into a plan on its first call and replayed
after (as OneFlow compiles a job): the MPI job's ranks are the devices, the consistent view lays a
batch out over them (``S(0)``) with broadcast variables, and the mirrored view averages each
rank's gradients. ``flow.config.gpu_device_num`` and ``flow.env.machine`` are checked against
the MPI job (a difference is reported once); ``flow.env.ctrl_port`` is not needed. OFRecord
readers are not supported: feed numpy arrays. See ``docs/oneflow-legacy.md``.

Examples:
    >>> import numpy
    >>> import mpiflow.compatible.single_client as flow
    >>> tp = flow.typing
    >>> @flow.global_function(type="train")
    ... def fit(x: tp.Numpy.Placeholder((4, 2)), y: tp.Numpy.Placeholder((4, 1))) -> tp.Numpy:
    ...     pred = flow.layers.dense(x, 1, kernel_initializer=flow.zeros_initializer(),
    ...                              name="fc")
    ...     loss = flow.math.reduce_mean(flow.math.square(pred - y))
    ...     flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]),
    ...                        momentum=0).minimize(loss)
    ...     return loss
    >>> x = numpy.ones((4, 2), numpy.float32)
    >>> [round(fit(x, x[:, :1]).item(), 4) for _ in range(3)]
    [1.0, 0.16, 0.0256]
"""

from ... import dtypes as _dtypes
from . import (
    checkpoint,
    config,
    data,
    env,
    layers,
    losses,
    math,
    nn,
    optimizer,
    regularizers,
    scope,
    train,
    typing,
)
from .checkpoint import get_all_variables, load_variables
from .function import FunctionConfig, function_config, global_function
from .initializers import *  # noqa: F403 - the initializers are this namespace's API
from .initializers import __all__ as _initializers_all
from .session import SESSION as _SESSION
from .session import reset as _reset
from .shape import *  # noqa: F403
from .shape import __all__ as _shape_all
from .variables import get_variable

float = _dtypes.float32
float32 = _dtypes.float32
double = _dtypes.float64
float64 = _dtypes.float64
float16 = _dtypes.float16
int8 = _dtypes.int8
int32 = _dtypes.int32
int64 = _dtypes.int64
uint8 = _dtypes.uint8


def clear_default_session() -> None:
    """Forget every variable, view and setting (a fresh program)."""
    _reset()


def enable_eager_execution(val: bool = True) -> None:
    """Run job functions eagerly (``val=True``: the body on every call) or as traced graphs
    (``False``, the default: traced on the first call of each input signature, replayed
    after). ``MPIFLOW_JOB_EAGER=1`` in the environment also runs them eagerly."""
    _SESSION.eager = bool(val)


__all__ = [
    "FunctionConfig", "checkpoint", "clear_default_session", "config", "data", "double",
    "enable_eager_execution", "env", "float", "float16", "float32", "float64",
    "function_config", "get_all_variables", "get_variable", "global_function", "int32",
    "int64", "int8", "layers", "load_variables", "losses", "math", "nn", "optimizer",
    "regularizers", "scope", "train", "typing", "uint8", *_initializers_all, *_shape_all,
]
