"""The op registry: every :class:`~mpiflow.ops.engine.OpDef` by name, and the table of them.

An OpDef registers itself when it is made (``OpDef.__post_init__`` calls :func:`register`), in
whichever layer defines it (the ops, or ``nn`` for its fused ops), so no op can be left out. Two
OpDefs of one name are an error at import. :func:`infos` joins each registered op with its
declared dtypes and sample inputs (:mod:`mpiflow.ops.samples`, as PyTorch's OpInfo), which the
op sweep (``tests/ops/test_sweep.py``) runs on every layout signature the op's rule accepts;
``python -m mpiflow ops`` prints the table (:func:`format_table`).

Examples:
    >>> info = lookup("add")
    >>> info.name, [str(d) for d in info.dtypes], info.has_grad
    ('add', ['float64', 'float32', 'int64'], True)
    >>> [signature_text(s) for s in info.signatures()]
    ['(S(0), S(0)) -> S(0)', '(S(1), S(1)) -> S(1)', '(P, P) -> P', '(B, B) -> B']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy

from ..layouts.sbp import Broadcast

if TYPE_CHECKING:
    from .engine import OpDef, Signature
    from .samples import Sample

__all__ = ["OpInfo", "format_table", "infos", "lookup", "register", "registered",
           "signature_text"]

_OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> None:
    """Enter ``op`` in the registry under its name (OpDef does, when it is made).

    Raises:
        ValueError: another op already has the name.
    """
    known = _OPS.get(op.name)
    if known is not None and known is not op:
        raise ValueError(f"two ops are named {op.name!r}: op names must be unique (the first "
                         f"has kernel {known.kernel.__qualname__}, the second "
                         f"{op.kernel.__qualname__})")
    _OPS[op.name] = op


def registered() -> dict[str, OpDef]:
    """Every registered op, by name (a copy, in registration order).

    Examples:
        >>> registered()["matmul"].name
        'matmul'
    """
    return dict(_OPS)


@dataclass(frozen=True)
class OpInfo:
    """A registered op with what the table and the sweep need to know of it.

    Attributes:
        op: the op.
        dtypes: the input dtypes it is declared to accept (the sweep runs each); the first is
            the one the table's signatures are computed for.
        samples: ``samples(dtype, mesh)`` -> sample inputs (``mesh``: the placement's mesh
            shape, which some layout rules take as an attribute); empty where the op has no
            samples, :attr:`unsampled` then says why.
        unsampled: why the op has no sample inputs, or None.
    """

    op: OpDef
    dtypes: tuple[numpy.dtype, ...]
    samples: Callable[[numpy.dtype, tuple[int, ...]], list[Sample]]
    unsampled: str | None = None

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def has_grad(self) -> bool:
        return self.op.grad is not None

    def signatures(self, mesh: tuple[int, ...] = (2,)) -> list[Signature]:
        """The layout signatures the op's rule gives for its first sample (one mesh axis of
        ``mesh``), B -> B last; none for a local-only op or one without samples."""
        if self.op.local_only or not self.dtypes:
            return []
        samples = self.samples(self.dtypes[0], mesh)
        if not samples:
            return []
        sample = samples[0]
        shapes = [numpy.shape(v) for v in sample.operands]
        sigs = list(self.op.layouts(*shapes, **sample.attrs))
        b = Broadcast()
        return [*sigs, ((b,) * len(shapes), b)]

    def collective_signatures(self, mesh: tuple[int, ...] = (2,)) -> list[Signature]:
        """The signatures its kernel computes with a distributed algorithm (``collective``),
        for its first sample; none where it has none."""
        if self.op.collective is None or self.op.local_only or not self.dtypes:
            return []
        samples = self.samples(self.dtypes[0], mesh)
        if not samples:
            return []
        shapes = [numpy.shape(v) for v in samples[0].operands]
        return list(self.op.collective(*shapes, **samples[0].attrs))


def signature_text(signature: Signature) -> str:
    """``(S(0), B) -> S(0)``; one input is written without parentheses: ``S(1) -> S(0)``.

    Examples:
        >>> from mpiflow.sbp import split, partial_sum
        >>> signature_text(((split(1),), partial_sum))
        'S(1) -> P'
        >>> signature_text(((split(0),), (split(0), flow.sbp.broadcast)))
        'S(0) -> (S(0), B)'
    """
    ins, out = signature
    text = str(ins[0]) if len(ins) == 1 else f"({', '.join(map(str, ins))})"
    if isinstance(out, tuple):  # one layout per output (a QR's Q and R)
        return f"{text} -> ({', '.join(map(str, out))})"
    return f"{text} -> {out}"


def infos() -> list[OpInfo]:
    """Every registered op with its declared dtypes and samples, in registration order.

    Raises:
        LookupError: an op has neither samples nor a reason why not, or the samples table
            names an op that is not registered.
    """
    from .samples import SAMPLES, UNSAMPLED

    stale = sorted(set(SAMPLES) - set(_OPS))
    if stale:
        raise LookupError(f"the samples table names ops that are not registered: {stale}")
    out = []
    for name, op in _OPS.items():
        if name in SAMPLES:
            dtypes, samples = SAMPLES[name]
            out.append(OpInfo(op, tuple(numpy.dtype(d) for d in dtypes), samples))
        elif name in UNSAMPLED:
            out.append(OpInfo(op, (), _no_samples, UNSAMPLED[name]))
        else:
            raise LookupError(f"op {name!r} has no sample inputs in mpiflow/ops/samples.py and "
                              "is not listed in its UNSAMPLED with a reason")
    return out


def _no_samples(dtype: numpy.dtype, mesh: tuple[int, ...]) -> list[Sample]:
    return []


def lookup(name: str) -> OpInfo:
    """The :class:`OpInfo` of the op called ``name``.

    Raises:
        KeyError: no op has that name.
    """
    for info in infos():
        if info.name == name:
            return info
    raise KeyError(f"no op is named {name!r}; registered: {', '.join(sorted(_OPS))}")


def _dtypes_text(dtypes: Sequence[numpy.dtype]) -> str:
    return " ".join(str(d) for d in dtypes) or "-"


def _layouts_cells(info: OpInfo) -> list[str]:
    if info.op.local_only:
        return ["local tensors only"]
    if info.unsampled is not None:
        return [f"(not sampled: {info.unsampled})"]
    return ([signature_text(s) for s in info.signatures()]
            + [f"{signature_text(s)} (collective)" for s in info.collective_signatures()])


def _wrap(cells: Sequence[str], width: int) -> list[str]:
    """``cells`` joined by ", " into lines of at most ``width`` (a cell is never cut)."""
    lines = [""]
    for cell in cells:
        if lines[-1] and len(lines[-1]) + 2 + len(cell) > width:
            lines[-1] += ","
            lines.append(cell)
        else:
            lines[-1] = f"{lines[-1]}, {cell}" if lines[-1] else cell
    return lines


def format_table(width: int = 100) -> str:
    """The registry as a text table: op, dtypes, layout signatures (one mesh axis, for the
    op's first sample), and whether it has a gradient rule; long cells wrap.

    Examples:
        >>> print(format_table().splitlines()[0])  # doctest: +NORMALIZE_WHITESPACE
        op  grad  dtypes  layout signatures (first sample, one mesh axis)
    """
    rows = [(i.name, "yes" if i.has_grad else "-", _dtypes_text(i.dtypes), _layouts_cells(i))
            for i in infos()]
    head = ("op", "grad", "dtypes", "layout signatures (first sample, one mesh axis)")
    w_name = max(len(head[0]), *(len(r[0]) for r in rows))
    w_grad = len(head[1])
    w_dtype = max(len(head[2]), *(len(r[2]) for r in rows))
    indent = w_name + w_grad + w_dtype + 6
    lines = [f"{head[0]:<{w_name}}  {head[1]:<{w_grad}}  {head[2]:<{w_dtype}}  {head[3]}"]
    for name, grad, dtypes, layouts in rows:
        wrapped = _wrap(layouts, max(30, width - indent))
        lines.append(f"{name:<{w_name}}  {grad:<{w_grad}}  {dtypes:<{w_dtype}}  {wrapped[0]}")
        lines += [" " * indent + more for more in wrapped[1:]]
    return "\n".join(lines)
