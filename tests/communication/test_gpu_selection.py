"""Choosing the GPU transport: the selection table, environment switches, CUDA-awareness
queries, ``info``'s report, device arrays reaching the device communicator, and the errors
'cuda' tensors raise where CuPy or a device is missing."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import numpy
import pytest
from collective_helpers import (
    WORLD,
)
from gpu_helpers import FakeNccl
from helpers import run_job

import mpiflow as flow
from mpiflow import cuda
from mpiflow.communication.gpu import maker as device_module
from mpiflow.communication.gpu import transport as transport_module
from mpiflow.communication.gpu.array_ops import HostOps
from mpiflow.communication.gpu.cuda_aware import CudaAwareCommunicator
from mpiflow.communication.gpu.nccl import NCCLCommunicator
from mpiflow.communication.gpu.staging import StagedCommunicator
from mpiflow.communication.gpu.transport import (
    Transport,
    TransportChoice,
    cuda_aware_mpi,
    cuda_aware_source,
    current_transport,
    describe_transport,
    library_cuda_support,
    parse_backend,
    parse_cuda_aware,
    select_transport,
)
from mpiflow.communication.mpi.group import world_comm


# -- choosing the transport ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("backend", "nccl", "aware", "per_gpu", "transport", "fallback"),
    [
        ("auto", True, "yes", 1, Transport.NCCL, Transport.CUDA_AWARE_MPI),
        ("auto", True, "unknown", 1, Transport.NCCL, Transport.STAGED_MPI),
        ("nccl", True, "no", 1, Transport.NCCL, Transport.STAGED_MPI),
        ("nccl", True, "no", 2, Transport.NCCL, Transport.STAGED_MPI),
        ("auto", True, "yes", 2, Transport.CUDA_AWARE_MPI, Transport.CUDA_AWARE_MPI),
        ("auto", False, "yes", 1, Transport.CUDA_AWARE_MPI, Transport.CUDA_AWARE_MPI),
        ("auto", False, "no", 1, Transport.STAGED_MPI, Transport.STAGED_MPI),
        ("auto", False, "unknown", 1, Transport.STAGED_MPI, Transport.STAGED_MPI),
        ("mpi", True, "yes", 1, Transport.CUDA_AWARE_MPI, Transport.CUDA_AWARE_MPI),
        ("mpi", True, "unknown", 1, Transport.STAGED_MPI, Transport.STAGED_MPI),
    ],
)
def test_selection_table(backend: str, nccl: bool, aware: str, per_gpu: int,
                         transport: Transport, fallback: Transport) -> None:
    choice = select_transport(backend, nccl, aware, "NCCL 2.21.5", per_gpu)
    assert (choice.transport, choice.fallback) == (transport, fallback)
    assert choice.reason


def test_selection_reasons_and_errors() -> None:
    assert "share a GPU" in select_transport("auto", True, "no", ranks_per_gpu=2).reason
    assert "MPIFLOW_BACKEND=mpi" in select_transport("mpi", True, "yes").reason
    assert "unknown" in select_transport("auto", False, "unknown").reason
    with pytest.raises(RuntimeError, match=r"MPIFLOW_BACKEND=nccl.*not available.*not installed"):
        select_transport("nccl", False, "yes", "CuPy is not installed")
    with pytest.raises(ValueError, match="backend"):
        select_transport("gloo", True, "yes")
    with pytest.raises(ValueError, match="cuda_aware"):
        select_transport("auto", True, "maybe")


@pytest.mark.parametrize(("value", "expected"),
                         [(None, "auto"), ("", "auto"), ("mpi", "mpi"), ("NCCL", "nccl"),
                          (" auto ", "auto")])
def test_parse_backend(value: str | None, expected: str) -> None:
    env = {} if value is None else {"MPIFLOW_BACKEND": value}
    assert parse_backend(env) == expected


def test_parse_backend_refuses_other_values() -> None:
    with pytest.raises(ValueError,
                       match=r"MPIFLOW_BACKEND must be one of auto, mpi, nccl; got 'gloo'"):
        parse_backend({"MPIFLOW_BACKEND": "gloo"})


@pytest.mark.parametrize(("value", "expected"),
                         [(None, None), ("", None), ("1", True), ("yes", True), ("0", False),
                          ("off", False)])
def test_parse_cuda_aware(value: str | None, expected: bool | None) -> None:
    env = {} if value is None else {"MPIFLOW_CUDA_AWARE": value}
    assert parse_cuda_aware(env) is expected


def test_parse_cuda_aware_refuses_other_values() -> None:
    with pytest.raises(ValueError,
                       match=r"MPIFLOW_CUDA_AWARE must be 1, true, yes, on \(on\) or 0"):
        parse_cuda_aware({"MPIFLOW_CUDA_AWARE": "maybe"})


@pytest.mark.parametrize(
    ("environ", "library", "answer"),
    [
        ({}, None, "unknown"),
        ({}, True, "yes"),
        ({"MPIR_CVAR_ENABLE_GPU": "1"}, False, "no"),     # the library knows better
        ({"MPIFLOW_CUDA_AWARE": "1"}, False, "yes"),      # the user overrides everything
        ({"MPIFLOW_CUDA_AWARE": "0"}, True, "no"),
        ({"MPICH_GPU_SUPPORT_ENABLED": "1"}, None, "yes"),
        ({"MV2_USE_CUDA": "0"}, None, "no"),
    ],
)
def test_cuda_awareness(environ: dict[str, str], library: bool | None, answer: str) -> None:
    assert cuda_aware_mpi(environ, lambda: library) == answer
    assert cuda_aware_source(environ, lambda: library)[1]


def test_the_library_query_never_raises() -> None:
    assert library_cuda_support() in (True, False, None)
    answer, source = cuda_aware_source()
    assert answer in ("yes", "no", "unknown") and source


def test_current_transport_from_the_environment() -> None:
    env = {"MPIFLOW_BACKEND": "mpi", "MPIFLOW_CUDA_AWARE": "1"}
    assert current_transport(env).transport is Transport.CUDA_AWARE_MPI
    env["MPIFLOW_CUDA_AWARE"] = "0"
    assert current_transport(env).transport is Transport.STAGED_MPI
    assert describe_transport({"MPIFLOW_BACKEND": "tcp"}).startswith("error: MPIFLOW_BACKEND")
    if not transport_module.nccl_status()[0]:
        with pytest.raises(RuntimeError, match="MPIFLOW_BACKEND=nccl"):
            current_transport({"MPIFLOW_BACKEND": "nccl"})
        assert current_transport({}).transport is not Transport.NCCL
    text = flow.env.get_gpu_transport()
    assert text.split()[0] in ("nccl", "cuda-aware-mpi", "staged-mpi", "error:")


def test_info_reports_the_gpu_transport() -> None:
    from mpiflow.info import collect

    info = collect()
    assert info["GPU transport"] and info["CUDA devices"] and info["CUDA-aware MPI"]


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("choice", "kind"),
    [
        (TransportChoice(Transport.NCCL, Transport.STAGED_MPI, ""), NCCLCommunicator),
        (TransportChoice(Transport.CUDA_AWARE_MPI, Transport.CUDA_AWARE_MPI, ""),
         CudaAwareCommunicator),
        (TransportChoice(Transport.STAGED_MPI, Transport.STAGED_MPI, ""), StagedCommunicator),
    ],
)
def test_build_device_communicator(choice: TransportChoice, kind: type) -> None:
    built = device_module.build_device_communicator(world_comm, HostOps(), choice,
                                                    nccl_backend=FakeNccl(True))
    assert type(built) is kind
    assert device_module.transport_of(built) is choice.transport
    if isinstance(built, NCCLCommunicator):
        assert isinstance(built.fallback, StagedCommunicator)


# -- device arrays reach the device communicator -----------------------------------------------
class _FakeDeviceArray(numpy.ndarray):
    """What the routing sees as a CuPy array (a numpy subclass, so HostOps can move it)."""


@pytest.mark.mpi
def test_mpi_communicator_routes_device_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    import mpiflow.distributed as dist

    ops = HostOps()
    staged = StagedCommunicator(world_comm, ops)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(ndarray=_FakeDeviceArray))
    monkeypatch.setattr(world_comm, "device_comm", staged)
    x = numpy.ones(3).view(_FakeDeviceArray)
    dist.all_reduce(x)
    assert ops.to_host_copies == 1 and numpy.asarray(x).tolist() == [WORLD] * 3
    world_comm.all_gather(numpy.ones(2), numpy.zeros(2 * WORLD).view(_FakeDeviceArray))
    assert ops.to_device_copies == 2
    plain = numpy.ones(3)
    world_comm.all_reduce(plain)        # host arrays never reach it
    assert ops.to_host_copies == 2 and plain.tolist() == [WORLD] * 3


# -- 'cuda' tensors where CuPy or a device is missing ------------------------------------------
def test_explain_says_what_is_missing() -> None:
    assert cuda.explain(None, 2) is None
    missing = cuda.explain("missing", 0)
    assert missing is not None and "CuPy is not installed (pip install cupy-cuda12x" in missing
    broken = cuda.explain("ImportError: libcudart.so.12", 0)
    assert broken is not None and "does not import (ImportError: libcudart.so.12)" in broken
    none = cuda.explain(None, 0, "cudaErrorNoDevice", {"CUDA_VISIBLE_DEVICES": ""})
    assert none is not None
    assert "CuPy is installed but no CUDA device is visible (CUDA_VISIBLE_DEVICES='')" in none
    assert "cudaErrorNoDevice" in none
    unset = cuda.explain(None, 0, None, {})
    assert unset is not None and "CUDA_VISIBLE_DEVICES=unset" in unset


no_cuda = pytest.mark.skipif(cuda.is_available(), reason="CuPy and a CUDA device are present")


@pytest.mark.mpi
@no_cuda
def test_cuda_tensors_raise_the_reason() -> None:
    reason = cuda.unavailable_reason()
    assert reason is not None
    p = flow.placement("cuda", list(range(WORLD)))  # a placement is only a description
    x = flow.tensor([1.0, 2.0])
    g = x.to_global(flow.placement("cpu", list(range(WORLD))), flow.sbp.broadcast)
    attempts: list[Callable[[], Any]] = [
        lambda: flow.zeros(4, placement=p, sbp=flow.sbp.split(0)),
        lambda: flow.ones(4, device="cuda"),
        lambda: flow.full((2,), 3.0, placement=p, sbp=flow.sbp.broadcast),
        lambda: flow.arange(5, placement=p, sbp=flow.sbp.split(0)),
        lambda: flow.tensor([1.0], placement=p, sbp=flow.sbp.broadcast),
        lambda: flow.randn(3, placement=p, sbp=flow.sbp.broadcast),
        lambda: flow.zeros_like(x).to("cuda:0"),
        x.cuda,
        lambda: x.to("cuda"),
        lambda: g.to("cuda"),
    ]
    for attempt in attempts:
        with pytest.raises(cuda.CudaUnavailableError) as info:
            attempt()
        assert str(info.value) == reason
        assert isinstance(info.value, RuntimeError)
    with pytest.raises(cuda.CudaUnavailableError, match="'cuda' tensors need CuPy"):
        cuda.require()
    assert cuda.device_count() == 0 or cuda.unavailable_reason() is None


def test_gpu_modules_import_without_cupy() -> None:
    code = (
        "import sys\n"
        "import mpiflow, mpiflow.cuda, mpiflow.info\n"
        "import mpiflow.communication.gpu.transport, mpiflow.communication.gpu.staging\n"
        "import mpiflow.communication.gpu.nccl, mpiflow.communication.gpu.maker\n"
        "import mpiflow.communication.gpu.cuda_aware, mpiflow.bench.cuda_cases\n"
        "assert 'cupy' not in sys.modules, 'importing mpiflow imported cupy'\n"
        "sys.modules['cupy'] = None  # as if CuPy were not installed\n"
        "try:\n"
        "    mpiflow.zeros(2, device='cuda')\n"
        "except mpiflow.cuda.CudaUnavailableError as e:\n"
        "    print(e)\n"
        "print(mpiflow.env.get_gpu_transport())\n"
    )
    job = run_job(1, code, launcher=[])
    assert job.returncode == 0, job.stderr
    assert "CuPy is not installed (pip install cupy-cuda12x" in job.stdout
    assert "staged-mpi" in job.stdout or "cuda-aware-mpi" in job.stdout
