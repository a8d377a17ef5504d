"""``Module``, the base of every layer, and ``Parameter``, the tensors a module trains.

A module registers what is assigned to it as PyTorch does: a :class:`Parameter` becomes a
parameter, a :class:`Module` a child, and :meth:`Module.register_buffer` adds state that is not
trained. Parameters may be local or global tensors; :meth:`Module.to_global` lays out a whole
module over a placement (data parallel: every parameter ``B``; model parallel: some split).

Examples:
    >>> import mpiflow.nn as nn
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> [name for name, _ in net.named_parameters()]
    ['0.weight', '0.bias', '2.weight', '2.bias']
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar

from ... import dtypes as _dtypes
from ...autograd import no_grad
from ...core.device import device as _device
from ...layouts.placement import Placement
from ...layouts.sbp import Broadcast, SbpParallel
from ...tensors.tensor import Tensor
from .convert import check_value, copy_into, globalize, swap
from .hooks import RemovableHandle
from .parameter import Parameter

__all__ = ["IncompatibleKeys", "Module", "Parameter", "RemovableHandle"]

M = TypeVar("M", bound="Module")
SbpArg = SbpParallel | tuple[SbpParallel, ...] | list[SbpParallel]
SbpChoice = SbpArg | Callable[[str, Tensor], Any] | None


class IncompatibleKeys(NamedTuple):
    """What :meth:`Module.load_state_dict` did not match: keys the module has and the state
    dict lacks, and keys of the state dict the module does not have."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _addindent(text: str, spaces: int) -> str:
    return text.replace("\n", "\n" + " " * spaces)


def _forward_unimplemented(self: Module, *args: Any) -> Any:
    raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                              '"forward" function')


class Module:
    """The base of every layer: parameters, buffers, child modules, hooks and state.

    Subclasses call ``super().__init__()`` first, assign parameters and children as
    attributes, and define ``forward``; call the module (``net(x)``) to run the hooks too.

    Examples:
        >>> class Scale(nn.Module):
        ...     def __init__(self) -> None:
        ...         super().__init__()
        ...         self.w = nn.Parameter(flow.ones(3))
        ...     def forward(self, x):
        ...         return x * self.w
        >>> Scale()(flow.ones(3)).tolist()
        [1.0, 1.0, 1.0]
    """

    training: bool
    forward: Callable[..., Any] = _forward_unimplemented

    def __init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "training", True)
        set_(self, "_parameters", OrderedDict())
        set_(self, "_buffers", OrderedDict())
        set_(self, "_non_persistent_buffers", set())
        set_(self, "_modules", OrderedDict())
        set_(self, "_forward_pre_hooks", OrderedDict())
        set_(self, "_forward_hooks", OrderedDict())

    # -- registration ------------------------------------------------------------------------
    def _check_name(self, name: str, what: str, *, exists_ok: dict[str, Any]) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
        if not name:
            raise KeyError(f'{what} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{what} name can\'t contain ".", got: {name}')
        if hasattr(self, name) and name not in exists_ok:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or None: a declared but absent parameter, e.g. a missing bias).

        Raises:
            TypeError: ``param`` is not a :class:`Parameter`.
            KeyError: a bad name, or an attribute of that name exists.
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter", exists_ok=self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (mpiflow.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state that is not trained (``to``/``to_global`` convert it too).

        Args:
            name: the attribute name.
            tensor: the buffer, or None.
            persistent: whether :meth:`state_dict` includes it.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer", exists_ok=self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(mpiflow tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module (or None) under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module", exists_ok=self._modules)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(mpiflow.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name)
            self._modules[name] = value
        elif name in d.get("_modules", ()):
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (mpiflow.nn.Module or None expected)")
            self._modules[name] = None
        elif name in d.get("_buffers", ()):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(mpiflow tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str) -> None:
        self.__dict__.pop(name, None)
        for table in ("_parameters", "_buffers", "_modules"):
            self.__dict__[table].pop(name, None)
        self._non_persistent_buffers.discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            entries = d.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[table]:
                del self.__dict__[table][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    # -- traversal ---------------------------------------------------------------------------
    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """This module and every descendant, with dotted names (``""`` for this one)."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name,
                                                remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """This module and every descendant."""
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """The direct children, with their names."""
        seen: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        """The direct children."""
        for _, module in self.named_children():
            yield module

    def _named_members(self, table: str, prefix: str, recurse: bool,
                       remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else iter([(prefix, self)])
        for module_prefix, module in modules:
            for name, value in module.__dict__[table].items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs, each shared parameter once.

        Examples:
            >>> [n for n, _ in nn.Linear(2, 3).named_parameters()]
            ['weight', 'bias']
        """
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters (of the descendants too, with ``recurse``)."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, buffer)`` pairs."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers (of the descendants too, with ``recurse``)."""
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def get_submodule(self, target: str) -> Module:
        """The descendant at the dotted path ``target`` (``""`` is this module)."""
        module: Module = self
        for item in target.split(".") if target else []:
            child = module._modules.get(item)
            if child is None:
                raise AttributeError(f"{module._get_name()} has no attribute `{item}`")
            module = child
        return module

    def apply(self: M, fn: Callable[[Module], Any]) -> M:
        """Call ``fn`` on every descendant, then on this module (as for custom init)."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- modes and gradients -----------------------------------------------------------------
    def train(self: M, mode: bool = True) -> M:
        """Set training mode (``training``) here and in every descendant."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self: M) -> M:
        """Set evaluation mode (``train(False)``): dropout becomes the identity."""
        return self.train(False)

    def requires_grad_(self: M, requires_grad: bool = True) -> M:
        """Set ``requires_grad`` of every parameter."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None, or to zeros in place."""
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                with no_grad():
                    param.grad.zero_()

    # -- calling -----------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before each forward; it may return new args (a tuple or
        one value). With ``with_kwargs``: ``hook(module, args, kwargs)`` -> ``(args, kwargs)``.

        Returns:
            A handle whose ``remove()`` unregisters the hook.
        """
        return self._add_hook(self._forward_pre_hooks, hook, prepend, with_kwargs)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after each forward; it may return a new output.
        With ``with_kwargs``: ``hook(module, args, kwargs, output)``.

        Returns:
            A handle whose ``remove()`` unregisters the hook.
        """
        return self._add_hook(self._forward_hooks, hook, prepend, with_kwargs)

    @staticmethod
    def _add_hook(hooks: OrderedDict[int, Any], hook: Callable[..., Any], prepend: bool,
                  with_kwargs: bool) -> RemovableHandle:
        handle = RemovableHandle(hooks)
        hooks[handle.id] = (hook, with_kwargs)
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for hook, with_kwargs in list(self._forward_pre_hooks.values()):
            if with_kwargs:
                changed = hook(self, args, kwargs)
                if changed is not None:
                    args, kwargs = changed
            else:
                changed = hook(self, args)
                if changed is not None:
                    args = changed if isinstance(changed, tuple) else (changed,)
        result = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(self._forward_hooks.values()):
            changed = hook(self, args, kwargs, result) if with_kwargs else \
                hook(self, args, result)
            if changed is not None:
                result = changed
        return result

    # -- state -------------------------------------------------------------------------------
    def _own_state(self) -> OrderedDict[str, Tensor]:
        """Every parameter and persistent buffer by state-dict key (PyTorch's order: each
        module's parameters, then its buffers, then its children)."""
        out: OrderedDict[str, Tensor] = OrderedDict()
        for prefix, module in self.named_modules(remove_duplicate=False):
            head = prefix + "." if prefix else ""
            for name, param in module._parameters.items():
                if param is not None:
                    out[head + name] = param
            for name, buf in module._buffers.items():
                if buf is not None and name not in module._non_persistent_buffers:
                    out[head + name] = buf
        return out

    def state_dict(self, *, destination: dict[str, Any] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Any]:
        """Parameters and persistent buffers by dotted name (``"0.weight"``), in order.

        Args:
            destination: a mapping to fill (default: a new ``OrderedDict``).
            prefix: put before every key.
            keep_vars: give the parameters themselves rather than detached tensors.

        Returns:
            The state; values share memory with the module (global ones stay global).

        Examples:
            >>> list(nn.Sequential(nn.Linear(2, 2)).state_dict())
            ['0.weight', '0.bias']
        """
        out: dict[str, Any] = OrderedDict() if destination is None else destination
        for key, value in self._own_state().items():
            out[prefix + key] = value if keep_vars else value.detach()
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True
                        ) -> IncompatibleKeys:
        """Copy values into the parameters and buffers, in place (the same objects stay).

        Args:
            state_dict: tensors or numpy arrays by key. For a global parameter a local value
                is its whole logical value (each rank keeps its shard) and a global value is
                redistributed to the parameter's layout.
            strict: also fail on missing or unexpected keys.

        Returns:
            ``(missing_keys, unexpected_keys)``.

        Raises:
            RuntimeError: listing every problem (shape or dtype mismatches name the key);
                nothing is copied then.

        Examples:
            >>> b = nn.Linear(2, 2)
            >>> b.load_state_dict(nn.Linear(2, 2).state_dict())
            IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        own = self._own_state()
        missing = [key for key in own if key not in state_dict]
        unexpected = [key for key in state_dict if key not in own]
        errors = [msg for key, target in own.items() if key in state_dict
                  for msg in [check_value(key, target, state_dict[key])] if msg is not None]
        if strict:
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t"
                               + "\n\t".join(errors))
        for key, target in own.items():
            if key in state_dict:
                copy_into(target, state_dict[key])
        return IncompatibleKeys(missing, unexpected)

    # -- conversions -------------------------------------------------------------------------
    def _convert(self, fn: Callable[[str, Tensor], Tensor]) -> None:
        """Replace the data and layout of every parameter, gradient and buffer by
        ``fn(name, tensor)``, keeping the objects (optimizers stay valid)."""
        with no_grad():
            for name, param in list(self.named_parameters()):
                swap(param, fn(name, param))
                if param.grad is not None:
                    param.grad = fn(name, param.grad)
            for name, buf in list(self.named_buffers()):
                swap(buf, fn(name, buf))

    def to(self: M, *args: Any, **kwargs: Any) -> M:
        """Convert floating parameters and buffers to a dtype and/or move them to a device,
        in place: ``to(flow.float64)``, ``to("cpu")``, ``to(flow.device("cpu"))``,
        ``to(device, dtype)``.

        Examples:
            >>> nn.Linear(2, 2).to(flow.float64).weight.dtype
            mpiflow.float64
        """
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (str, _device)):
                device = a
            else:
                dtype = a
        if dtype is not None and not _dtypes.as_dtype(dtype).is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got "
                            f"desired dtype={dtype}")

        def convert(_: str, t: Tensor) -> Tensor:
            floating = t.dtype.numpy.kind in "fc"
            return t.to(device=device, dtype=dtype if floating else None)

        self._convert(convert)
        return self

    def double(self: M) -> M:
        """Floating parameters and buffers to float64."""
        return self.to(_dtypes.float64)

    def float(self: M) -> M:
        """Floating parameters and buffers to float32."""
        return self.to(_dtypes.float32)

    def half(self: M) -> M:
        """Floating parameters and buffers to float16."""
        return self.to(_dtypes.float16)

    def cpu(self: M) -> M:
        """Parameters and buffers on the host."""
        return self.to("cpu")

    def to_global(self: M, placement: Placement | None = None, sbp: SbpChoice = None) -> M:
        """Make every parameter and buffer global (or redistribute global ones), in place.

        Each local tensor becomes global as :meth:`Tensor.to_global` makes it (OneFlow's
        rule): with ``B`` the first rank's value is every rank's, with ``S(d)`` each rank's
        tensor is its shard (the global tensor is the ranks' tensors concatenated along
        ``d``: ``to_local()`` then ``to_global()`` round-trips), with ``P`` each rank's tensor
        is a summand. To lay out a module built alike on every rank (model parallel), make it
        ``B`` first and then give the splits, as below.

        Args:
            placement: where the tensors go (default: keep, for global ones).
            sbp: one layout for all, or a function ``(dotted name, tensor) -> sbp`` (None
                from it means broadcast).

        Returns:
            This module; parameters stay the same :class:`Parameter` objects (leaves).

        Examples:
            >>> p = flow.placement("cpu", list(range(flow.env.get_world_size())))
            >>> net = nn.Linear(4, 8).to_global(p, flow.sbp.broadcast)      # data parallel
            >>> net = net.to_global(sbp=lambda name, t: flow.sbp.split(0))    # model parallel
            >>> net.weight.shape
            mpiflow.Size([8, 4])
            >>> shards = nn.Linear(4, 8).to_global(p, flow.sbp.split(0))     # local shards
            >>> shards.weight.shape[0] == 8 * flow.env.get_world_size()
            True
        """

        # sbp values are callable too (OneFlow's flow.sbp.broadcast()): a function is the rest
        by_name: Callable[[str, Tensor], Any] | None = (
            sbp if callable(sbp) and not isinstance(sbp, SbpParallel) else None)

        def convert(name: str, t: Tensor) -> Tensor:
            choice = by_name(name, t) if by_name is not None else sbp
            where = placement if placement is not None else t._placement
            if choice is None and by_name is not None and where is not None:
                choice = (Broadcast(),) * where.ndim
            return globalize(t, placement, choice)

        self._convert(convert)
        return self

    def to_local(self: M) -> M:
        """Make every global parameter and buffer local, in place: each rank keeps its shard.

        Local tensors stay as they are. Parameters stay the same :class:`Parameter` objects
        (OneFlow's ``Module.to_local``). No communication.

        Returns:
            This module.

        Examples:
            >>> p = flow.placement("cpu", list(range(flow.env.get_world_size())))
            >>> net = nn.Linear(4, 2).to_global(p, flow.sbp.broadcast).to_local()
            >>> net.weight.is_local
            True
        """
        self._convert(lambda _, t: t.to_local() if t.is_global else t)
        return self

    # -- printing ----------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The module's own settings, shown inside its repr (override in layers)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2)
                       for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            body = extra_lines[0] if len(extra_lines) == 1 and not child_lines else \
                "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"

