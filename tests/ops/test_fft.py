"""mpiflow.fft against numpy.fft and torch.fft on the gathered value, at every rank count.

Split along each dim (uneven: 5 and 7 rows), every norm, sizes that pad and cut; the layouts
of the results and the collectives they cost; gradients beside torch's; fftfreq, fftshift; a
2-D mesh; bad input raising the same error on every rank.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
import torch
from numpy.testing import assert_allclose

import mpiflow as flow
from mpiflow.communication import count_collectives

pytestmark = pytest.mark.mpi
RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()


def _alltoalls(calls: dict[str, int]) -> int:
    """The all-to-alls counted (plain where every count is the same, else ``_v``), checking
    that nothing else communicated."""
    assert set(calls) <= {"all_to_all", "all_to_all_v"}, dict(calls)
    return calls["all_to_all"] + calls["all_to_all_v"]
ALL = flow.placement("cpu", list(range(SIZE)))
S = flow.sbp.split
B = flow.sbp.broadcast
NORMS = ("backward", "ortho", "forward")


def _signal(shape: tuple[int, ...], seed: int, complex_: bool = True) -> numpy.ndarray:
    rng = numpy.random.default_rng(seed)
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if complex_ else x


def _split(x: numpy.ndarray, dim: int) -> flow.Tensor:
    return flow.tensor(x, placement=ALL, sbp=S(dim))


def _close(got: flow.Tensor, want: Any, what: str = "") -> None:
    want = numpy.asarray(want)
    value = got.numpy()
    assert value.dtype == want.dtype, f"{what}: {value.dtype}, expected {want.dtype}"
    assert_allclose(value, want, rtol=1e-10, atol=1e-10, err_msg=what)


# -- values ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_one_dim_functions_match_numpy_split_along_each_dim(name: str) -> None:
    real = name in ("rfft", "ihfft")
    x = _signal((5, 7), 1, complex_=not real)
    ours, theirs = getattr(flow.fft, name), getattr(numpy.fft, name)
    for split in (0, 1):
        t = _split(x, split)
        for dim in (0, -1):
            for n, norm in ((None, "backward"), (4, "ortho"), (9, "forward")):
                _close(ours(t, n=n, dim=dim, norm=norm), theirs(x, n=n, axis=dim, norm=norm),
                       f"{name} S({split}) dim={dim} n={n} {norm}")


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn",
                                  "irfftn"])
def test_several_dims_match_numpy_split_along_each_dim(name: str) -> None:
    real = name.startswith("rfft")
    x = _signal((5, 4, 7), 2, complex_=not real)
    ours, theirs = getattr(flow.fft, name), getattr(numpy.fft, name)
    cases: list[dict[str, Any]] = [{}, {"s": (6, 3)}, {"axes": (0, 2), "norm": "ortho"},
                                   {"s": (4, 9), "axes": (2, 0), "norm": "forward"}]
    for split in (0, 1, 2):
        t = _split(x, split)
        for case in cases:
            mine = dict(case)
            if "axes" in mine:
                mine["dim"] = mine.pop("axes")
            elif name.endswith("2") or "s" in case:  # (numpy 2 wants the axes with s)
                case = {**case, "axes": (-2, -1) if name.endswith("2") or "s" in case
                        else None}
            _close(ours(t, **mine), theirs(x, **case), f"{name} S({split}) {case}")


def test_a_1d_split_array_is_transformed_where_it_lies() -> None:
    for n in (64, 7, 3 * SIZE + 1):
        x = _signal((n,), n)
        t = _split(x, 0)
        with count_collectives() as calls:
            y = flow.fft.fft(t)
        assert y.sbp == (S(0),)
        _close(y, numpy.fft.fft(x), f"fft of {n}")
        assert "all_gather" not in calls and "all_gather_v" not in calls
        h = flow.fft.rfft(_split(x.real.copy(), 0))
        assert h.sbp == (S(0),)
        _close(h, numpy.fft.rfft(x.real), f"rfft of {n}")
        _close(flow.fft.irfft(h, n=n), numpy.fft.irfft(numpy.fft.rfft(x.real), n=n))


def test_local_tensors_and_dtypes_follow_torch() -> None:
    x32 = numpy.arange(6, dtype=numpy.float32)
    assert flow.fft.fft(flow.tensor(x32)).dtype == flow.complex64
    assert flow.fft.fft(flow.tensor(numpy.arange(6))).dtype == flow.complex64
    assert flow.fft.rfft(flow.tensor(x32.astype(numpy.float64))).dtype == flow.complex128
    assert flow.fft.irfft(flow.fft.rfft(flow.tensor(x32))).dtype == flow.float32
    assert flow.fft.hfft(flow.tensor(x32)).dtype == flow.float32
    got = flow.fft.fftn(flow.tensor(x32.reshape(2, 3)), norm="ortho")
    want = torch.fft.fftn(torch.tensor(x32.reshape(2, 3)), norm="ortho")
    assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


# -- layouts and collectives -------------------------------------------------------------------
def test_fft2_of_a_row_split_returns_column_split_after_one_all_to_all() -> None:
    x = _signal((6, 10), 3)
    t = _split(x, 0)
    flow.fft.fft2(t)  # warm up: communicators and plans
    with count_collectives() as calls:
        y = flow.fft.fft2(t)
    assert y.sbp == (S(1),)
    assert _alltoalls(calls) == (1 if SIZE > 1 else 0)
    _close(y, numpy.fft.fft2(x))
    with count_collectives() as calls:
        back = flow.fft.ifft2(y)
    assert back.sbp == (S(0),)
    assert _alltoalls(calls) == (1 if SIZE > 1 else 0)
    _close(back, x.astype(numpy.complex128))


def test_real_2d_transforms_move_the_half_spectrum_once() -> None:
    x = _signal((6, 10), 4, complex_=False)
    t = _split(x, 0)
    flow.fft.irfft2(flow.fft.rfft2(t))
    with count_collectives() as calls:
        h = flow.fft.rfft2(t)
    assert h.sbp == (S(1),) and tuple(h.shape) == (6, 6)
    assert _alltoalls(calls) == (1 if SIZE > 1 else 0)
    with count_collectives() as calls:
        back = flow.fft.irfft2(h, s=(6, 10))
    assert back.sbp == (S(0),)
    assert _alltoalls(calls) == (1 if SIZE > 1 else 0)
    _close(back, x)


def test_a_transform_along_dims_that_are_not_split_does_not_communicate() -> None:
    x = _signal((5, 6, 4), 5)
    t = _split(x, 0)
    with count_collectives() as calls:
        y = flow.fft.fftn(t, dim=(1, 2))
        r = flow.fft.rfft(_split(x.real.copy(), 1), dim=2)
    assert not calls
    assert y.sbp == (S(0),) and r.sbp == (S(1),)
    _close(y, numpy.fft.fftn(x, axes=(1, 2)))


def test_a_batch_dim_takes_the_split_of_a_1d_transform() -> None:
    x = _signal((8, 12), 6)
    y = flow.fft.fft(_split(x, 1), dim=1)
    assert y.sbp == (S(0),)
    _close(y, numpy.fft.fft(x, axis=1))


@pytest.mark.skipif(SIZE != 4, reason="a 2 x 2 mesh needs 4 ranks")
def test_pencils_on_a_2d_mesh() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    x = _signal((6, 5, 7), 7)
    t = flow.tensor(x, placement=mesh, sbp=[S(0), S(1)])
    flow.fft.fftn(t)
    with count_collectives() as calls:
        y = flow.fft.fftn(t)
    assert y.sbp == (S(1), S(2))
    assert _alltoalls(calls) == 2
    _close(y, numpy.fft.fftn(x))
    for sbp in ([S(0), S(0)], [S(2), B], [S(1), S(2)], [B, S(0)]):
        t = flow.tensor(x, placement=mesh, sbp=sbp)
        _close(flow.fft.fftn(t, dim=(0, 2)), numpy.fft.fftn(x, axes=(0, 2)), f"{sbp}")
        _close(flow.fft.rfftn(flow.tensor(x.real.copy(), placement=mesh, sbp=sbp)),
               numpy.fft.rfftn(x.real), f"rfftn {sbp}")
        _close(flow.fft.irfftn(t, s=(6, 5, 9)),
               numpy.fft.irfftn(x, s=(6, 5, 9), axes=(0, 1, 2)), f"irfftn {sbp}")


def test_a_partial_sum_stays_partial() -> None:
    x = _signal((4, 5), 8)
    part = flow.tensor(x if RANK == 0 else numpy.zeros_like(x)).to_global(ALL, flow.sbp.partial_sum)
    y = flow.fft.fft2(part)
    assert y.sbp == (flow.sbp.partial_sum,)
    _close(y, numpy.fft.fft2(x))


# -- gradients ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "kwargs"), [("fft", {"n": 9}), ("ifft", {"norm": "ortho"}),
                                              ("rfft", {"n": 4}), ("irfft", {"n": 9}),
                                              ("hfft", {}), ("ihfft", {"norm": "forward"}),
                                              ("fft2", {}), ("rfft2", {"s": (4, 6)}),
                                              ("irfftn", {"s": (5, 6)})])
def test_gradients_match_torch(name: str, kwargs: dict[str, Any]) -> None:
    real_in = name in ("rfft", "ihfft", "rfft2")
    x = _signal((5, 7), 9, complex_=not real_in)
    for split in (0, 1):
        t = _split(x, split).detach().requires_grad_()
        tt = torch.tensor(x, requires_grad=True)
        y, yt = getattr(flow.fft, name)(t, **kwargs), getattr(torch.fft, name)(tt, **kwargs)
        cot = _signal(tuple(yt.shape), 10, complex_=yt.is_complex())
        y.backward(flow.tensor(cot, placement=ALL, sbp=y.sbp))
        yt.backward(torch.tensor(cot))
        assert t.grad is not None and t.grad.sbp == (S(split),)
        assert_allclose(t.grad.numpy(), tt.grad.resolve_conj().numpy(), atol=1e-10,
                        err_msg=f"{name} S({split})")


# -- helpers -----------------------------------------------------------------------------------
def test_frequencies_match_torch_local_and_split() -> None:
    for n, d in ((8, 1.0), (7, 0.5), (3 * SIZE + 1, 2.0)):
        want = torch.fft.fftfreq(n, d).numpy()
        assert_allclose(flow.fft.fftfreq(n, d).numpy(), want)
        split = flow.fft.fftfreq(n, d, placement=ALL, sbp=S(0), dtype=flow.float64)
        assert split.sbp == (S(0),) and split.dtype == flow.float64
        assert_allclose(split.numpy(), torch.fft.fftfreq(n, d, dtype=torch.float64).numpy())
        assert_allclose(flow.fft.rfftfreq(n, d).numpy(), torch.fft.rfftfreq(n, d).numpy())


def test_shifts_match_numpy_along_split_dims() -> None:
    x = _signal((5, 7), 11)
    t = _split(x, 1)
    _close(flow.fft.fftshift(t), numpy.fft.fftshift(x))
    _close(flow.fft.ifftshift(t, dim=1), numpy.fft.ifftshift(x, axes=1))
    _close(flow.fft.ifftshift(flow.fft.fftshift(t)), x)


# -- bad input ---------------------------------------------------------------------------------
def test_bad_input_raises_the_same_error_on_every_rank() -> None:
    t = _split(_signal((5, 7), 12), 0)
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        flow.fft.fft(t, norm="unitary")
    with pytest.raises(ValueError, match=r"Invalid number of data points \(0\)"):
        flow.fft.fft(t, n=0)
    with pytest.raises(ValueError, match=r"Invalid number of data points \(-3\)"):
        flow.fft.fft2(t, s=(4, -3))
    with pytest.raises(IndexError, match="Dimension out of range"):
        flow.fft.fft(t, dim=2)
    with pytest.raises(RuntimeError, match="unique"):
        flow.fft.fftn(t, dim=(0, -2))
    with pytest.raises(TypeError, match="expects a real input"):
        flow.fft.rfft(t)
    with pytest.raises(RuntimeError, match="same length"):
        flow.fft.fftn(t, s=(3,), dim=(0, 1))
    with pytest.raises(ValueError, match="Invalid number of data points"):
        flow.fft.irfft(_split(numpy.ones(1, complex), 0))


# -- GPU -------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(flow.cuda.unavailable_reason() is not None,
                    reason=flow.cuda.unavailable_reason() or "")
def test_cuda_placements_run_cufft() -> None:
    cp = flow.cuda.require()
    x = _signal((6, 10), 13)
    gpus = flow.placement("cuda", list(range(SIZE)))
    t = flow.tensor(x, placement=gpus, sbp=S(0))
    y = flow.fft.fft2(t)
    assert y.sbp == (S(1),) and isinstance(y.to_local()._data, cp.ndarray)
    _close(y, numpy.fft.fft2(x))
    _close(flow.fft.irfft(flow.fft.rfft(flow.tensor(x.real.copy(), placement=gpus, sbp=S(0)),
                                        dim=0), n=6, dim=0), x.real)
