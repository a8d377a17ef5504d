"""CuPy's absence and a broken CuPy install (mpiflow.core.torch_arrays.cupy_or_none): the first
is silent, the second warns once per process before CUDA tensors are staged through the host,
and ``python -m mpiflow info`` reports it."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import MPIEXEC, run_job

PROBE = (
    "import warnings\n"
    "from mpiflow.core.torch_arrays import cupy_or_none\n"
    "from mpiflow.info import cupy_report\n"
    "with warnings.catch_warnings(record=True) as seen:\n"
    "    warnings.simplefilter('always')\n"
    "    assert cupy_or_none() is None and cupy_or_none() is None\n"
    "print('warnings', sum('CuPy is installed but does not import' in str(w.message)"
    " for w in seen))\n"
    "info = cupy_report()\n"
    "print('cupy', info['cupy'])\n"
    "print('nccl', info['nccl (cupy.cuda.nccl)'])\n"
)


def probe(path: str) -> list[str]:
    root = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": os.pathsep.join(p for p in (path, root) if p)}
    job = run_job(1, PROBE, launcher=[MPIEXEC, "-n", "1"], env=env)
    assert job.returncode == 0, job.stderr
    return job.stdout.splitlines()


def test_a_broken_cupy_warns_once_and_shows_in_info(tmp_path: Path) -> None:
    error = "OSError('libcudart.so.12: cannot open shared object file')"
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(f"raise {error}\n")
    lines = probe(str(tmp_path))
    kind = error.split("(")[0]
    assert lines[0] == "warnings 1", lines
    assert lines[1].startswith(f"cupy installed but does not import ({kind}: "), lines
    assert lines[2] == "nccl no (CuPy does not import)", lines


def test_no_cupy_says_nothing() -> None:
    assert probe("") == ["warnings 0", "cupy not installed", "nccl no (CuPy not installed)"]
