"""Adam and AdamW (with AMSGrad), as PyTorch computes them.

Examples:
    >>> import mpiflow.optim as optim
    >>> net = nn.Linear(4, 2)
    >>> opt = optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..autograd import no_grad
from ..tensors.creation import zeros_like
from ..tensors.tensor import Tensor
from .foreach import FlatGroup, check_flat_flags
from .kernels import adam_update
from .optimizer import Optimizer, Params

__all__ = ["Adam", "AdamW"]


def _check(lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    """Adam (Kingma and Ba), PyTorch's formulation; ``weight_decay`` is an L2 penalty added
    to the gradient.

    Per step ``t``: ``m = beta1 * m + (1 - beta1) * g``, ``v = beta2 * v + (1 - beta2) * g*g``,
    (AMSGrad: ``v_max = max(v_max, v)`` used for ``v``), then
    ``p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)``.

    Args:
        params: tensors or parameter groups.
        lr: the learning rate.
        betas: the decay rates of the two moment estimates.
        eps: added to the denominator.
        weight_decay: L2 penalty (added to the gradient).
        amsgrad: keep the maximum of the second moments.
        maximize: ascend instead of descend.
        foreach: update the parameters of each dtype and layout as one flat array (flat
            parameter, gradient and moment buffers: a few large array operations per step
            instead of a dozen per parameter); bitwise the same numbers as without.
        fused: the same as ``foreach`` here (PyTorch's name for its fused kernels).

    Without ``foreach``, each parameter is updated on its arrays in place (numpy ufuncs with
    ``out=``); a parameter with a partial-sum layout goes through mpiflow ops.

    Examples:
        >>> net = nn.Linear(4, 2)
        >>> opt = optim.Adam(net.parameters(), lr=1e-3, amsgrad=True)
    """

    _decoupled = False

    def __init__(self, params: Params, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 fused: bool | None = None) -> None:
        _check(lr, betas, eps, weight_decay)
        check_flat_flags(foreach, fused)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "fused": fused}
        super().__init__(params, defaults)

    def _state(self, p: Tensor, amsgrad: bool) -> dict[str, Any]:
        state = self.state.setdefault(p, {})
        if not state:
            state["step"] = 0
            state["exp_avg"] = zeros_like(p)      # the parameter's layout
            state["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(p)
        elif amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                options = {"lr": group["lr"], "beta1": beta1, "beta2": beta2,
                           "eps": group["eps"], "weight_decay": group["weight_decay"],
                           "decoupled": self._decoupled, "maximize": group["maximize"]}
                amsgrad = group["amsgrad"]
                done: set[int] = set()
                if group.get("foreach") or group.get("fused"):
                    for flat in self._flat_groups(group):
                        if self._flat_step(flat, amsgrad, options):
                            done.update(id(p) for p in flat.params)
                for p in group["params"]:
                    if p.grad is None or id(p) in done:
                        continue
                    state = self._state(p, amsgrad)
                    state["step"] += 1
                    moments = [state["exp_avg"], state["exp_avg_sq"],
                               state["max_exp_avg_sq"] if amsgrad else None]
                    if self._in_place(p, *moments):
                        adam_update(p._data, p.grad._data,
                                    *[None if m is None else m._data for m in moments],
                                    step=state["step"], **options)
                        p._version += 1
                    else:
                        self._op_step(p, state, group)
        return loss

    def _flat_step(self, flat: FlatGroup, amsgrad: bool, options: dict[str, Any]) -> bool:
        """The update of ``flat``'s parameters as one array; False where it cannot run (a
        gradient missing, parameters at different step counts)."""
        states = [self.state.setdefault(p, {}) for p in flat.params]
        steps = {s.get("step", 0) for s in states}
        if len(steps) != 1:
            return False
        grad = flat.gather_grads()
        if grad is None:
            return False
        step = steps.pop() + 1
        exp_avg = flat.state_buffer("exp_avg", states)
        exp_avg_sq = flat.state_buffer("exp_avg_sq", states)
        max_exp_avg_sq = flat.state_buffer("max_exp_avg_sq", states) if amsgrad else None
        for s in states:
            s["step"] = step
        if not flat.moved:
            flat.gather_params()
        adam_update(flat.flat, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step=step,
                    scratch=flat.scratch(), **options)
        flat.scatter_params()
        return True

    def _op_step(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        """The update with mpiflow ops (a parameter whose arrays cannot be updated in place,
        e.g. one with a partial-sum layout)."""
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        assert p.grad is not None
        g = -p.grad if group["maximize"] else p.grad
        step = state["step"]
        if self._decoupled:
            p *= 1.0 - lr * wd
        elif wd != 0:
            g = g + p * wd  # not +=: g may be p.grad itself
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        # lerp(m, g, 1 - beta1) = m + (1 - beta1) * (g - m), as PyTorch's lerp_
        exp_avg += (g - exp_avg) * (1.0 - beta1)
        exp_avg_sq.copy_(exp_avg_sq * beta2 + g * g * (1.0 - beta2))
        step_size = lr / (1.0 - beta1 ** step)
        bias_correction2_sqrt = math.sqrt(1.0 - beta2 ** step)
        second = exp_avg_sq
        if group["amsgrad"]:
            max_exp_avg_sq = state["max_exp_avg_sq"]
            second = max_exp_avg_sq.copy_(max_exp_avg_sq.maximum(exp_avg_sq))
        denom = second.sqrt() / bias_correction2_sqrt + group["eps"]
        p -= exp_avg / denom * step_size


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter): each step first does
    ``p *= 1 - lr * weight_decay``, then Adam's update without an L2 term.

    Args:
        params: as :class:`Adam`.
        lr: as :class:`Adam`.
        betas: as :class:`Adam`.
        eps: as :class:`Adam`.
        amsgrad: as :class:`Adam`.
        maximize: as :class:`Adam`.
        foreach: as :class:`Adam`.
        fused: as :class:`Adam`.
        weight_decay: the decoupled decay (default 0.01).

    Examples:
        >>> net = nn.Linear(4, 2)
        >>> opt = optim.AdamW(net.parameters(), lr=1e-3)
    """

    _decoupled = True

    def __init__(self, params: Params, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach, fused=fused)
