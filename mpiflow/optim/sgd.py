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
from ..tensors.tensor import Tensor
from .foreach import FlatGroup, check_flat_flags
from .kernels import sgd_update
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
        foreach: update the parameters of each dtype and layout as one flat array (flat
            parameter, gradient and momentum buffers: a few large array operations per step
            instead of a few per parameter); bitwise the same numbers as without.
        fused: the same as ``foreach`` here (PyTorch's name for its fused kernels).

    Without ``foreach``, each parameter is updated on its arrays in place (numpy ufuncs with
    ``out=``); a parameter with a partial-sum layout goes through mpiflow ops.

    Examples:
        >>> w = nn.Parameter(flow.tensor([1.0]))
        >>> (w * 3).sum().backward()
        >>> optim.SGD([w], lr=0.1).step()
        >>> round(w.item(), 4)
        0.7
    """

    def __init__(self, params: Params, lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 *, maximize: bool = False, foreach: bool | None = None,
                 fused: bool | None = None) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        check_flat_flags(foreach, fused)
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "fused": fused}
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                options = {k: group[k] for k in _OPTIONS}
                done: set[int] = set()
                if group.get("foreach") or group.get("fused"):
                    for flat in self._flat_groups(group):
                        if self._flat_step(flat, options):
                            done.update(id(p) for p in flat.params)
                for p in group["params"]:
                    if p.grad is None or id(p) in done:
                        continue
                    state = self.state.setdefault(p, {})
                    buf = state.get("momentum_buffer")
                    if self._in_place(p, buf):
                        new = sgd_update(p._data, p.grad._data,
                                         None if buf is None else buf._data, **options)
                        if buf is None and new is not None:
                            state["momentum_buffer"] = Tensor(new, p._placement, p._sbp,
                                                              p._shape)
                        p._version += 1
                    else:
                        self._op_step(p, state, group)
        return loss

    def _flat_step(self, flat: FlatGroup, options: dict[str, Any]) -> bool:
        """The update of ``flat``'s parameters as one array; False where it cannot run (a
        gradient missing, momentum buffers on some parameters only)."""
        grad = flat.gather_grads()
        if grad is None:
            return False
        states = [self.state.setdefault(p, {}) for p in flat.params]
        buf = None
        if options["momentum"] != 0:
            present = [s.get("momentum_buffer") is not None for s in states]
            if any(present) and not all(present):
                return False
            if all(present):
                buf = flat.state_buffer("momentum_buffer", states)
        if not flat.moved:
            flat.gather_params()
        # The gathered gradient is this group's own copy: the last temporary may reuse it.
        new = sgd_update(flat.flat, grad, buf, scratch=grad, **options)
        if buf is None and new is not None:
            flat.adopt("momentum_buffer", new, states)
        flat.scatter_params()
        return True

    def _op_step(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        """The update with mpiflow ops (a parameter whose arrays cannot be updated in place,
        e.g. one with a partial-sum layout)."""
        momentum, dampening = group["momentum"], group["dampening"]
        assert p.grad is not None
        g = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"] != 0:
            g = g + p * group["weight_decay"]  # not +=: g may be p.grad itself
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.clone()
            else:
                buf.copy_(buf * momentum + g * (1.0 - dampening))
            g = g + buf * momentum if group["nesterov"] else buf
        p -= g * group["lr"]


_OPTIONS = ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize")
