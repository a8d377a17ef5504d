"""diff, roll and pad (mpiflow.ops.shifts) against torch on the whole value, split along the
shifted dim and another, broadcast and partial, at 1-4 ranks; one all-to-all along a split dim."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
import pytest
import torch
import torch.nn.functional as TF
from global_helpers import S0, S1, SIZE, B, N, P, full, make
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
import mpiflow.nn.functional as F
from mpiflow.communication import count_collectives

S2 = flow.sbp.split(2)
CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "roll": (lambda x: flow.roll(x, 2, 1), lambda t: torch.roll(t, 2, 1)),
    "roll_dims": (lambda x: x.roll((-1, 4), (1, 2)), lambda t: t.roll((-1, 4), (1, 2))),
    "roll_flat": (lambda x: flow.roll(x, 5), lambda t: torch.roll(t, 5)),
    "diff": (lambda x: flow.diff(x, dim=1), lambda t: torch.diff(t, dim=1)),
    "diff_3": (lambda x: x.diff(3, 1), lambda t: t.diff(3, 1)),
    "diff_long": (lambda x: flow.diff(x, 2 * SIZE + 3, 1),
                  lambda t: torch.diff(t, 2 * SIZE + 3, 1)),
    "pad": (lambda x: F.pad(x, (1, 2, 3, 1)), lambda t: TF.pad(t, (1, 2, 3, 1))),
    "pad_crop": (lambda x: F.pad(x, (0, 0, -2, 3), value=2.5),
                 lambda t: TF.pad(t, (0, 0, -2, 3), value=2.5)),
    "reflect": (lambda x: F.pad(x, (1, 2, 3, 1), mode="reflect"),
                lambda t: TF.pad(t, (1, 2, 3, 1), mode="reflect")),
    "replicate": (lambda x: F.pad(x, (2, 0, 1, 4), mode="replicate"),
                  lambda t: TF.pad(t, (2, 0, 1, 4), mode="replicate")),
    "circular": (lambda x: F.pad(x, (1, 1, N, 2), mode="circular"),
                 lambda t: TF.pad(t, (1, 1, N, 2), mode="circular")),
}


@pytest.mark.mpi
@pytest.mark.parametrize("case", sorted(CASES))
def test_shifts_match_torch(case: str) -> None:
    ours, theirs = CASES[case]
    a = full((2, N, 4))
    for sbp in (S1, S0, S2, B, P):
        x = make(a, sbp).requires_grad_()
        t = torch.tensor(a, requires_grad=True)
        with count_collectives() as calls:
            got = ours(x)
        want = theirs(t)
        assert_array_equal(got.numpy(), want.detach().numpy(), err_msg=str(sbp))
        if sbp == S1 and case != "roll_flat":   # along the split dim: split, one all-to-all
            assert got.sbp == (S1,)
            assert set(calls) <= {"all_to_all_v"} and sum(calls.values()) <= 1, calls
        elif sbp == S0 and case != "roll_flat":  # (the flat roll moves rows of dim 0)
            assert got.sbp == (S0,) and not calls, calls
        cotangent = numpy.random.default_rng(5).standard_normal(tuple(want.shape))
        got.backward(make(cotangent, B))
        want.backward(torch.tensor(cotangent))
        assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.mpi
def test_split_results_are_balanced_and_empty_shards_work() -> None:
    a = numpy.arange(float(max(2, SIZE - 1)))    # 4 ranks: empty shards
    x = make(a, S0)
    for got, want in ((flow.diff(x), numpy.diff(a)), (flow.roll(x, -1), numpy.roll(a, -1)),
                      (F.pad(x.reshape(1, -1), (3, 2), mode="replicate"),
                       numpy.pad(a[None], ((0, 0), (3, 2)), mode="edge"))):
        assert_array_equal(got.numpy(), want)
        n = got.shape[-1]
        assert got.to_local().shape[-1] == len(numpy.array_split(numpy.arange(n), SIZE)[
            flow.env.get_rank()])


@pytest.mark.mpi
def test_diff_with_prepend_and_append_split_alike_or_whole() -> None:
    a, before, after = full((N, 3)), full((2, 3), seed=1), full((1, 3), seed=2)
    want = torch.diff(torch.tensor(a), 2, 0, torch.tensor(before), torch.tensor(after))
    for sbps in ((S0, B, B), (S0, S0, S0), (S1, S1, S1), (P, P, P)):
        x, p, q = (make(v, s).requires_grad_() for v, s in zip((a, before, after), sbps))
        got = flow.diff(x, 2, 0, p, q)
        assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
        got.sum().backward()
        t = [torch.tensor(v, requires_grad=True) for v in (a, before, after)]
        torch.diff(t[0], 2, 0, t[1], t[2]).sum().backward()
        for mine, theirs in zip((x, p, q), t):
            assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), atol=1e-12)


@pytest.mark.mpi
def test_bad_input_is_refused_on_every_rank() -> None:
    x = make(full((2, N, 4)), S1)
    with pytest.raises(NotImplementedError, match="mode 'wrap'"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(RuntimeError, match="Padding size should be less"):
        F.pad(x, (4, 0), mode="reflect")
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 1D"):
        F.pad(make(full((N,)), S0), (1, 1), mode="circular")
    with pytest.raises(RuntimeError, match="negative output size"):
        F.pad(x, (0, 0, -N, -1))
    with pytest.raises(RuntimeError, match="same dimension"):
        flow.diff(x, prepend=make(full((N,)), S0))
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        flow.roll(x, (1, 2), 0)


@pytest.mark.mpi(min_size=4)
def test_two_dimensional_mesh() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    a = full((7, 5))
    t = torch.tensor(a)
    for sbp in ((S0, S1), (S0, S0), (S1, B), (S0, P)):
        x = flow.tensor(a, placement=mesh, sbp=tuple(B if s == P else s for s in sbp))
        x = x.to_global(sbp=sbp)
        for got, want in ((flow.roll(x, 2, 0), torch.roll(t, 2, 0)),
                          (flow.roll(x, -3, 1), torch.roll(t, -3, 1)),
                          (flow.diff(x, 2, 0), torch.diff(t, 2, 0)),
                          (F.pad(x, (1, 2, 3, 1)), TF.pad(t, (1, 2, 3, 1))),
                          (F.pad(x, (3, 2), mode="circular"), TF.pad(t, (3, 2), mode="circular")),
                          (x.reshape(5, 7), t.reshape(5, 7)), (x.reshape(-1), t.reshape(-1))):
            assert_array_equal(got.numpy(), want.numpy(), err_msg=str(sbp))
