"""The op sweep: every registered op, on every layout its rule accepts, against its local result.

As PyTorch DTensor's op sweep (``test_dtensor_ops.py``): for every op of the registry
(:mod:`mpiflow.ops.registry`), every declared dtype and every sample input
(:mod:`mpiflow.ops.samples`), and every layout signature the op's layout rule gives on a 1-D
placement of all ranks (B -> B included), the inputs are laid out as the signature says and the
op runs; it must choose that signature (its output has the signature's layout) and run it with
no communication, its logical value must equal the op's result on local tensors of the same
values, and the gradients of its floating inputs for a random cotangent must equal the local
ones. Each sample also runs once from inputs the engine must redistribute (all ``S(0)``, and
all ``P``), which checks that the gradient rules do not rely on the layout the kernel saw.
Local-only ops must refuse global tensors. The pure tests check the registry itself: every
OpDef of the package is registered, and every op's gradient rule agrees with finite
differences on local tensors.

Run at 1 to 4 ranks (``mpi``): 3 ranks split the uneven sample sizes unevenly, 4 leave some
shards empty.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives
from mpiflow.layouts.sbp import Broadcast, Partial, ReduceOp, SbpParallel, Split
from mpiflow.ops import registry
from mpiflow.ops.engine import OpDef, apply, apply_multi
from mpiflow.ops.samples import Sample

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
MESH = tuple(ALL.mesh_shape)
B = Broadcast()
INFOS = {info.name: info for info in registry.infos()}


# -- values and layouts ------------------------------------------------------------------------
def tolerance(dtypes: list[numpy.dtype]) -> tuple[float, float] | None:
    """(rtol, atol) for results computed from ``dtypes`` (the output's and the inputs'): that
    of the least precise floating one (partial sums of float32 parts cast to float64 differ
    from the cast of their float32 sum by its rounding); None: exactly equal."""
    if dtypes[0].kind not in "fc":
        return None
    single = any((d.kind == "f" and d.itemsize <= 4) or d == numpy.complex64 for d in dtypes)
    return (1e-4, 1e-4) if single else (1e-9, 1e-9)


def check_equal(got: numpy.ndarray, want: numpy.ndarray, what: str,
                inputs: list[numpy.dtype] | None = None) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    tol = tolerance([want.dtype, *(inputs or [])])
    if tol is None:
        assert_array_equal(got, want, err_msg=what)
    else:
        assert_allclose(got, want, rtol=tol[0], atol=tol[1], err_msg=what)


def _parts(value: numpy.ndarray, op: ReduceOp) -> list[numpy.ndarray]:
    """One part per rank whose reduction by ``op`` is ``value`` (the same on every rank)."""
    rng = numpy.random.default_rng(11)
    parts = []
    for _ in range(SIZE - 1):
        if value.dtype.kind == "b":  # False leaves an or (max, sum) alone, True an and (min)
            parts.append(numpy.full(value.shape, op is ReduceOp.MIN))
        elif op is ReduceOp.SUM:
            parts.append(rng.integers(-4, 5, size=value.shape).astype(value.dtype))
        else:  # below (max) or above (min) the value: rank 0's part wins
            step = rng.integers(1, 5, size=value.shape).astype(value.dtype)
            parts.append(value - step if op is ReduceOp.MAX else value + step)
    if op is ReduceOp.SUM and value.dtype.kind != "b":
        return [value - sum(parts, numpy.zeros_like(value)), *parts]
    return [value, *parts]


def lay_out(value: numpy.ndarray, sbp: SbpParallel) -> flow.Tensor:
    """A global tensor of ``value`` on all ranks; a partial one has different parts per rank."""
    if isinstance(sbp, Partial):
        part = _parts(value, sbp.op)[RANK]
        return flow.tensor(part).to_global(ALL, sbp)
    if value.ndim == 0:  # built as one element: a 0-d value would get a (1,) shard
        return flow.tensor(value.reshape(1), placement=ALL, sbp=sbp).reshape(())
    return flow.tensor(value, placement=ALL, sbp=sbp)


def differentiable(op: OpDef, sample: Sample, value: Any) -> bool:
    """Whether the sweep asks for the gradient of operand ``value``."""
    return (op.grad is not None and sample.grad and isinstance(value, numpy.ndarray)
            and value.dtype.kind == "f")


def cotangent(out: flow.Tensor) -> numpy.ndarray:
    return numpy.random.default_rng(5).standard_normal(tuple(out.shape)).astype(
        out.dtype.numpy)


# -- one run -----------------------------------------------------------------------------------
def run(info: registry.OpInfo, sample: Sample, sbps: tuple[SbpParallel, ...],
        expect: Any, what: str, collective: bool = False) -> None:
    """Run ``info``'s op on ``sample`` laid out by ``sbps`` and compare it with the local op.

    ``expect``: the output layout the signature promises (a tuple: one per output); the op
    must then also run without communication (``collective``: without redistributing its
    inputs, its kernel's own algorithm communicating). None: inputs the engine
    redistributes as it chooses.
    """
    op = info.op
    inputs: list[Any] = []
    local: list[Any] = []
    for value, sbp in zip(sample.operands, sbps, strict=True):
        if not isinstance(value, numpy.ndarray):
            inputs.append(value)
            local.append(value)
            continue
        t = lay_out(value, sbp)
        whole = t.numpy()  # the logical value as laid out (collective)
        if differentiable(op, sample, value):
            t = t.detach().requires_grad_()
        inputs.append(t)
        local.append(flow.tensor(whole, requires_grad=t.requires_grad))
    attrs = dict(sample.attrs)
    local_attrs = dict(sample.attrs)
    for name, value in sample.tensor_attrs.items():
        attrs[name] = flow.tensor(value, placement=ALL, sbp=(B,) * len(MESH))
        local_attrs[name] = flow.tensor(value)

    call = apply_multi if op.outputs > 1 else apply
    with count_collectives() as calls, counting_redistributions() as moves:
        out: Any = call(op, *inputs, **attrs)
    want: Any = call(op, *local, **local_attrs)
    # a signature's output: one layout for every output, or one per output (a QR's Q and R)
    expects = (list(expect) if isinstance(expect, tuple)
               else [expect] * (op.outputs if op.outputs > 1 else 1))
    if op.outputs > 1:  # the first output is checked like any; the others' values below
        for k, (o, w) in enumerate(zip(out[1:], want[1:]), 1):
            if expect is not None:
                assert o.sbp == (expects[k],), f"{what}: output {k} laid out {o.sbp}"
            check_equal(o.numpy(), w.numpy(), f"{what}: output {k}")
        out, want = out[0], want[0]
    expect = expects[0]
    if expect is not None:
        assert out.sbp == (expect,), f"{what}: chose the layout {out.sbp}, not {expect}"
        if collective:
            assert not moves, f"{what}: redistributed its inputs for a collective signature"
        else:
            assert not calls, f"{what}: communicated ({dict(calls)}) for a signature it accepts"
    got, expected = out.numpy(), want.numpy()
    if sample.canonical is not None:
        got, expected = sample.canonical(got), sample.canonical(expected)
    dtypes = [v.dtype for v in sample.operands if isinstance(v, numpy.ndarray)]
    check_equal(got, expected, f"{what}: value", dtypes)

    if not out.requires_grad:
        return
    assert want.requires_grad, f"{what}: the global output requires grad, the local one not"
    cot = cotangent(out)
    # the gradient of a split output comes split, that of a partial one broadcast
    out.backward(lay_out(cot, expect if isinstance(expect, Split) else B))
    want.backward(flow.tensor(cot))
    for i, (g, loc) in enumerate(zip(inputs, local, strict=True)):
        if not isinstance(g, flow.Tensor) or not g.requires_grad:
            continue
        assert (g.grad is None) == (loc.grad is None), f"{what}: gradient of input {i}"
        if g.grad is not None:
            assert g.grad.sbp == g.sbp, f"{what}: gradient of input {i} laid out {g.grad.sbp}"
            check_equal(g.grad.numpy(), loc.grad.numpy(), f"{what}: gradient of input {i}",
                        dtypes)


def signatures(info: registry.OpInfo, sample: Sample
               ) -> list[tuple[tuple[tuple[Any, ...], Any], bool]]:
    """The op's signatures for ``sample`` on this placement, B -> B last, each with whether
    it is collective; those that give a Python number anything but B are left out (the engine
    never chooses them), and collective ones at one rank (there they are local)."""
    shapes = [numpy.shape(v) for v in sample.operands]
    sigs = [(s, False) for s in info.op.layouts(*shapes, **sample.attrs)]
    if info.op.collective is not None and SIZE > 1:
        sigs += [(s, True) for s in info.op.collective(*shapes, **sample.attrs)]
    sigs.append((((B,) * len(shapes), B), False))
    return [(s, c) for s, c in sigs
            if all(isinstance(v, numpy.ndarray) or p == B for v, p in zip(sample.operands, s[0]))]


@contextlib.contextmanager
def counting_redistributions() -> Iterator[list[Any]]:
    """Record every input redistribution the engine makes inside the block."""
    from mpiflow.boxing import execute

    moves: list[Any] = []
    original = execute.redistribute

    def counted(*args: Any, **kwargs: Any) -> Any:
        moves.append(args[2:4])
        return original(*args, **kwargs)

    execute.redistribute = counted
    try:
        yield moves
    finally:
        execute.redistribute = original


def redistributed(sample: Sample) -> Iterator[tuple[SbpParallel, ...]]:
    """Input layouts that the engine must convert: every tensor ``S(0)``; every tensor ``P``."""
    arrays = [v for v in sample.operands if isinstance(v, numpy.ndarray)]
    yield tuple(Split(0) if isinstance(v, numpy.ndarray) and v.ndim else B
                for v in sample.operands)
    if all(v.dtype.kind in "iuf" for v in arrays):
        yield tuple(Partial() if isinstance(v, numpy.ndarray) else B for v in sample.operands)


# -- the sweep ---------------------------------------------------------------------------------
def swept_dtypes(dtypes: Sequence[Any]) -> list[Any]:
    """Every dtype at one rank (the kernels); at 2-4 ranks one dtype per rank count, a
    different one at each (``SIZE % len``), so that every dtype meets uneven and empty shards
    and 2-D meshes in some run, while the layouts, which no dtype changes, are swept at each
    rank count once (the suite's time at 3 and 4 ranks on CI's two cores)."""
    if SIZE == 1 or len(dtypes) <= 1:
        return list(dtypes)
    return [dtypes[SIZE % len(dtypes)]]


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(n for n, i in INFOS.items() if i.unsampled is None))
def test_op_on_every_layout_it_accepts_matches_the_local_op(name: str) -> None:
    info = INFOS[name]
    for dtype in swept_dtypes(info.dtypes):
        for k, sample in enumerate(info.samples(dtype, MESH)):
            label = f"{name}[{dtype}, sample {k}]"
            if info.op.local_only:
                inputs = [lay_out(v, B) if isinstance(v, numpy.ndarray) else v
                          for v in sample.operands]
                with pytest.raises(TypeError, match="local-only"):
                    apply(info.op, *inputs, **sample.attrs)
                continue
            for (ins, out), collective in signatures(info, sample):
                text = registry.signature_text((ins, out))
                run(info, sample, ins, out, f"{label} {text}", collective)
            for ins in redistributed(sample):
                run(info, sample, ins, None, f"{label} from ({', '.join(map(str, ins))})")


def test_every_op_is_sampled_or_says_why_not() -> None:
    unexplained = [n for n, i in INFOS.items() if i.unsampled is None and not i.dtypes]
    assert not unexplained
    for name, info in INFOS.items():
        if info.unsampled is None:
            for dtype in info.dtypes:
                assert info.samples(dtype, MESH), f"{name} has no samples for {dtype}"


def _opdefs_in_modules() -> list[tuple[str, str, OpDef]]:
    """Every OpDef bound in a module of the package (directly or in a dict of ops)."""
    found = []
    for module_name, module in list(sys.modules.items()):
        if not (module_name == "mpiflow" or module_name.startswith("mpiflow.")):
            continue
        for attr, value in list(vars(module).items()):
            values = value.values() if isinstance(value, dict) else [value]
            found += [(module_name, attr, v) for v in values if isinstance(v, OpDef)]
    return found


def test_every_opdef_of_the_package_is_registered_under_its_name() -> None:
    found = _opdefs_in_modules()
    assert len({id(op) for _, _, op in found}) >= 80  # the scan sees the ops modules
    ops = registry.registered()
    for module, attr, op in found:
        assert ops.get(op.name) is op, f"{module}.{attr} ({op.name!r}) is not the registered op"
    modules = {module for module, _, _ in found}
    assert {"mpiflow.ops.pointwise_defs", "mpiflow.ops.reduction",
            "mpiflow.nn.embedding_lookup"} <= modules


def test_a_second_op_of_a_known_name_is_refused() -> None:
    add = registry.registered()["add"]
    with pytest.raises(ValueError, match="two ops are named 'add'"):
        OpDef("add", add.kernel, add.shape, add.layouts)
    assert registry.registered()["add"] is add


def test_the_table_command_lists_every_op() -> None:
    from mpiflow.__main__ import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["ops"]) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["op", "grad", "dtypes"]
    names = {line.split()[0] for line in lines[1:] if not line.startswith(" ")}
    assert names == set(INFOS)
    at = next(i for i, line in enumerate(lines) if line.startswith("matmul "))
    row = lines[at] + " ".join(line.strip() for line in lines[at + 1:at + 4]
                               if line.startswith(" "))
    assert "yes" in row and "float64 float32 int64" in row and "(S(1), S(0)) -> P" in row


def _gradcheck_cases() -> list[tuple[str, int]]:
    return [(name, k) for name, info in sorted(INFOS.items())
            if info.has_grad and numpy.dtype("float64") in info.dtypes
            for k in range(len(info.samples(numpy.dtype("float64"), (1,))))]


@pytest.mark.parametrize(("name", "k"), _gradcheck_cases())
def test_gradient_rule_matches_finite_differences(name: str, k: int) -> None:
    info = INFOS[name]
    sample = info.samples(numpy.dtype("float64"), (1,))[k]
    if not sample.grad:
        pytest.skip("the sample asks for no gradient")
    args = [flow.tensor(v, requires_grad=differentiable(info.op, sample, v))
            if isinstance(v, numpy.ndarray) else v for v in sample.operands]
    attrs = {**sample.attrs, **{n: flow.tensor(v) for n, v in sample.tensor_attrs.items()}}
    def first(*xs: Any) -> flow.Tensor:  # an op of several outputs: the differentiable one
        if info.op.outputs > 1:
            return apply_multi(info.op, *xs, **attrs)[0]
        return apply(info.op, *xs, **attrs)

    if first(*args).dtype != flow.float64:
        pytest.skip("central differences need a float64 output (a cast to float32 has none)")
    assert flow.autograd.gradcheck(first, args)
