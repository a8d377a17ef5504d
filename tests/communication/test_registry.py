"""The collective registry (mpiflow.communication.registry) against the code it describes.

Every Communicator operation is registered; every registered collective has the debug-mode
fingerprint it names (a missing or mismatched one fails here, not only under
``MPIFLOW_DEBUG=1``); every communicator kind implements exactly the operations the table
claims for it, and every Communicator subclass of the package is a kind or delegates to one;
every public name of the faces (``mpiflow.distributed``, ``mpiflow.comm``, the torch backend's
process group) is a registered collective's or listed as something else; and, at one rank,
each face function runs the operations the table names for it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy
import pytest

import mpiflow.comm as comm_face
import mpiflow.distributed as dist
from mpiflow.communication import count_collectives, fast
from mpiflow.communication.collectives import objects
from mpiflow.communication.debug import mode as debug_mode
from mpiflow.communication.gpu.cuda_aware import CudaAwareCommunicator
from mpiflow.communication.gpu.nccl import NCCLCommunicator
from mpiflow.communication.gpu.staging import StagedCommunicator
from mpiflow.communication.mpi.communicator import MPICommunicator
from mpiflow.communication.mpi.interface import OPERATIONS, Communicator
from mpiflow.communication.registry import (
    COLLECTIVES,
    DELEGATES,
    KINDS,
    NOT_COLLECTIVES,
    Collective,
)

# the device communicators' modules load lazily: imported above so that their kinds exist
DEVICE_KINDS = (CudaAwareCommunicator, NCCLCommunicator, StagedCommunicator)

ENTRIES = list(COLLECTIVES.values())
OPERATION_ENTRIES = [c for c in ENTRIES if "pkl5" not in c.kinds]


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def communicator_classes() -> dict[str, type]:
    """The package's Communicator subclasses by name (test doubles of other modules left out)."""
    return {c.__name__: c for c in _subclasses(Communicator) if c.__module__.startswith("mpiflow.")}


def kind_class(kind: str) -> type:
    return fast.FastPaths if kind == "fast" else communicator_classes()[KINDS[kind]]


# -- operations and fingerprints ---------------------------------------------------------------
def test_every_communicator_operation_is_registered_and_nothing_else() -> None:
    assert {c.name for c in OPERATION_ENTRIES} == set(OPERATIONS)
    abstract = {n for n in Communicator.__abstractmethods__ if n != "array_module"}
    assert abstract <= set(OPERATIONS)


@pytest.mark.parametrize("entry", OPERATION_ENTRIES, ids=lambda c: c.name)
def test_each_collective_has_its_debug_fingerprint(entry: Collective) -> None:
    specs = debug_mode.FINGERPRINT_SPECS
    if entry.point_to_point:
        assert entry.fingerprint is None and entry.name not in specs
        return
    assert entry.fingerprint == entry.name, "a collective's fingerprint is its own operation"
    assert entry.fingerprint in specs, (
        f"{entry.name} has no fingerprint in debug_mode.FINGERPRINT_SPECS: under "
        "MPIFLOW_DEBUG=1 its arguments would not be compared across ranks")
    # the fingerprint takes the method's arguments, as the debug communicator passes them
    method = inspect.signature(getattr(Communicator, entry.name))
    wanted = [p for p in method.parameters if p != "self"]
    assert list(inspect.signature(specs[entry.fingerprint]).parameters) == wanted
    # the checked method of the debug communicator is the one made from the fingerprint
    checked = debug_mode.DebugMPICommunicator.__dict__[entry.name]
    assert checked.__qualname__ == f"DebugMPICommunicator.{entry.name}"
    row = debug_mode.Fingerprint().encode(entry.name, 1, 2)  # its operation code exists
    assert row[1] == OPERATIONS.index(entry.name) + 1


def test_the_fingerprint_tables_hold_the_registered_collectives_only() -> None:
    registered = {c.fingerprint for c in OPERATION_ENTRIES if c.fingerprint}
    assert set(debug_mode.FINGERPRINT_SPECS) == registered
    object_entries = {c.fingerprint for c in ENTRIES if "pkl5" in c.kinds}
    assert set(objects.OPERATIONS) == object_entries
    assert set(objects.__all__) == object_entries


def test_only_point_to_point_calls_go_without_a_fingerprint() -> None:
    for entry in ENTRIES:
        assert (entry.fingerprint is None) == entry.point_to_point, entry.name


# -- communicator kinds ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("fast", "pkl5")])
def test_each_communicator_kind_implements_exactly_what_the_table_claims(kind: str) -> None:
    cls = kind_class(kind)
    claimed = {c.name for c in OPERATION_ENTRIES if kind in c.kinds}
    implemented = {name for name in OPERATIONS if name in cls.__dict__}
    assert implemented == claimed, (
        f"{cls.__name__} implements {sorted(implemented - claimed)} that the registry does not "
        f"claim, and lacks {sorted(claimed - implemented)} that it does")
    for name in claimed:
        method = cls.__dict__[name]
        assert not getattr(method, "__isabstractmethod__", False), f"{cls.__name__}.{name}"


def test_the_fast_paths_are_those_of_the_table() -> None:
    claimed = [name for c in ENTRIES for name in c.fast]
    assert sorted(claimed) == sorted(fast._PATHS)
    assert set(claimed) <= set(fast.FastPaths.__slots__)
    for entry in ENTRIES:
        assert bool(entry.fast) == ("fast" in entry.kinds), entry.name


def test_every_communicator_class_is_a_kind_or_delegates_to_one() -> None:
    classes = communicator_classes()
    kinds = {name for kind, name in KINDS.items() if kind not in ("fast", "pkl5")}
    assert kinds <= set(classes)
    for name, cls in classes.items():
        if name in kinds:
            continue
        assert name in DELEGATES, f"{name} is a Communicator the registry does not know"
        base = kind_class(DELEGATES[name])
        assert issubclass(cls, base)
        overridden = [op for op in OPERATIONS if op in cls.__dict__]
        assert not overridden, f"{name} overrides {overridden}: make it a kind of its own"


# -- faces -------------------------------------------------------------------------------------
def _face_names(face: str) -> dict[str, set[str]]:
    """name -> the operations the registry says it runs."""
    out: dict[str, set[str]] = {}
    for entry in ENTRIES:
        for name in getattr(entry, face):
            out.setdefault(name, set()).add(entry.name)
    return out


@pytest.mark.parametrize(("face", "module"), [("distributed", dist), ("comm", comm_face)])
def test_every_public_name_of_a_face_is_known(face: str, module: Any) -> None:
    registered, others = set(_face_names(face)), set(NOT_COLLECTIVES[face])
    assert not registered & others
    public = set(module.__all__)
    assert public - registered - others == set(), "public names the registry does not know"
    assert registered - public == set(), "registered names the face does not export"
    assert others - public == set()


def test_every_method_of_the_torch_process_group_is_known() -> None:
    pytest.importorskip("torch")
    from mpiflow.torch.process_group import ProcessGroupMPIFlow

    registered, others = set(_face_names("torch")), set(NOT_COLLECTIVES["torch"])
    methods = {name for name, value in vars(ProcessGroupMPIFlow).items()
               if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    assert methods - registered - others == set(), "methods the registry does not know"
    missing = {name for name in registered | others if not hasattr(ProcessGroupMPIFlow, name)}
    assert not missing, "registered methods the process group lacks"


# -- what the face functions run (one rank: every call completes on its own) -------------------
def _calls(comm_module: Any) -> dict[str, Callable[[], Any]]:
    """One call of each collective of ``mpiflow.distributed`` or ``mpiflow.comm`` at 1 rank."""
    x = numpy.arange(4.0)
    calls: dict[str, Callable[[], Any]] = {
        "all_reduce": lambda: comm_module.all_reduce(x.copy()),
        "broadcast": lambda: comm_module.broadcast(x.copy(), 0),
        "reduce": lambda: comm_module.reduce(x.copy(), 0),
        "all_gather": lambda: comm_module.all_gather([numpy.empty(4)], x),
        "all_gather_into_tensor": lambda: comm_module.all_gather_into_tensor(numpy.empty(4), x),
        "gather": lambda: comm_module.gather(x, [numpy.empty(4)], 0),
        "scatter": lambda: comm_module.scatter(numpy.empty(4), [x], 0),
        "reduce_scatter": lambda: comm_module.reduce_scatter(numpy.empty(4), [x]),
        "reduce_scatter_tensor": lambda: comm_module.reduce_scatter_tensor(numpy.empty(4), x),
        "all_to_all": lambda: comm_module.all_to_all([numpy.empty(4)], [x]),
        "barrier": lambda: comm_module.barrier(),
    }
    if comm_module is dist:  # (point to point needs a second rank: the static checks cover it)
        calls["all_to_all_single"] = lambda: dist.all_to_all_single(numpy.empty(4), x)
        calls["new_group"] = lambda: dist.new_group([0])
    return calls


@pytest.mark.mpi
@pytest.mark.parametrize(("face", "module"), [("distributed", dist), ("comm", comm_face)])
def test_each_face_function_runs_the_operations_the_table_names(face: str, module: Any) -> None:
    if dist.get_world_size() != 1:
        pytest.skip("calls each collective on its own: one rank")
    names = _face_names(face)
    for name, call in _calls(module).items():
        with count_collectives() as counted:
            call()
        ran = set(counted)
        assert ran, f"{face}.{name} ran no operation"
        assert ran <= names[name], (
            f"{face}.{name} ran {sorted(ran)}; the registry names {sorted(names[name])}")


@pytest.mark.mpi
def test_the_torch_groups_in_place_all_gather_is_fingerprinted_in_debug_mode() -> None:
    # FSDP2's layout (the input is this rank's chunk of the output) took MPI_IN_PLACE on the
    # group's mpi4py communicator directly, so MPIFLOW_DEBUG=1 never compared its arguments
    torch = pytest.importorskip("torch")
    from mpi4py import MPI
    from torch.distributed.distributed_c10d import AllgatherOptions

    from mpiflow.torch.process_group import ProcessGroupMPIFlow

    opts = AllgatherOptions()
    opts.asyncOp = False
    mpi = MPI.COMM_WORLD.Dup()
    try:
        rank, size = mpi.Get_rank(), mpi.Get_size()
        for checked, want in ((True, {"all_gather": 1}), (False, {})):
            kind = debug_mode.DebugMPICommunicator if checked else MPICommunicator
            group = ProcessGroupMPIFlow(kind(mpi))
            out = torch.zeros(3 * size)
            out[3 * rank:3 * rank + 3] = torch.arange(3.0) + rank
            with count_collectives() as counted:
                group.all_gather_single(out, out[3 * rank:3 * rank + 3], opts).wait()
            assert dict(counted) == want  # the plain group keeps its copy-free MPI_IN_PLACE
            assert out.tolist() == [float(i + r) for r in range(size) for i in range(3)]
    finally:
        mpi.Free()
