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
``init_process_group`` run unchanged under ``mpiexec`` and ``srun``. With several ranks it also
sets ``MASTER_ADDR``/``MASTER_PORT`` where unset (rank 0's host and a port free there): those
must be agreed, so it starts MPI (mpi4py, not mpiflow) for one broadcast.

The rendezvous: ``init_method="mpi://"`` takes rank, world size and a store from MPI
(:mod:`mpiflow.torch.rendezvous`); the default ``env://`` does the same when ``MASTER_ADDR``
is unset or the one mpiflow set (no TCP store where MPI serves), torch's own otherwise.

``backend="mpi"``: where torch has no MPI of its own (stock wheels), :func:`install_mpi` lets
torch's ``"mpi"`` branch make mpiflow groups (:class:`MPIFlowAsMPI`); the hook does so only
in a process an MPI launcher started (not under torchrun), ``import mpiflow.torch`` always.
``MPIFLOW_TORCH_MPI=0`` turns it off. A torch built with MPI is never changed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["MPIFlowAsMPI", "autoload", "install_mpi", "install_rendezvous", "mpi_alias_enabled",
           "set_torchrun_env"]


def _create(opts: Any, pg_options: Any = None) -> Any:
    from mpiflow.torch.backend import create_process_group

    return create_process_group(opts, pg_options)


def _mpi(url: str, **kwargs: Any) -> Iterator[Any]:
    from mpiflow.torch.rendezvous import mpi_rendezvous

    return mpi_rendezvous(url, **kwargs)


def _env_or_mpi(original: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def env_rendezvous(url: str, **kwargs: Any) -> Iterator[Any]:
        """torch's env:// rendezvous, or MPI's when MASTER_ADDR is unset or mpiflow's."""
        module = _launcher_env()
        if os.environ.get("MASTER_ADDR") and (module is None
                                              or not module.set_here(os.environ, "MASTER_ADDR")):
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


class MPIFlowAsMPI:
    """What torch's ``"mpi"`` branch calls where torch has no ``ProcessGroupMPI``: mpiflow's.

    torch (2.1 to 2.13) makes an ``"mpi"`` group with ``ProcessGroupMPI.create(ranks)`` once
    ``is_mpi_available()`` says yes; a process group returned there is used as the whole
    group, as a registered backend's is.
    """

    @staticmethod
    def create(ranks: list[int] | None = None) -> Any:
        """The mpiflow group over the world ranks ``ranks`` (all when empty); None outside."""
        from mpiflow.torch.backend import create_mpi_group

        return create_mpi_group(list(ranks or ()))


def mpi_alias_enabled(environ: Any = os.environ) -> bool:
    """Whether ``MPIFLOW_TORCH_MPI`` allows ``backend="mpi"`` on mpiflow (on when unset).

    The words are mpiflow.core.settings' (this hook cannot import mpiflow: that starts MPI);
    tests/core/test_settings.py checks that both parse alike.

    Raises:
        ValueError: a value that is neither on nor off (as mpiflow's settings raise).
    """
    raw = environ.get("MPIFLOW_TORCH_MPI", "")
    word = raw.strip().lower()
    if word in ("", "1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError("MPIFLOW_TORCH_MPI must be 1, true, yes, on (on) or 0, false, no, off "
                     f"(off), in any case; got {raw!r}")


def install_mpi() -> bool:
    """Let ``backend="mpi"`` make mpiflow groups where torch has no MPI (idempotent).

    Returns:
        Whether ``"mpi"`` is now mpiflow's: False where torch has its own MPI (left alone) or
        ``MPIFLOW_TORCH_MPI=0``.
    """
    c10d: Any = importlib.import_module("torch.distributed.distributed_c10d")
    current = getattr(c10d, "ProcessGroupMPI", None)
    if current is MPIFlowAsMPI:
        return True
    if current is not None or not mpi_alias_enabled():
        return False
    # The two names torch's "mpi" branch reads (is_mpi_available() returns the flag).
    c10d.ProcessGroupMPI = MPIFlowAsMPI
    c10d._MPI_AVAILABLE = True
    return True


def _launcher_env() -> Any:
    """mpiflow's launcher_env module, loaded from its file (``mpiflow`` is not imported)."""
    name = "_mpiflow_launcher_env"
    module = sys.modules.get(name)
    if module is None:
        package = importlib.util.find_spec("mpiflow")  # finds it; does not run its __init__
        locations = package.submodule_search_locations if package is not None else None
        if not locations:
            return None
        path = os.path.join(next(iter(locations)), "core", "launcher_env.py")
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def set_torchrun_env() -> None:
    """Set torchrun's variables from the MPI launcher's, where they are unset; with several
    ranks also ``MASTER_ADDR``/``MASTER_PORT``, agreed in one MPI broadcast (MPI starts)."""
    module = _launcher_env()
    if module is None:
        return
    module.apply_torchrun_env(os.environ)
    values = module.launcher_values(os.environ)
    if values is None or not module.master_env_wanted(os.environ, values.world_size):
        return
    from mpi4py import MPI

    single_node = values.local_world_size == values.world_size
    module.apply_master_env(os.environ, *module.agree_master(MPI.COMM_WORLD, single_node))


def _under_mpi_launcher() -> bool:
    module = _launcher_env()
    return (module is not None and not os.environ.get("TORCHELASTIC_RUN_ID")
            and module.launcher_values(os.environ) is not None)


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
        if _under_mpi_launcher():
            install_mpi()
    except Exception:
        return
