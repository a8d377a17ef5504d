"""torch's backend auto-load hook for mpiflow (entry point group ``torch.backends``).

torch (2.5 and later) calls :func:`autoload` while it is imported. It registers the
``"mpiflow"`` backend name and the ``mpi://`` rendezvous with functions that import mpiflow only
when first used, so ``import torch`` neither imports mpiflow nor starts MPI. It lives outside
the ``mpiflow`` package because importing anything inside it would import ``mpiflow`` (and
start MPI). ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns every such hook off; ``import
mpiflow.torch`` registers the same things explicitly.

Under an MPI launcher it also sets torchrun's ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE`` and ``GROUP_RANK`` from the launcher's own variables
(:mod:`mpiflow.core.launcher_env`, loaded from its file so that ``mpiflow`` is not imported),
never replacing values already set: torch programs that read them before
``init_process_group`` run unchanged under ``mpiexec`` and ``srun``.

The rendezvous: ``init_method="mpi://"`` takes rank, world size and a store from MPI
(:mod:`mpiflow.torch.rendezvous`); the default ``env://`` does the same when ``MASTER_ADDR``
is unset (where torch's own handler would fail) and is torch's own otherwise.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["autoload", "install_rendezvous", "set_torchrun_env"]


def _create(opts: Any, pg_options: Any = None) -> Any:
    from mpiflow.torch.backend import create_process_group

    return create_process_group(opts, pg_options)


def _mpi(url: str, **kwargs: Any) -> Iterator[Any]:
    from mpiflow.torch.rendezvous import mpi_rendezvous

    return mpi_rendezvous(url, **kwargs)


def _env_or_mpi(original: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def env_rendezvous(url: str, **kwargs: Any) -> Iterator[Any]:
        """torch's env:// rendezvous, or MPI's when MASTER_ADDR is unset."""
        if os.environ.get("MASTER_ADDR"):
            return original(url, **kwargs)
        return _mpi(url, **kwargs)

    env_rendezvous._mpiflow = True  # type: ignore[attr-defined]
    return env_rendezvous


def install_rendezvous() -> None:
    """Add the ``mpi://`` rendezvous and let ``env://`` fall back to it (idempotent)."""
    # torch.distributed.rendezvous is also the name of a function there: import the module.
    torch_rendezvous = importlib.import_module("torch.distributed.rendezvous")
    handlers = torch_rendezvous._rendezvous_handlers
    if "mpi" not in handlers:
        torch_rendezvous.register_rendezvous_handler("mpi", _mpi)
    env = handlers.get("env")
    if env is not None and not getattr(env, "_mpiflow", False):
        handlers["env"] = _env_or_mpi(env)


def set_torchrun_env() -> None:
    """Set torchrun's variables from the MPI launcher's, where they are unset (no MPI start)."""
    name = "_mpiflow_launcher_env"
    module = sys.modules.get(name)
    if module is None:
        package = importlib.util.find_spec("mpiflow")  # finds it; does not run its __init__
        locations = package.submodule_search_locations if package is not None else None
        if not locations:
            return
        path = os.path.join(next(iter(locations)), "core", "launcher_env.py")
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    module.apply_torchrun_env(os.environ)


def autoload() -> None:
    """Register the ``"mpiflow"`` backend and rendezvous lazily; never raises (an exception
    here would make ``import torch`` fail)."""
    with contextlib.suppress(Exception):
        set_torchrun_env()
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return
        if "MPIFLOW" not in dist.Backend._plugins:
            dist.Backend.register_backend("mpiflow", _create, extended_api=True,
                                          devices=["cpu", "cuda"])
        install_rendezvous()
    except Exception:
        return
