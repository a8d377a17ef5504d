"""The optimizer base: parameter groups, state, ``zero_grad``, ``state_dict``.

Updates run with mpiflow ops outside autograd and are written into the parameters in place,
so a global parameter keeps its layout and every state tensor (a momentum, Adam's moments) is
created with its parameter's placement and sbp: a split parameter has split state, and each
rank updates only its shard.

Examples:
    >>> import mpiflow.optim as optim
    >>> net, x = nn.Linear(4, 2), flow.randn(3, 4)
    >>> opt = optim.SGD(net.parameters(), lr=0.1)
    >>> loss = net(x).sum()
    >>> loss.backward()
    >>> opt.step()
    >>> opt.zero_grad()
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

from ..autograd import enable_grad, no_grad
from ..nn.modules.convert import value_like
from ..nn.utils import clip_grad_norm_
from ..tensors.tensor import Tensor
from .foreach import FlatGroup, flat_key

__all__ = ["Optimizer", "required"]


class _Required:
    """The default of a hyperparameter that has none (``SGD``'s ``lr`` in old PyTorch)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required: Any = _Required()
Params = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer:
    """Base of the optimizers.

    Args:
        params: tensors, or dicts of ``{"params": tensors, <option>: value}`` (groups).
        defaults: the options a group takes when it does not set them.

    Subclasses implement :meth:`step`; their per-parameter state lives in
    ``self.state[param]``.
    """

    def __init__(self, params: Params, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[dict[str, Any]] = []
        self._flat: dict[int, tuple[list[Tensor], list[FlatGroup]]] = {}
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {type(params).__name__}")
        groups: list[Any] = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (the defaults fill the rest).

        Raises:
            ValueError: a parameter already in a group, or a required option missing.
            TypeError: an entry is not a tensor.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters",
                          stacklevel=2)
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    # -- the update paths ------------------------------------------------------------------
    def _flat_groups(self, group: dict[str, Any]) -> list[FlatGroup]:
        """The flat buffers of ``group``'s parameters, one per :func:`flat_key` (made on first
        use, again when the group's parameters change or one was rebound)."""
        params = group["params"]
        held = self._flat.get(id(group))
        if (held is not None and len(held[0]) == len(params)
                and all(a is b for a, b in zip(held[0], params))
                and all(fg.still_flat() for fg in held[1])):
            return held[1]
        by_key: dict[Any, list[Tensor]] = {}
        for p in params:
            key = flat_key(p)
            if key is not None:
                by_key.setdefault(key, []).append(p)
        flats = [FlatGroup(ps) for ps in by_key.values()]
        self._flat[id(group)] = (list(params), flats)
        return flats

    @staticmethod
    def _in_place(p: Tensor, *states: Any) -> bool:
        """Whether ``p`` can be updated on its arrays in place: a gradient (and state tensors)
        of its dtype, shape and layout, and no partial-sum layout (a shard of a partial sum
        is not the value an elementwise update needs)."""
        g = p.grad
        if g is None or flat_key(p) is None:
            return False
        data = p._data
        for t in (g, *states):
            if t is None:
                continue
            if (t._data.dtype != data.dtype or t._data.shape != data.shape
                    or t._placement != p._placement or t._sbp != p._sbp):
                return False
        return True

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None, or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad.zero_()

    def clip_grad(self) -> None:
        """Clip the gradients of each group that sets ``clip_grad_max_norm`` (and optionally
        ``clip_grad_norm_type``, default 2), as OneFlow's optimizers do, with
        :func:`mpiflow.nn.utils.clip_grad_norm_`; other groups are left as they are.

        Examples:
            >>> w = nn.Parameter(flow.ones(2))
            >>> opt = optim.SGD([{"params": [w], "clip_grad_max_norm": 1.0}], lr=0.1)
            >>> (w * 3).sum().backward()
            >>> opt.clip_grad()
            >>> round(float(w.grad.norm()), 4)
            1.0
        """
        for group in self.param_groups:
            if group.get("clip_grad_max_norm") is not None:
                clip_grad_norm_(group["params"], group["clip_grad_max_norm"],
                                group.get("clip_grad_norm_type", 2.0))

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update the parameters once; ``closure`` re-evaluates the loss and returns it."""
        raise NotImplementedError

    def _closure_loss(self, closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # -- state -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """PyTorch's structure: ``{"state": {index: {...}}, "param_groups": [{..., "params":
        [indices]}]}``, parameters numbered in group order. State tensors are shared, not
        copied (global ones stay global).

        Examples:
            >>> w = nn.Parameter(flow.zeros(2))
            >>> sorted(optim.SGD([w], lr=0.1).state_dict())
            ['param_groups', 'state']
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore options and state from :meth:`state_dict`. State tensors (or numpy arrays)
        are copied into each parameter's dtype and layout: a local value of a global
        parameter is its whole value, a global one is redistributed.

        Raises:
            ValueError: the group structure differs.
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"])
               for g, s in zip(self.param_groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        by_index = {i: p for g, s in zip(self.param_groups, saved_groups)
                    for i, p in zip(s["params"], g["params"])}
        state: dict[Tensor, dict[str, Any]] = {}
        for key, values in state_dict["state"].items():
            param = by_index.get(int(key))
            if param is None:
                continue
            state[param] = {name: self._cast_state(param, name, value)
                            for name, value in values.items()}
        self.state = state
        self.param_groups = [dict(s, params=g["params"])
                             for g, s in zip(self.param_groups, saved_groups)]

    @staticmethod
    def _cast_state(param: Tensor, name: str, value: Any) -> Any:
        if name == "step":
            return value.item() if isinstance(value, Tensor) else value
        if isinstance(value, Tensor) or hasattr(value, "__array__"):
            return value_like(param, value)
        return value

    def __repr__(self) -> str:
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}"
            for key in sorted(group):
                if key != "params":
                    text += f"\n    {key}: {group[key]}"
        return text + "\n)"
