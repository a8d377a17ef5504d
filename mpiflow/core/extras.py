"""The optional extras of mpiflow and the install command an error message should give.

mpiflow installs from a clone (``pip install -e .``); it is not published on PyPI, so a hint
such as ``pip install mpiflow[gpu]`` would fetch nothing, or someone else's package. A hint
names the packages an extra stands for, which install from PyPI as they are, and the extra's
spelling for a clone. :data:`EXTRAS` mirrors ``[options.extras_require]`` in ``setup.cfg``
(a test compares them).
"""

from __future__ import annotations

__all__ = ["EXTRAS", "install_hint"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "mpich": ("mpich",),
    "openmpi": ("openmpi",),
    "impi": ("impi-rt",),
    "gpu": ("cupy-cuda12x", "nvidia-nccl-cu12"),
    "gpu-cuda13": ("cupy-cuda13x", "nvidia-nccl-cu13"),
    "torch": ("torch>=2.1",),
    "examples": ("matplotlib", "scikit-learn", "tqdm"),
}


def install_hint(extra: str, *packages: str) -> str:
    """The command that installs what ``extra`` gives (or only ``packages`` of it).

    Args:
        extra: a key of :data:`EXTRAS`.
        packages: the packages needed, when not the whole extra.

    Returns:
        Text for an error message.

    >>> install_hint("gpu")
    'pip install cupy-cuda12x nvidia-nccl-cu12 (or, in a clone of mpiflow: pip install -e ".[gpu]")'
    """
    names = " ".join(f"'{p}'" if ">" in p else p for p in (packages or EXTRAS[extra]))
    return f'pip install {names} (or, in a clone of mpiflow: pip install -e ".[{extra}]")'
