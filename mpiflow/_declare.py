"""Generate the declarations of Tensor's bound methods, for mypy and readers.

The modules that implement Tensor methods bind them at import (:func:`mpiflow.tensors.tensor.bind`),
so the class never imports the layers above it. This tool imports the whole package, reads the
merged bind tables, and writes one typed declaration per method into the class ``BoundMethods``
of ``tensors/declared.py``, a generated module that ``Tensor`` derives from for type checkers only
(at run time ``Tensor`` derives from ``object``). A test fails when the module is stale.

Signatures are those of the bound functions, their first parameter becoming ``self``; ``Tensor``
is spelled ``Self`` (so the module need not import the class that derives from it). A type that
``tensors/tensor.py`` cannot name without importing an upper layer (or forming an import cycle) is
declared ``Any``.

Usage: ``python -m mpiflow._declare`` rewrites the module; ``--check`` only compares.
"""

from __future__ import annotations

import builtins
import collections.abc
import inspect
import sys
import textwrap
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mpiflow  # noqa: F401 - every module that binds methods
from mpiflow.tensors import tensor as _tensor

__all__ = ["PATH", "check", "render", "write"]

#: The generated module.
PATH = Path(_tensor.__file__).with_name("declared.py")
_INDENT = " " * 4
_WIDTH = 100
_USED: set[str] = set()  # names of tensor.py's namespace that the rendered block uses
_SIMPLE_DEFAULTS = (type(None), bool, int, float, str)
# Comparisons return tensors, not the bool of object's signature.
_OVERRIDES = {"__eq__", "__ne__"}


def _shadowed() -> set[str]:
    """Names that, inside the class body, mean a Tensor attribute rather than a module global."""
    return set(vars(_tensor.Tensor)) | set(_tensor.bound_methods)


def _name_of(obj: Any, shadowed: set[str]) -> str:
    """How the generated module spells the type ``obj`` in the class body, or ``Any``."""
    if obj is _tensor.Tensor:
        return "Self"
    label = str(getattr(obj, "__name__", ""))
    if label and getattr(builtins, label, None) is obj:
        if label in shadowed:
            _USED.add("builtins")
            return f"builtins.{label}"
        return label
    for name, value in vars(_tensor).items():
        if value is obj and name not in shadowed and _importable(value):
            _USED.add(name)
            return name
    for name, value in vars(_tensor).items():
        if isinstance(value, types.ModuleType) and name not in shadowed and label and \
                getattr(value, label, None) is obj:
            _USED.add(name)
            return f"{name}.{label}"
    return "Any"


def _importable(value: Any) -> bool:
    """Whether the generated module may import ``value`` (not defined in ``tensors/tensor.py``)."""
    return isinstance(value, types.ModuleType) or \
        getattr(value, "__module__", _tensor.__name__) != _tensor.__name__


def _import(name: str) -> str:
    """The import that binds ``name`` as ``tensors/tensor.py`` binds it."""
    value = vars(_tensor)[name]
    if isinstance(value, types.ModuleType):
        full = value.__name__
        if full == name:
            return f"import {name}"
        parent, _, last = full.rpartition(".")
        return f"from {parent} import {last}" + ("" if last == name else f" as {name}")
    real = value.__qualname__
    return f"from {value.__module__} import {real}" + ("" if real == name else f" as {name}")


def _format(tp: Any, shadowed: set[str]) -> str:
    """The annotation ``tp`` (an evaluated type) as source text valid in ``tensors/tensor.py``."""
    if tp is None or tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    if tp is Ellipsis:
        return "..."
    origin: Any = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or isinstance(tp, types.UnionType):
        parts = [_format(a, shadowed) for a in args]
        return "Any" if "Any" in parts else " | ".join(parts)
    if origin is collections.abc.Callable:
        *params, result = args
        inner = "..." if params == [Ellipsis] else \
            "[" + ", ".join(_format(p, shadowed) for p in params) + "]"
        return f"{_name_of(origin, shadowed)}[{inner}, {_format(result, shadowed)}]"
    if origin is not None:
        head = _name_of(origin, shadowed)
        if head == "Any":
            return "Any"
        return f"{head}[" + ", ".join(_format(a, shadowed) for a in args) + "]"
    if isinstance(tp, type):
        return _name_of(tp, shadowed)
    return "Any"  # TypeVars, literals and forward references that do not resolve


def _annotation(fn: Callable[..., Any], annotation: Any, shadowed: set[str]) -> str:
    if annotation is inspect.Parameter.empty:
        return "Any"
    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, getattr(fn, "__globals__", {}))
        except Exception:  # a name imported only for type checking
            return "Any"
    return _format(annotation, shadowed)


def _default(value: Any) -> str:
    if isinstance(value, str) and value.isidentifier():
        return f'"{value}"'
    if type(value) in _SIMPLE_DEFAULTS and not isinstance(value, str):
        return repr(value)
    return "..."


def _parameters(fn: Callable[..., Any], shadowed: set[str]) -> list[str]:
    """The parameters of ``fn`` as source text, the first one as ``self``."""
    params = list(inspect.signature(fn).parameters.values())
    out = ["self"]
    star_done = slash_pending = False
    kinds = inspect.Parameter
    if params and params[0].kind is kinds.POSITIONAL_ONLY:
        slash_pending = True
    for p in params[1:]:
        if slash_pending and p.kind is not kinds.POSITIONAL_ONLY:
            out.append("/")
            slash_pending = False
        text = p.name
        if p.kind is kinds.VAR_POSITIONAL:
            text, star_done = "*" + p.name, True
        elif p.kind is kinds.VAR_KEYWORD:
            text = "**" + p.name
        elif p.kind is kinds.KEYWORD_ONLY and not star_done:
            out.append("*")
            star_done = True
        text += f": {_annotation(fn, p.annotation, shadowed)}"
        if p.default is not kinds.empty:
            text += f" = {_default(p.default)}"
        out.append(text)
    if slash_pending:
        out.append("/")
    return out


def _wrap(head: str, parts: list[str], tail: str) -> list[str]:
    """``head(part, part, ...)tail`` in lines of at most _WIDTH, continued under the paren."""
    lines: list[str] = []
    line = head + "("
    hang = " " * len(line)
    for i, part in enumerate(parts):
        piece = part + (", " if i < len(parts) - 1 else ")" + tail)
        if len(line) + len(piece.rstrip()) > _WIDTH and line.strip() and not line.endswith("("):
            lines.append(line.rstrip())
            line = hang
        line += piece
    lines.append(line)
    return lines


def _summary(fn: Any) -> list[str]:
    """The first paragraph of ``fn``'s docstring as the body of a declaration (or ``...``)."""
    doc = inspect.getdoc(fn)
    body = _INDENT + "    "
    if not doc:
        return [body + "..."]
    text = " ".join(doc.split("\n\n", 1)[0].split())
    quote = 'r"""' if "\\" in text else '"""'
    lines = textwrap.wrap(quote + text + '"""', _WIDTH - len(body), break_long_words=False,
                          break_on_hyphens=False)
    return [body + line for line in lines]


def _declaration(name: str, value: Any, shadowed: set[str]) -> list[str]:
    if isinstance(value, property):
        assert value.fget is not None
        result = _annotation(value.fget, inspect.signature(value.fget).return_annotation,
                             shadowed)
        return [f"{_INDENT}@property", f"{_INDENT}def {name}(self) -> {result}:",
                *_summary(value.fget)]
    result = _annotation(value, inspect.signature(value).return_annotation, shadowed)
    ignore = "  # type: ignore[override]" if name in _OVERRIDES else ""
    return [*_wrap(f"{_INDENT}def {name}", _parameters(value, shadowed),
                   f" -> {result}:{ignore}"), *_summary(value)]


def _source_module(value: Any) -> str:
    fn = value.fget if isinstance(value, property) else value
    return str(getattr(fn, "__module__", "?"))


_HEAD = '''# mypy: disable-error-code="empty-body"
"""Typed declarations of the methods bound to Tensor by other modules; generated.

``python -m mpiflow._declare`` writes this module from the bind tables (a test fails when it is
stale). ``Tensor`` derives from :class:`BoundMethods` for type checkers only; at run time the
methods are attached by :func:`mpiflow.tensors.tensor.bind` and this module is not imported.
The bodies are docstrings only (hence the empty-body switch above).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

'''


def render() -> str:
    """The generated module's text."""
    _USED.clear()
    shadowed = _shadowed()
    table = _tensor.bound_methods
    body = ["class BoundMethods:",
            f'{_INDENT}"""The methods bound to Tensor by the layers above it, declared."""']
    for module in sorted({_source_module(v) for v in table.values()}):
        body.append("")
        body.append(f"{_INDENT}# {module}")
        for name in sorted(n for n, v in table.items() if _source_module(v) == module):
            body.extend(_declaration(name, table[name], shadowed))
    imports = {_import(name) for name in _USED} | {"from typing import Any, Self"}
    sections: dict[int, list[str]] = {}
    for line in imports:
        top = line.split()[1].split(".")[0]
        sections.setdefault(0 if top in sys.stdlib_module_names else
                            2 if top == "mpiflow" else 1, []).append(line)
    lines: list[str] = []
    for key in sorted(sections):
        group = sorted(sections[key], key=lambda x: (x.startswith("from "), x.split()[1]))
        lines.extend([*([""] if lines else []), *group])
    head = _HEAD + "if TYPE_CHECKING:\n" + "".join(f"{_INDENT}{line}\n" if line else "\n"
                                                  for line in lines)
    return head + "\n__all__ = [\"BoundMethods\"]\n\n\n" + "\n".join(body) + "\n"


def check() -> bool:
    """Whether ``tensors/declared.py`` holds the module that :func:`render` makes now."""
    return PATH.exists() and PATH.read_text() == render()


def write() -> None:
    """Rewrite ``tensors/declared.py``."""
    PATH.write_text(render())


def main(argv: list[str]) -> int:
    if "--check" in argv:
        if check():
            return 0
        print("the Tensor method declarations are stale: run python -m mpiflow._declare",
              file=sys.stderr)
        return 1
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
