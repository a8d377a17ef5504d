"""Containers of parameters: ``ParameterList`` and ``ParameterDict`` (registered, so that
``parameters()``, ``state_dict()`` and ``to_global`` see them).

Examples:
    >>> import mpiflow.nn as nn
    >>> ps = nn.ParameterList([nn.Parameter(flow.ones(2)) for _ in range(2)])
    >>> len(ps), len(list(ps.parameters()))
    (2, 2)
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .module import Module, Parameter

__all__ = ["ParameterDict", "ParameterList"]


class ParameterList(Module):
    """A list of parameters, registered under ``"0"``, ``"1"``, ...

    Examples:
        >>> ps = nn.ParameterList([nn.Parameter(flow.zeros(1))])
        >>> _ = ps.append(nn.Parameter(flow.ones(1)))
        >>> ps[-1].tolist(), len(ps)
        ([1.0], 2)
    """

    def __init__(self, values: Iterable[Parameter] | None = None) -> None:
        super().__init__()
        for p in values or ():
            self.append(p)

    def _key(self, index: int) -> str:
        i = operator.index(index)
        if not -len(self) <= i < len(self):
            raise IndexError(f"index {i} is out of range for a ParameterList of {len(self)}")
        return str(i % len(self))

    def __getitem__(self, index: int) -> Any:
        return self._parameters[self._key(index)]

    def __setitem__(self, index: int, param: Parameter) -> None:
        self.register_parameter(self._key(index), param)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._parameters.values()))

    def append(self, param: Parameter) -> ParameterList:
        """Add ``param`` at the end."""
        self.register_parameter(str(len(self)), param)
        return self

    def extend(self, params: Iterable[Parameter]) -> ParameterList:
        """Add each of ``params`` at the end."""
        for p in params:
            self.append(p)
        return self


class ParameterDict(Module):
    """A dict of parameters by name, registered, in insertion order.

    Examples:
        >>> pd = nn.ParameterDict({"w": nn.Parameter(flow.ones(2))})
        >>> list(pd.keys()), "w" in pd
        (['w'], True)
    """

    def __init__(self, values: Mapping[str, Parameter] | Iterable[tuple[str, Parameter]]
                 | None = None) -> None:
        super().__init__()
        if values is not None:
            self.update(values)

    def __getitem__(self, key: str) -> Any:
        return self._parameters[key]

    def __setitem__(self, key: str, param: Parameter) -> None:
        self.register_parameter(key, param)

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._parameters))

    def __contains__(self, key: object) -> bool:
        return key in self._parameters

    def keys(self) -> list[str]:
        """The names."""
        return list(self._parameters)

    def values(self) -> list[Any]:
        """The parameters."""
        return list(self._parameters.values())

    def items(self) -> list[tuple[str, Any]]:
        """``(name, parameter)`` pairs."""
        return list(self._parameters.items())

    def update(self, values: Mapping[str, Parameter] | Iterable[tuple[str, Parameter]]) -> None:
        """Add or replace parameters from a mapping or from ``(name, parameter)`` pairs."""
        pairs = values.items() if isinstance(values, Mapping) else values
        for key, param in pairs:
            self[key] = param
