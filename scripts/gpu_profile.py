"""Where a small collective on a GPU spends its time: cProfile of N 8-byte all_reduces.

Run on a GPU machine at 1 rank (scripts/gpu-check's ``profile`` step)::

    mpiexec -n 1 python scripts/gpu_profile.py [N]

It times and profiles ``dist.all_reduce`` on a CuPy array (mpiflow.distributed), then
torch.distributed's ``all_reduce`` on a CUDA tensor through the "mpiflow" backend, each beside
its floor (NCCL called directly through CuPy; torch's own NCCL backend), and prints the top
functions by own time.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any


def _time(call: Callable[[], Any], n: int) -> float:
    for _ in range(50):
        call()
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - t0) / n * 1e6


def _profile(name: str, call: Callable[[], Any], n: int) -> None:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        call()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(18)
    print(f"--- {name}: top functions by own time over {n} calls")
    print("\n".join(out.getvalue().splitlines()[6:]))


def main(n: int) -> None:
    import mpiflow
    import mpiflow.distributed as dist

    cp = mpiflow.cuda.require()
    buf = cp.zeros(2, dtype=cp.float32)
    flow_call = lambda: dist.all_reduce(buf)  # noqa: E731
    from cupy.cuda import nccl

    comm = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    stream = cp.cuda.get_current_stream()

    def raw() -> None:
        comm.allReduce(buf.data.ptr, buf.data.ptr, 2, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                       stream.ptr)
        stream.synchronize()

    print(f"cupy 8 B all_reduce: mpiflow {_time(flow_call, n):.2f} us, "
          f"raw NCCL + sync {_time(raw, n):.2f} us")
    _profile("mpiflow.distributed.all_reduce(cupy 8 B)", flow_call, n)

    import torch
    import torch.distributed as tdist

    import mpiflow.torch

    tdist.init_process_group("mpiflow")
    t = torch.zeros(2, device="cuda")
    ng = tdist.new_group(backend="nccl")

    def backend() -> None:
        tdist.all_reduce(t)
        torch.cuda.synchronize()

    def torch_nccl() -> None:
        tdist.all_reduce(t, group=ng)
        torch.cuda.synchronize()

    print(f"torch 8 B all_reduce on cuda: mpiflow backend {_time(backend, n):.2f} us, "
          f"torch nccl {_time(torch_nccl, n):.2f} us")
    # The pieces of handing a CUDA tensor to CuPy, one by one.
    dev = t.device
    idx = dev.index or 0

    def wrap() -> Any:
        mem = cp.cuda.UnownedMemory(t.data_ptr(), t.numel() * t.element_size(), t, idx)
        return cp.ndarray(tuple(t.shape), cp.float32, cp.cuda.MemoryPointer(mem, 0))

    def in_device() -> None:
        with cp.cuda.Device(idx):
            pass

    pieces = {
        "cupy.asarray(t)": lambda: cp.asarray(t),
        "cupy.from_dlpack(t)": lambda: cp.from_dlpack(t),
        "UnownedMemory wrap": wrap,
        "torch.cuda.current_stream(t.device).synchronize()":
            lambda: torch.cuda.current_stream(t.device).synchronize(),
        "torch.cuda.current_stream().synchronize()":
            lambda: torch.cuda.current_stream().synchronize(),
        "cupy current stream synchronize": lambda: cp.cuda.get_current_stream().synchronize(),
        "with cupy.cuda.Device(i)": in_device,
        "t.device": lambda: t.device,
        "cupy.cuda.Event() + record": lambda: cp.cuda.Event(disable_timing=True).record(),
    }
    for name, call in pieces.items():
        print(f"  {name}: {_time(call, n):.2f} us")
    _profile("torch.distributed.all_reduce(cuda 8 B) on mpiflow", backend, n)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
