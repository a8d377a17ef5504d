"""``flow.global_function`` and ``flow.function_config``: job functions as traced graphs.

A job function is a graph, as in OneFlow: its first call with an input signature (the
placeholders' shapes and dtypes) runs the body once while :mod:`mpiflow.nn.graph`'s tracer
records it (forward, loss, backward, the gradients' averaging and the optimizer's update) into
a plan, and later calls with that signature replay the plan: the same kernels on the new
inputs, without the body's Python or any per-op dispatch, the same bits as running the body
again. The learning rate is a tensor the job sets before each call, so a replay follows the
schedule. Placeholders become tensors, layers find their variables by name, and a train job
ends with the update its ``minimize`` (or its configuration) asks for. In the consistent view
an argument is the logical batch, split over the ranks (``S(0)``), and the variables are
broadcast: the numbers are those of one process, at any rank count. In the mirrored view each
rank runs on its own batch and the gradients are averaged over the ranks before the update.

``flow.enable_eager_execution(True)`` (or ``MPIFLOW_JOB_EAGER=1`` in the environment) runs
the body on every call instead. A body that reads a tensor's value into Python (``.numpy()``,
``float(t)``: control flow on data) cannot be traced: the job says so once and runs eagerly
for that signature, with the same results.

Examples:
    >>> import numpy
    >>> import mpiflow.compatible.single_client as flow
    >>> tp = flow.typing
    >>> @flow.global_function(type="predict")
    ... def double(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
    ...     return x * 2
    >>> double(numpy.ones(3, numpy.float32)).tolist()
    [2.0, 2.0, 2.0]
"""

from __future__ import annotations

import functools
import inspect
import typing as _typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy

from ... import dtypes as _dtypes
from ...autograd import backward, enable_grad, no_grad
from ...communication.collectives.objects import all_gather_object
from ...communication.mpi.group import world_comm
from ...core import settings
from ...core.reduce_op import ReduceOp
from ...layouts.sbp import Split
from ...nn.graph.plan import Plan
from ...nn.graph.trace import trace
from ...ops.reduction import mean
from ...runtime import topology
from ...tensors import trace as tensor_trace
from ...tensors.creation import tensor
from ...tensors.random import get_rng_state, set_rng_state
from ...tensors.tensor import Tensor
from . import typing as tp
from .agreement import CheckSchedule, agree_on_inputs
from .optimizer import Optimizer, from_update_conf, loss_scale
from .session import CONSISTENT, MIRRORED, SESSION, Call, View, note_once

Array = numpy.ndarray

__all__ = ["EAGER_ENV", "FunctionConfig", "Job", "JobResult", "function_config",
           "global_function"]

EAGER_ENV = "MPIFLOW_JOB_EAGER"
"""Set to an on value (:mod:`mpiflow.core.settings`), job functions run eagerly (no tracing)."""


@dataclass
class TrainConfig:
    """``function_config().train``: the update of the older API (``losses.add_loss``)."""

    lr: float | None = None
    update: dict[str, Any] | None = None

    def primary_lr(self, lr: float) -> None:
        """The (constant) learning rate."""
        self.lr = float(lr)

    def model_update_conf(self, conf: dict[str, Any]) -> None:
        """``{"naive_conf": {}}`` (SGD), ``{"momentum_conf": {"beta": m}}`` or
        ``{"adam_conf": {...}}``."""
        self.update = dict(conf)


@dataclass
class FunctionConfig:
    """A job's configuration: data type, logical view, the older API's update."""

    data_type: Any = None
    view: View | None = None
    train: TrainConfig = field(default_factory=TrainConfig)

    def default_data_type(self, dtype: Any) -> None:
        """The dtype of placeholders that name none (float32 by default)."""
        self.data_type = _dtypes.as_dtype(dtype)

    def default_logical_view(self, view: View) -> None:
        """``flow.scope.consistent_view()`` (the default) or ``mirrored_view()``."""
        if not isinstance(view, View):
            raise TypeError(f"default_logical_view takes flow.scope.consistent_view() or "
                            f"mirrored_view(), got {view!r}")
        self.view = view


function_config = FunctionConfig


class JobResult:
    """A job's result without a return annotation: ``.get()`` gives it (OneFlow's futures;
    eager jobs have finished when they return)."""

    def __init__(self, value: Any, view: View) -> None:
        self._value, self._view = value, view

    def get(self) -> Any:
        """The result: blobs with ``.numpy()`` and ``.numpy_list()`` (nested as returned)."""
        return _map(self._value, lambda t: _Blob(t, self._view))

    def async_get(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback`` with :meth:`get`'s value."""
        callback(self.get())


class _Blob:
    """A returned tensor: ``numpy()`` (logical value, or this rank's in the mirrored view) and
    ``numpy_list()`` (one array per rank in the mirrored view)."""

    def __init__(self, t: Tensor, view: View) -> None:
        self._t, self._view = t, view

    def numpy(self) -> Array:
        return self._t.numpy()

    def numpy_list(self) -> list[Array]:
        if self._view is MIRRORED:
            out: list[Any] = [None] * topology.size
            all_gather_object(out, self._t.numpy())
            return out
        return [self._t.numpy()]


def _map(value: Any, fn: Callable[[Tensor], Any]) -> Any:
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return value


def _convert(value: Any, hint: Any, view: View) -> Any:
    """A returned value as its annotation says (tp.Numpy, tp.ListNumpy, tuples of them)."""
    if hint is inspect.Signature.empty or hint is None:
        return JobResult(value, view)
    origin = _typing.get_origin(hint)
    if origin in (tuple, _typing.Tuple):  # noqa: UP006 - OneFlow's programs write Tuple[...]
        args = _typing.get_args(hint)
        return tuple(_convert(v, args[min(i, len(args) - 1)], view) for i, v in enumerate(value))
    if origin in (dict, _typing.Dict):  # noqa: UP006
        arg = _typing.get_args(hint)[-1]
        return {k: _convert(v, arg, view) for k, v in value.items()}
    if hint is tp.ListNumpy:
        return _map(value, lambda t: _Blob(t, view).numpy_list())
    if hint is tp.Numpy:
        return _map(value, lambda t: t.numpy())
    raise TypeError(f"unsupported return annotation {hint!r}: use flow.typing.Numpy or "
                    "ListNumpy (or none, then .get())")


@dataclass
class JobTrace:
    """What the first call of an input signature made: the plan (None: the signature runs
    eagerly, for ``reason``) and the trainable variables the plan updates."""

    plan: Plan | None
    variables: list[Tensor]
    reason: str | None = None


class Job:
    """A job function; call it with numpy arrays for its placeholders.

    Attributes:
        traces: per input signature, what its first call traced (see :class:`JobTrace`).
        replays: how many calls replayed a plan.
    """

    def __init__(self, fn: Callable[..., Any], kind: str, config: FunctionConfig) -> None:
        self.fn, self.kind, self.config = fn, kind, config
        self.signature = inspect.signature(fn)
        hints = _typing.get_type_hints(fn)
        self.placeholders: list[tuple[str, tp.Placeholder]] = []
        for name in self.signature.parameters:
            hint = hints.get(name)
            if not isinstance(hint, tp.Placeholder):
                raise TypeError(f"argument {name!r} of job {fn.__name__!r} needs a "
                                "flow.typing.Numpy.Placeholder or ListNumpy.Placeholder "
                                "annotation")
            self.placeholders.append((name, hint))
        self.returns = hints.get("return", inspect.Signature.empty)
        self.steps = 0
        self.optimizers: list[Optimizer] = []
        self.view = config.view or (SESSION.view_stack[-1] if SESSION.view_stack
                                    else CONSISTENT)
        self.traces: dict[Any, JobTrace] = {}
        self.replays = 0
        self.input_checks = CheckSchedule()
        functools.update_wrapper(self, fn)

    @property
    def plans(self) -> list[Plan | None]:
        """The plans traced so far (None for a signature that runs eagerly)."""
        return [t.plan for t in self.traces.values()]

    def _array(self, name: str, spec: tp.Placeholder, value: Any) -> Array:
        dtype = (spec.numpy_dtype if spec.dtype is not None or self.config.data_type is None
                 else self.config.data_type.numpy)
        if spec.listed:
            values = list(value)
            if len(values) == topology.size:
                value = values[topology.rank]
            elif len(values) == 1:
                value = values[0]
            else:
                raise ValueError(f"{name}: a ListNumpy argument has one array per device: "
                                 f"{topology.size} (one per rank) or 1 (this rank's), got "
                                 f"{len(values)}")
        array = numpy.asarray(value)
        if array.dtype.kind != dtype.kind and not (array.dtype.kind in "iu" and dtype.kind
                                                    in "iu"):
            raise TypeError(f"{name}: expected {dtype} data, got {array.dtype}")
        array = array.astype(dtype, copy=False)
        fits = (array.shape == spec.shape if not spec.listed else
                array.ndim == len(spec.shape) and all(a <= b for a, b in zip(array.shape,
                                                                               spec.shape)))
        if not fits:
            raise ValueError(f"{name}: expected an array of shape {spec.shape}, got "
                             f"{array.shape}")
        return array

    def _tensor(self, array: Array) -> Tensor:
        if self.view is MIRRORED or array.ndim == 0:
            return tensor(array)
        placement = SESSION.placement
        return tensor(array, placement=placement, sbp=(Split(0),) * placement.ndim)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        SESSION.check_configuration()
        bound = self.signature.bind(*args, **kwargs)
        arrays = [self._array(name, spec, bound.arguments[name])
                  for name, spec in self.placeholders]
        if self.view is not MIRRORED and self.input_checks.due():
            agree_on_inputs(getattr(self.fn, "__name__", "job"),
                            [(name, a) for (name, spec), a in zip(self.placeholders, arrays)
                             if not spec.listed])
        inputs = [self._tensor(a) for a in arrays]
        if SESSION.call is not None:
            raise RuntimeError("a job function cannot be called inside another job function")
        if SESSION.eager or settings.read(EAGER_ENV):
            out = self._run(inputs)[0]
        else:
            out = self._graph(inputs)
        return _convert(out, self.returns, self.view)

    def _graph(self, inputs: list[Tensor]) -> Any:
        """Replay the plan of the inputs' signature; trace it on its first call."""
        key = (SESSION.epoch, tuple((tuple(t.shape), t.dtype) for t in inputs))
        traced = self.traces.get(key)
        if traced is None:
            return self._trace(key, inputs)
        if traced.plan is None:
            return self._run(inputs)[0]
        for v in traced.variables:
            v.grad = None
        for optimizer in self.optimizers:
            optimizer.prepare(self.steps)
        out = traced.plan.run(inputs)
        for v in traced.variables:
            v.grad = None
        if self.kind == "train":
            self.steps += 1
        self.replays += 1
        return out

    def _trace(self, key: Any, inputs: list[Tensor]) -> Any:
        calls: list[Call] = []

        def body(*tensors: Tensor) -> Any:
            out, call = self._run(list(tensors))
            calls.append(call)
            return out

        rng = get_rng_state()
        try:
            traced, out = trace(body, inputs)
        except tensor_trace.DataDependentError as e:
            # Nothing was updated yet (the update follows the body): run the call again,
            # eagerly, from the same random state.
            set_rng_state(rng)
            self.traces[key] = JobTrace(None, [], str(e))
            self._note_eager(str(e))
            return self._run(inputs)[0]
        train = self.kind == "train"
        variables = [v for v in calls[0].used.values() if train and v.requires_grad]
        self.traces[key] = JobTrace(traced.plan, variables, traced.reason)
        if traced.plan is None:
            self._note_eager(str(traced.reason))
        return out

    def _note_eager(self, reason: str) -> None:
        name = getattr(self.fn, "__name__", "job")
        note_once(f"eager job {name}", f"job function {name!r} cannot be traced into a plan "
                  f"({reason}); it runs eagerly on each call, with the same results")

    def _run(self, inputs: list[Tensor]) -> tuple[Any, Call]:
        """Run the body (and a train job's update) eagerly; returns its result and call."""
        named = {name: t for (name, _), t in zip(self.placeholders, inputs)}
        call = Call(self.view, self.kind == "train")
        SESSION.call = call
        try:
            if call.train:
                with enable_grad():
                    out = self.fn(**named)
                self._train(call)
            else:
                with no_grad():
                    out = self.fn(**named)
        finally:
            SESSION.call = None
        return out, call

    def _train(self, call: Call) -> None:
        """Backpropagate the job's losses, average the gradients (mirrored view), update."""
        optimizers = list(call.minimizers)
        if not optimizers and self.config.train.lr is not None:
            optimizers = [from_update_conf(self.config.train.lr,
                                           self.config.train.update or {"naive_conf": {}})]
        if not optimizers:
            raise RuntimeError("a train job needs an update: call optimizer.minimize(loss), or "
                               "set function_config().train.primary_lr and model_update_conf "
                               "and flow.losses.add_loss(loss)")
        if not call.losses:
            raise RuntimeError("a train job needs a loss: optimizer.minimize(loss) or "
                               "flow.losses.add_loss(loss)")
        total: Tensor | None = None
        for loss in call.losses:
            term = mean(loss) if loss.ndim else loss  # OneFlow divides by the loss instances
            total = term if total is None else total + term
        variables = {n: v for n, v in call.used.items() if v.requires_grad}
        for v in variables.values():
            v.grad = None
        assert total is not None  # there is a loss
        scale = loss_scale(optimizers)
        backward(total * scale if scale != 1.0 else total)  # the update divides it out
        if self.view is MIRRORED and topology.size > 1:
            for v in variables.values():
                if v.grad is not None:
                    tensor_trace.call(_average_grad, v)  # a step of a traced plan
        # the job keeps its optimizers: the k-th minimize of every call is the same one
        while len(self.optimizers) < len(optimizers):
            self.optimizers.append(optimizers[len(self.optimizers)])
        for k in range(len(optimizers)):
            self.optimizers[k].prepare(self.steps)
            self.optimizers[k].apply(variables, 1.0 / scale)
        for v in variables.values():
            v.grad = None
        self.steps += 1


def _average_grad(v: Tensor) -> None:
    """Average ``v.grad`` over the ranks, in place (the mirrored view's update)."""
    grad = v.grad
    if grad is not None:
        world_comm.all_reduce(grad._data, ReduceOp.AVG)


def global_function(type: str = "predict", function_config: FunctionConfig | None = None
                    ) -> Callable[[Callable[..., Any]], Job]:
    """Make a job function (OneFlow's ``@flow.global_function``).

    Args:
        type: ``"train"`` (the body's ``minimize`` updates the variables) or ``"predict"``.
        function_config: a :func:`function_config` (default data type, logical view, the
            older API's update).

    Returns:
        A decorator that turns the function into a :class:`Job`.

    Raises:
        ValueError: another type.
    """
    if type not in ("train", "predict"):
        raise ValueError(f"global_function type must be 'train' or 'predict', got {type!r}")
    config = function_config or FunctionConfig()

    def decorate(fn: Callable[..., Any]) -> Job:
        return Job(fn, type, config)

    return decorate
