"""``flow.config``: the devices per node (checked against the MPI job, not used to place).

Examples:
    >>> import mpiflow.compatible.single_client as flow
    >>> flow.config.gpu_device_num(1)
"""

from __future__ import annotations

import operator

from .session import SESSION

__all__ = ["cpu_device_num", "gpu_device_num"]


def _devices(kind: str, n: int) -> None:
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"flow.config.{kind}_device_num needs a positive count, got {n}")
    SESSION.device_num = (kind, n)
    SESSION.checked = False


def gpu_device_num(val: int) -> None:
    """Devices per node: under MPI each rank is one device, so this is compared with the
    ranks per node of the job at the first job call (a difference is reported once)."""
    _devices("gpu", val)


def cpu_device_num(val: int) -> None:
    """As :func:`gpu_device_num`, for CPU devices."""
    _devices("cpu", val)
