"""``flow.optimizer``: SGD and Adam with learning-rate schedulers, as OneFlow 0.x updates.

``optimizer.minimize(loss)`` inside a train job asks for an update after the job's body: the
job then backpropagates the loss (a vector loss by its mean: OneFlow divides by the number of
loss instances), averages the gradients over the ranks in the mirrored view, and applies the
update. The optimizer's state (momentum, moments, the step count the scheduler reads) lives
in the job, so a job called again continues where it stopped.

Examples:
    >>> s = PiecewiseConstantScheduler([10, 20], [0.1, 0.01, 0.001])
    >>> s.lr(0), s.lr(10), s.lr(25)
    (0.1, 0.01, 0.001)
"""

from __future__ import annotations

import abc
import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...autograd import no_grad
from ...ops.pointwise import assign_, sqrt
from ...tensors.tensor import Tensor
from .session import SESSION

__all__ = ["Adam", "CosineScheduler", "Optimizer", "PiecewiseConstantScheduler",
           "PiecewiseScalingScheduler", "SGD", "Scheduler"]


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


@dataclass
class Optimizer:
    """An update rule; :meth:`minimize` registers it with the running train job."""

    lr_scheduler: Scheduler
    state: dict[str, dict[str, Tensor]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lr_scheduler = _scheduler(self.lr_scheduler)  # a number: a constant rate

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

    def apply(self, variables: dict[str, Tensor], step: int) -> None:
        """One update of every variable that has a gradient (outside autograd)."""
        lr = self.lr_scheduler.lr(step)
        with no_grad():
            for name, var in variables.items():
                if var.grad is not None:
                    self.update(name, var, var.grad, lr, step)

    def update(self, name: str, var: Tensor, grad: Tensor, lr: float, step: int) -> None:
        """Update ``var`` by its gradient (each rule says how)."""
        raise NotImplementedError(f"{type(self).__name__} has no update rule")


@dataclass
class SGD(Optimizer):
    """SGD with momentum as OneFlow updates: ``v = momentum * v - lr * g; w += v``."""

    loss_scale_factor: float | None = None
    momentum: float = 0.9
    grad_clipping: Any = None

    def update(self, name: str, var: Tensor, grad: Tensor, lr: float, step: int) -> None:
        if not self.momentum:
            assign_(var, var - grad * lr)
            return
        slot = self.state.setdefault(name, {})
        v = slot.get("v")
        v = grad * -lr if v is None else v * self.momentum - grad * lr
        slot["v"] = v
        assign_(var, var + v)


@dataclass
class Adam(Optimizer):
    """Adam as OneFlow updates (bias correction only with ``do_bias_correction=True``)."""

    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    do_bias_correction: bool = False
    loss_scale_factor: float | None = None
    grad_clipping: Any = None

    def update(self, name: str, var: Tensor, grad: Tensor, lr: float, step: int) -> None:
        slot = self.state.setdefault(name, {})
        m = grad * (1 - self.beta1) if "m" not in slot else (
            slot["m"] * self.beta1 + grad * (1 - self.beta1))
        v = grad * grad * (1 - self.beta2) if "v" not in slot else (
            slot["v"] * self.beta2 + grad * grad * (1 - self.beta2))
        slot["m"], slot["v"] = m, v
        if self.do_bias_correction:
            t = step + 1
            lr = lr * (1 - self.beta2 ** t) ** 0.5 / (1 - self.beta1 ** t)
        assign_(var, var - m * lr / (sqrt(v) + self.epsilon))


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
