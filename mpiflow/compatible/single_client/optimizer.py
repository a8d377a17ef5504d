"""``flow.optimizer``: SGD and Adam with learning-rate schedulers, as OneFlow 0.x updates.

``optimizer.minimize(loss)`` inside a train job asks for an update after the job's body: the
job then backpropagates the loss (a vector loss by its mean: OneFlow divides by the number of
loss instances), averages the gradients over the ranks in the mirrored view, and applies the
update. The optimizer's state (momentum, moments, the step count the scheduler reads) lives
in the job, so a job called again continues where it stopped.

The update is part of a traced job's plan, so it is written to replay: the states are tensors
made once (zeros, so the first step is no special case) and updated in place, and the learning
rate is a 0-d tensor per layout that :meth:`Optimizer.prepare` sets before each call from the
scheduler (and Adam's bias correction), so the replayed plan follows the schedule.

Examples:
    >>> s = PiecewiseConstantScheduler([10, 20], [0.1, 0.01, 0.001])
    >>> s.lr(0), s.lr(10), s.lr(25)
    (0.1, 0.01, 0.001)
"""

from __future__ import annotations

import abc
import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy

from ...autograd import no_grad
from ...layouts.sbp import Broadcast
from ...ops.pointwise import assign_, fill_, sqrt
from ...tensors import trace as tensor_trace
from ...tensors.creation import tensor
from ...tensors.tensor import Tensor
from . import grad_clipping
from .grad_clipping import ClipGradientConf
from .session import SESSION, persistent

__all__ = ["Adam", "CosineScheduler", "Optimizer", "PiecewiseConstantScheduler",
           "PiecewiseScalingScheduler", "SGD", "Scheduler", "grad_clipping", "loss_scale"]


class Scheduler(abc.ABC):
    """A learning rate per training step."""

    @abc.abstractmethod
    def lr(self, step: int) -> float:
        """The rate at training step ``step`` (0 first)."""


@dataclass(frozen=True)
class PiecewiseConstantScheduler(Scheduler):
    """``values[i]`` from step ``boundaries[i - 1]`` on (``values`` has one more entry)."""

    boundaries: Sequence[int]
    values: Sequence[float]
    warmup: Any = None

    def __post_init__(self) -> None:
        if len(self.values) != len(self.boundaries) + 1:
            raise ValueError(f"PiecewiseConstantScheduler needs one value more than boundaries, "
                             f"got {len(self.boundaries)} boundaries and {len(self.values)} "
                             "values")

    def lr(self, step: int) -> float:
        return float(self.values[bisect.bisect_right(list(self.boundaries), step)])


@dataclass(frozen=True)
class PiecewiseScalingScheduler(Scheduler):
    """``base_lr`` times ``scale[i]`` from step ``boundaries[i]`` on."""

    base_lr: float
    boundaries: Sequence[int]
    scale: Sequence[float] | float

    def lr(self, step: int) -> float:
        i = bisect.bisect_right(list(self.boundaries), step)
        if i == 0:
            return self.base_lr
        scale = self.scale
        factor = scale ** i if isinstance(scale, (int, float)) else scale[i - 1]
        return float(self.base_lr * factor)


@dataclass(frozen=True)
class CosineScheduler(Scheduler):
    """Cosine decay from ``base_lr`` to ``alpha * base_lr`` over ``steps``."""

    base_lr: float
    steps: int
    alpha: float = 0.0

    def lr(self, step: int) -> float:
        import math

        t = min(step, self.steps) / self.steps
        return float(self.base_lr * ((1 - self.alpha) * 0.5 * (1 + math.cos(math.pi * t))
                                     + self.alpha))


def _scheduler(value: Scheduler | float) -> Scheduler:
    if isinstance(value, Scheduler):
        return value
    return PiecewiseConstantScheduler([], [float(value)])


def _made_like(like: Tensor, array: numpy.ndarray) -> Tensor:
    """A tensor of ``array`` with ``like``'s layout (broadcast if global), made outside any
    trace (it lives across calls) and registered with it."""
    with tensor_trace.suspended():
        if like.is_global:
            placement = like.placement
            out = tensor(array, placement=placement, sbp=(Broadcast(),) * placement.ndim)
        else:
            out = tensor(array)
    return persistent(out)


@dataclass
class Optimizer:
    """An update rule; :meth:`minimize` registers it with the running train job."""

    lr_scheduler: Scheduler
    state: dict[str, dict[str, Tensor]] = field(default_factory=dict)
    rates: dict[Any, Tensor] = field(default_factory=dict, init=False, repr=False)
    current_rate: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.lr_scheduler = _scheduler(self.lr_scheduler)  # a number: a constant rate
        clipping = getattr(self, "grad_clipping", None)
        if clipping is not None and not isinstance(clipping, ClipGradientConf):
            raise TypeError(f"grad_clipping must be flow.optimizer.grad_clipping."
                            f"by_global_norm(clip_norm) or None, got {clipping!r}")
        scale = getattr(self, "loss_scale_factor", None)
        if scale is not None and not (isinstance(scale, (int, float)) and scale > 0
                                      and math.isfinite(scale)):
            raise ValueError(f"loss_scale_factor must be a positive number or None, got "
                             f"{scale!r}")

    def minimize(self, loss: Tensor | Sequence[Tensor]) -> None:
        """Minimize ``loss`` (and the losses added with ``flow.losses.add_loss``).

        Raises:
            RuntimeError: outside a train job.
        """
        call = SESSION.current_call("optimizer.minimize")
        if not call.train:
            raise RuntimeError("optimizer.minimize needs a job of type='train'")
        call.losses.extend([loss] if isinstance(loss, Tensor) else list(loss))
        call.minimizers.append(self)

    def rate(self, step: int) -> float:
        """The factor of the gradient step at training step ``step`` (the schedule's rate)."""
        return self.lr_scheduler.lr(step)

    def prepare(self, step: int) -> None:
        """Set the learning rate of training step ``step`` into the rate tensors (before the
        update runs, or its plan replays)."""
        self.current_rate = self.rate(step)
        with tensor_trace.suspended(), no_grad():
            for t in self.rates.values():
                fill_(t, self.current_rate)

    def lr(self, like: Tensor) -> Tensor:
        """The learning rate as a 0-d tensor of ``like``'s dtype and layout."""
        key = (like.placement if like.is_global else None, like.dtype)
        t = self.rates.get(key)
        if t is None:
            t = self.rates[key] = _made_like(like, numpy.array(self.current_rate,
                                                               like.dtype.numpy))
        return persistent(t)

    def slot(self, name: str, kind: str, var: Tensor) -> Tensor:
        """The state ``kind`` of variable ``name`` (zeros like ``var`` at first)."""
        slots = self.state.setdefault(name, {})
        t = slots.get(kind)
        if t is None:
            t = slots[kind] = _made_like(var, numpy.zeros(tuple(var.shape), var.dtype.numpy))
        return persistent(t)

    def apply(self, variables: dict[str, Tensor], grad_scale: float = 1.0) -> None:
        """One update of every variable that has a gradient (outside autograd), at the rate
        :meth:`prepare` set.

        Args:
            variables: the variables, by name.
            grad_scale: a factor of the gradients (``1 / loss_scale_factor`` undoes the loss
                scale), applied before the clipping.
        """
        with no_grad():
            named = [(name, var, var.grad) for name, var in variables.items()
                     if var.grad is not None]
            grads: list[Tensor] = [grad for _, _, grad in named]
            if grad_scale != 1.0:
                grads = [g * grad_scale for g in grads]
            clipping = getattr(self, "grad_clipping", None)
            if clipping is not None:
                grads = clipping.clip(grads)
            for (name, var, _), grad in zip(named, grads):
                self.update(name, var, grad, self.lr(var))

    def update(self, name: str, var: Tensor, grad: Tensor, lr: Tensor) -> None:
        """Update ``var`` by its gradient (each rule says how)."""
        raise NotImplementedError(f"{type(self).__name__} has no update rule")


@dataclass
class SGD(Optimizer):
    """SGD with momentum as OneFlow updates: ``v = momentum * v - lr * g; w += v``.

    ``loss_scale_factor``: the backward starts from ``loss * factor`` and the gradients are
    divided by it before the update (OneFlow's static loss scale). ``grad_clipping``:
    :func:`grad_clipping.by_global_norm`, applied to the gradients before the update.
    """

    loss_scale_factor: float | None = None
    momentum: float = 0.9
    grad_clipping: Any = None

    def update(self, name: str, var: Tensor, grad: Tensor, lr: Tensor) -> None:
        if not self.momentum:
            assign_(var, var - grad * lr)
            return
        v = self.slot(name, "v", var)
        new = v * self.momentum - grad * lr
        assign_(v, new)
        assign_(var, var + new)


@dataclass
class Adam(Optimizer):
    """Adam as OneFlow updates (bias correction only with ``do_bias_correction=True``);
    ``loss_scale_factor`` and ``grad_clipping`` as :class:`SGD`'s."""

    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    do_bias_correction: bool = False
    loss_scale_factor: float | None = None
    grad_clipping: Any = None

    def rate(self, step: int) -> float:
        lr = self.lr_scheduler.lr(step)
        if self.do_bias_correction:
            t = step + 1
            lr = lr * (1 - self.beta2 ** t) ** 0.5 / (1 - self.beta1 ** t)
        return lr

    def update(self, name: str, var: Tensor, grad: Tensor, lr: Tensor) -> None:
        m, v = self.slot(name, "m", var), self.slot(name, "v", var)
        new_m = m * self.beta1 + grad * (1 - self.beta1)
        new_v = v * self.beta2 + grad * grad * (1 - self.beta2)
        assign_(m, new_m)
        assign_(v, new_v)
        assign_(var, var - new_m * lr / (sqrt(new_v) + self.epsilon))


def from_update_conf(lr: float, conf: dict[str, Any]) -> Optimizer:
    """The optimizer of ``function_config.train.model_update_conf`` (``naive_conf``,
    ``momentum_conf``, ``adam_conf``) at the constant rate ``primary_lr``.

    Raises:
        ValueError: another kind of update.
    """
    sched = _scheduler(lr)
    if "naive_conf" in conf:
        return SGD(sched, momentum=0.0)
    if "momentum_conf" in conf:
        return SGD(sched, momentum=float(conf["momentum_conf"].get("beta", 0.9)))
    if "adam_conf" in conf:
        c = conf["adam_conf"]
        return Adam(sched, beta1=float(c.get("beta1", 0.9)), beta2=float(c.get("beta2", 0.999)),
                    epsilon=float(c.get("epsilon", 1e-8)),
                    do_bias_correction=bool(c.get("do_bias_correction", False)))
    raise ValueError(f"model_update_conf must name naive_conf, momentum_conf or adam_conf, got "
                     f"{sorted(conf)}")


def loss_scale(optimizers: Sequence[Optimizer]) -> float:
    """The job's static loss scale: the ``loss_scale_factor`` its optimizers set (1.0: none).

    Raises:
        ValueError: optimizers of one job ask for different factors (a job has one).
    """
    factors = {float(f) for o in optimizers
               if (f := getattr(o, "loss_scale_factor", None)) is not None}
    if len(factors) > 1:
        raise ValueError(f"the optimizers of one job set different loss_scale_factor values "
                         f"{sorted(factors)}: a job's loss has one scale")
    return factors.pop() if factors else 1.0
