"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

Examples:
    >>> import mpiflow.optim as optim
    >>> net = nn.Linear(4, 2)
    >>> opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..autograd import no_grad
from .optimizer import Optimizer, Params

__all__ = ["SGD"]


class SGD(Optimizer):
    """PyTorch's SGD, step for step.

    With ``g = grad`` (negated if ``maximize``), ``g += weight_decay * p``; with momentum
    ``buf = g`` on the first step, then ``buf = momentum * buf + (1 - dampening) * g``, and
    ``g = g + momentum * buf`` (Nesterov) or ``g = buf``; finally ``p -= lr * g``.

    Args:
        params: tensors or parameter groups.
        lr: the learning rate.
        momentum: the momentum factor.
        dampening: dampening of the momentum.
        weight_decay: L2 penalty.
        nesterov: Nesterov momentum (needs ``momentum > 0`` and ``dampening == 0``).
        maximize: ascend instead of descend.

    Examples:
        >>> w = nn.Parameter(flow.tensor([1.0]))
        >>> (w * 3).sum().backward()
        >>> optim.SGD([w], lr=0.1).step()
        >>> round(w.item(), 4)
        0.7
    """

    def __init__(self, params: Params, lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 *, maximize: bool = False) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize}
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                momentum, dampening = group["momentum"], group["dampening"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = -p.grad if group["maximize"] else p.grad
                    if group["weight_decay"] != 0:
                        g = g + p * group["weight_decay"]  # not +=: g may be p.grad itself
                    if momentum != 0:
                        state = self.state.setdefault(p, {})
                        buf = state.get("momentum_buffer")
                        if buf is None:
                            buf = state["momentum_buffer"] = g.clone()
                        else:
                            buf.copy_(buf * momentum + g * (1.0 - dampening))
                        g = g + buf * momentum if group["nesterov"] else buf
                    p -= g * group["lr"]
        return loss
