"""The ``torch`` suite: torch.distributed on the ``"mpiflow"`` backend, beside raw mpi4py and gloo.

``python -m mpiflow.bench --suite torch`` times, in one job and on the same float32 tensors,
three ways of running each collective of torch.distributed:

* ``backend``: the torch call on the default group, whose backend is ``"mpiflow"``
  (:mod:`mpiflow.torch`), e.g. ``dist.all_reduce(t)``;
* ``raw``: raw mpi4py on the tensors' memory, e.g.
  ``comm.Allreduce(MPI.IN_PLACE, t.numpy(), MPI.SUM)`` on a duplicate of ``COMM_WORLD``: the
  floor, so ``backend / raw`` is what the backend adds to MPI;
* ``gloo``: the same torch call with ``group=gloo``, a gloo group over the same ranks: what a
  torch user runs on CPUs without this backend, so ``gloo / backend > 1`` means the backend wins.

The operations are those of the OSU suite (all_reduce, all_gather, reduce_scatter, broadcast,
all_to_all, a send/recv ping-pong between ranks 0 and 1), with its sizes, layouts and bus
factors (``--min-bytes``, ``--max-bytes``, ``--factor``), timed by
:func:`.runner.measure_interleaved` in two phases: first the backend and raw mpi4py, back to
back in every round at every size, for every operation; then the backend and gloo alike, each
pair's order alternating from round to round. (Timed in the same rounds as gloo, the backend's
ratio to raw mpi4py rose by 5-15% at 1-4 MiB: an effect of gloo's activity on the 2 cores that
a job on one backend does not see.) Then one training step of an MLP (``Linear(512, 1024)``,
ReLU, ``Linear(1024, 512)``: about 1M parameters; batch 32 per rank, MSE loss, SGD) in
``DistributedDataParallel`` on the backend and on gloo, same weights and data, beside the same
step without communication, its bound (that step plus raw all-reduces of its gradients), DDP
with a comm hook that communicates nothing (what DDP itself costs), DDP with
``gradient_as_bucket_view=True`` and DDP on a group in overlap mode: the sides in balanced
orders (:func:`balanced_orders`) round by round.

The default group is made with an explicit TCP store (``tcp://``, a port rank 0 picks and
broadcasts over MPI), since gloo needs a store every rank reaches; a default group that already
exists on the ``"mpiflow"`` backend is used as it is. torch runs ``--torch-threads`` (1) intra-op
threads per rank, so that ranks do not compete for cores.

torch is imported only when the suite runs, so this module imports without it, and
:func:`torch_problem` says what is missing before anything runs. The goals (reported, never
asserted; judged at 2 ranks): all_reduce through the backend within 3x raw mpi4py at 8 B and
within 1.10x from 1 MiB, and the DDP step within 1.10x of its bound (the same step with no
DDP plus raw mpi4py all-reduces of its gradients).

The results and the goals' checks live in :mod:`.torch_results`; this module builds the
operations and runs them.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import Any, NamedTuple

import numpy
from mpi4py import MPI

from ..communication.mpi.group import world_comm
from ..core import settings
from ..core.extras import install_hint
from .metrics import (
    ALL_REDUCE_FACTOR,
    ONE_FACTOR,
    SPREAD_FACTOR,
    BusFactor,
    Layout,
    Timings,
    chunked_layout,
    gather_layout,
    scatter_layout,
    whole_layout,
)
from .plan import Settings
from .torch_results import (
    ALL_REDUCE_GOALS,
    DDP_GOAL,
    GOAL_RANKS,
    DDPStepResult,
    GoalCheck,
    TorchOpResult,
    TorchResult,
    TorchRow,
    goal_checks,
)

__all__ = ["ALL_REDUCE_GOALS", "DDP_GOAL", "DDP_SIDES", "GOAL_RANKS", "SIDES", "TORCH_OPS",
           "DDPStepResult", "Env", "GoalCheck", "Prepared", "TorchOp", "TorchOpResult",
           "TorchResult", "TorchRow", "TorchSettings", "balanced_orders", "build_ddp_steps",
           "build_op", "goal_checks", "init_groups", "overlap_group", "run_torch",
           "torch_problem", "torch_settings"]

SIDES = ("backend", "raw", "gloo")
DDP_SIDES = ("backend", "gloo", "local", "bound", "reducer", "bucket_view", "overlap")
ITEMSIZE = 4  # float32


# -- settings ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TorchOp:
    """One operation of the suite: how to build its three sides at one size.

    Attributes:
        name: the name ``--torch-ops`` selects it by (the OSU case's name).
        functions: the torch.distributed function it calls, newest name first (torch 2.13
            renamed ``all_gather_into_tensor`` and ``reduce_scatter_tensor``; the old names
            warn on every call).
        call: the torch call as printed (``{fn}``: the function's name).
        raw_call: the raw mpi4py call as printed.
        layout: ``(nbytes, itemsize, nranks) -> Layout`` (:mod:`.metrics`).
        bus_factor: nccl-tests' bus factor.
        build: ``(env, layout, fn) -> Prepared``: allocates the tensors, returns the sides.
        min_ranks: the fewest ranks it runs on.
        ops_per_call: operations per call (a ping-pong is 2 one-way messages).
    """

    name: str
    functions: tuple[str, ...]
    call: str
    raw_call: str
    layout: Callable[[int, int, int], Layout]
    bus_factor: BusFactor
    build: Callable[[Env, Layout, Any], Prepared]
    min_ranks: int = 1
    ops_per_call: int = 1


@dataclass(frozen=True)
class TorchSettings(Settings):
    """:class:`.plan.Settings` and the torch suite's own options.

    Attributes:
        torch_ops: what to run, from :data:`TORCH_OPS` and ``"ddp"``, in that order.
        torch_ddp_features: the MLP's input and output features.
        torch_ddp_width: its hidden features.
        torch_ddp_batch: rows per rank per step.
        torch_threads: torch's intra-op threads per rank (``torch.set_num_threads``).
    """

    torch_ops: tuple[str, ...] = ()
    torch_ddp_features: int = 512
    torch_ddp_width: int = 1024
    torch_ddp_batch: int = 32
    torch_threads: int = 1


def torch_settings(settings: Settings, ops: Sequence[str] | None = None,
                   **options: Any) -> TorchSettings:
    """``settings`` with the torch suite's options (the others keep theirs or the defaults).

    Args:
        settings: the run's settings.
        ops: the operations to run, by name (None: every one and the DDP step).
        options: ``torch_ddp_features``, ``torch_ddp_width``, ``torch_ddp_batch``,
            ``torch_threads``.

    Raises:
        ValueError: an unknown operation, or a count that is not positive.
    """
    known = (*TORCH_OPS, "ddp")
    current = {f.name: getattr(settings, f.name) for f in fields(settings)}
    chosen = tuple(ops) if ops is not None else current.get("torch_ops") or known
    bad = [n for n in chosen if n not in known]
    if bad:
        raise ValueError(f"unknown torch operation {bad[0]!r}; choose from {', '.join(known)}")
    current.update(options, torch_ops=tuple(n for n in known if n in chosen))
    for name in ("torch_ddp_features", "torch_ddp_width", "torch_ddp_batch", "torch_threads"):
        if current.get(name, 1) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive")
    return TorchSettings(**current)


# -- the operations ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Env:
    """Where the sides run: torch, the raw communicator, the gloo group, this rank, and an
    "mpiflow" group in overlap mode (:func:`overlap_group`; None: the DDP step makes one)."""

    torch: Any
    dist: Any
    comm: Any
    gloo: Any
    rank: int
    nranks: int
    overlap: Any = None


class Prepared(NamedTuple):
    """An operation built at one size: its sides' zero-argument calls, and its tensors."""

    sides: dict[str, Callable[[], Any]]
    send: Any | None
    recv: Any


def _tensors(env: Env, layout: Layout) -> tuple[Any | None, Any]:
    zeros, float32 = env.torch.zeros, env.torch.float32
    send = zeros(layout.send, dtype=float32) if layout.send else None
    return send, zeros(layout.recv, dtype=float32)


# Zeros stay zeros under repeated sums; every side works on the same tensors (the raw side on
# their numpy views, which share the memory).

def _build_all_reduce(env: Env, layout: Layout, fn: Any) -> Prepared:
    _, t = _tensors(env, layout)
    return Prepared({"backend": partial(fn, t),
                     "raw": partial(env.comm.Allreduce, MPI.IN_PLACE, t.numpy(), MPI.SUM),
                     "gloo": partial(fn, t, group=env.gloo)}, None, t)


def _build_all_gather(env: Env, layout: Layout, fn: Any) -> Prepared:
    inp, out = _tensors(env, layout)
    assert inp is not None
    return Prepared({"backend": partial(fn, out, inp),
                     "raw": partial(env.comm.Allgather, inp.numpy(), out.numpy()),
                     "gloo": partial(fn, out, inp, group=env.gloo)}, inp, out)


def _build_reduce_scatter(env: Env, layout: Layout, fn: Any) -> Prepared:
    inp, out = _tensors(env, layout)
    assert inp is not None
    return Prepared({"backend": partial(fn, out, inp),
                     "raw": partial(env.comm.Reduce_scatter_block, inp.numpy(), out.numpy(),
                                    MPI.SUM),
                     "gloo": partial(fn, out, inp, group=env.gloo)}, inp, out)


def _build_broadcast(env: Env, layout: Layout, fn: Any) -> Prepared:
    _, t = _tensors(env, layout)
    return Prepared({"backend": partial(fn, t, 0),
                     "raw": partial(env.comm.Bcast, t.numpy(), 0),
                     "gloo": partial(fn, t, 0, group=env.gloo)}, None, t)


def _build_all_to_all(env: Env, layout: Layout, fn: Any) -> Prepared:
    inp, out = _tensors(env, layout)
    assert inp is not None
    return Prepared({"backend": partial(fn, out, inp),
                     "raw": partial(env.comm.Alltoall, inp.numpy(), out.numpy()),
                     "gloo": partial(fn, out, inp, group=env.gloo)}, inp, out)


def _idle() -> None:
    """What a rank outside the ping-pong pair runs."""


def _ping_pong(first: Callable[[], Any], then: Callable[[], Any]) -> Callable[[], None]:
    def call() -> None:
        first()
        then()

    return call


def _build_send_recv(env: Env, layout: Layout, fn: Any) -> Prepared:
    """osu_latency's ping-pong between ranks 0 and 1; other ranks stay idle."""
    _, t = _tensors(env, layout)
    if env.rank > 1:
        return Prepared(dict.fromkeys(SIDES, _idle), None, t)
    a, comm, dist, peer = t.numpy(), env.comm, env.dist, 1 - env.rank
    pairs = {"backend": (partial(dist.send, t, peer), partial(dist.recv, t, peer)),
             "raw": (partial(comm.Send, a, peer, 0), partial(comm.Recv, a, peer, 0)),
             "gloo": (partial(dist.send, t, peer, group=env.gloo),
                      partial(dist.recv, t, peer, group=env.gloo))}
    return Prepared({side: _ping_pong(send, recv) if env.rank == 0 else _ping_pong(recv, send)
                     for side, (send, recv) in pairs.items()}, None, t)


_OPS = (
    TorchOp("all_reduce", ("all_reduce",), "dist.{fn}(t)",
            "comm.Allreduce(MPI.IN_PLACE, t.numpy(), MPI.SUM)", whole_layout, ALL_REDUCE_FACTOR,
            _build_all_reduce),
    TorchOp("all_gather", ("all_gather_single", "all_gather_into_tensor"), "dist.{fn}(out, inp)",
            "comm.Allgather(inp.numpy(), out.numpy())", gather_layout, SPREAD_FACTOR,
            _build_all_gather),
    TorchOp("reduce_scatter", ("reduce_scatter_single", "reduce_scatter_tensor"),
            "dist.{fn}(out, inp)",
            "comm.Reduce_scatter_block(inp.numpy(), out.numpy(), MPI.SUM)", scatter_layout,
            SPREAD_FACTOR, _build_reduce_scatter),
    TorchOp("broadcast", ("broadcast",), "dist.{fn}(t, 0)", "comm.Bcast(t.numpy(), 0)",
            whole_layout, ONE_FACTOR, _build_broadcast),
    TorchOp("all_to_all", ("all_to_all_single",), "dist.{fn}(out, inp)",
            "comm.Alltoall(inp.numpy(), out.numpy())", chunked_layout, SPREAD_FACTOR,
            _build_all_to_all),
    TorchOp("send_recv", ("send",), "dist.send(t, peer); dist.recv(t, peer)",
            "comm.Send(a, peer, 0); comm.Recv(a, peer, 0)", whole_layout, ONE_FACTOR,
            _build_send_recv, min_ranks=2, ops_per_call=2),
)
OPS: dict[str, TorchOp] = {op.name: op for op in _OPS}
TORCH_OPS = tuple(OPS)
"""The operations of the suite, in the order they run (then ``"ddp"``, the training step)."""


def _function(dist: Any, op: TorchOp) -> tuple[str, Any]:
    """The first of ``op.functions`` this torch has, and the function."""
    for name in op.functions:
        fn = getattr(dist, name, None)
        if fn is not None:
            return name, fn
    raise RuntimeError(f"this torch has none of torch.distributed.{'/'.join(op.functions)}")


def build_op(env: Env, name: str, nbytes: int) -> tuple[Prepared, Layout]:
    """Build operation ``name`` at the requested size ``nbytes`` (float32 tensors of zeros).

    Returns:
        The sides and the tensors they share, and the layout.
    """
    op = OPS[name]
    layout = op.layout(nbytes, ITEMSIZE, env.nranks)
    return op.build(env, layout, _function(env.dist, op)[1]), layout


# -- running ----------------------------------------------------------------------------------

def _import_torch(threads: int) -> tuple[Any, Any]:
    """torch and torch.distributed, the ``"mpiflow"`` backend registered."""
    # Before torch's first import, so that its OpenMP pool starts with this many threads.
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    import torch
    import torch.distributed as dist

    from .. import torch as _backend  # noqa: F401 - registers the "mpiflow" backend

    if not dist.is_available():
        raise ImportError("this torch was built without torch.distributed")
    return torch, dist


def torch_problem(settings: Settings) -> str | None:
    """Why the torch suite cannot run here (torch missing or unusable), or None.

    Imports torch and :mod:`mpiflow.torch` (no communication).
    """
    threads = getattr(settings, "torch_threads", 1)
    try:
        _import_torch(threads)
    except Exception as exc:  # ImportError, or an old torch failing in mpiflow.torch
        return (f"--suite torch needs PyTorch >= 2.1 with torch.distributed "
                f"({install_hint('torch')}): {type(exc).__name__}: {exc}")
    return None


def init_groups(dist: Any) -> tuple[Any, bool]:
    """Make the default group on the ``"mpiflow"`` backend and a gloo group (collective).

    The default group gets a TCP store on rank 0 (its port picked by rank 0 and broadcast over
    MPI; ``127.0.0.1`` when every rank runs on one node), which gloo's group then uses. An
    existing default group on the ``"mpiflow"`` backend is kept.

    Returns:
        The gloo group, and whether the default group was made here (to destroy it after).

    Raises:
        RuntimeError: the default group exists on another backend.
    """
    comm = world_comm.mpi_comm
    made = False
    if dist.is_initialized():
        backend = dist.get_backend()
        if backend != "mpiflow":
            raise RuntimeError(f"the default process group runs on {backend!r}; the torch "
                               f"suite needs it on 'mpiflow' (or not yet initialized)")
    else:
        one_node = len(set(comm.allgather(MPI.Get_processor_name()))) == 1
        address = None
        if comm.rank == 0:
            host = "127.0.0.1" if one_node else socket.getfqdn()
            with socket.socket() as s:
                s.bind(("127.0.0.1" if one_node else "", 0))
                address = (host, s.getsockname()[1])
        host, port = comm.bcast(address, root=0)
        dist.init_process_group("mpiflow", init_method=f"tcp://{host}:{port}",
                                rank=comm.rank, world_size=comm.size)
        made = True
    return dist.new_group(backend="gloo"), made


def balanced_orders(n: int) -> list[list[int]]:
    """Orders of ``n`` sides in which each side runs first, last and right after every other
    side equally often (a balanced Latin square: ``n`` orders, ``2n`` for odd ``n``).

    >>> balanced_orders(3)
    [[0, 1, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0], [0, 2, 1], [1, 0, 2]]
    """
    first = [0] + [(k + 1) // 2 if k % 2 else n - k // 2 for k in range(1, n)]
    orders = [[(i + j) % n for j in first] for i in range(n)]
    return orders + [o[::-1] for o in orders] if n % 2 else orders


def overlap_group(dist: Any) -> Any:
    """A new group of every rank on the "mpiflow" backend in overlap mode, as
    ``MPIFLOW_TORCH_OVERLAP=1`` makes them: its asynchronous collectives (DDP's bucket
    all-reduces) start non-blocking MPI operations that the progress thread completes
    (collective)."""
    with settings.scoped("MPIFLOW_TORCH_OVERLAP", "1"):  # read when the group is made
        return dist.new_group(backend="mpiflow")


def _interleaved(groups: Sequence[dict[str, Callable[[], Any]]], sides: Sequence[str],
                 iters: Sequence[int], warmup: Sequence[int], rounds: int,
                 timer: Any) -> numpy.ndarray:
    """:func:`.runner.measure_interleaved` of the ``sides`` of each group, round ``r`` in the
    ``r``-th of :func:`balanced_orders` (cycling), so that every side follows every other
    equally often. Returns seconds per call shaped ``(groups, rounds, sides)``."""
    from .runner import measure_interleaved

    orders = balanced_orders(len(sides))
    times = numpy.zeros((len(groups), rounds, len(sides)))
    for r in range(rounds):
        order = orders[r % len(orders)]
        batch = measure_interleaved([[g[sides[k]] for k in order] for g in groups], iters,
                                    warmup if r == 0 else [0] * len(groups), 1, timer)
        times[:, r, order] = batch[:, 0, :]
    return times


def _time_op(op: TorchOp, env: Env, settings: Settings, timer: Any,
             sides: tuple[str, str]) -> numpy.ndarray:
    """Two sides of ``op`` at every size (collective): seconds per operation shaped
    ``(sizes, rounds, 2)``, on tensors made for this measurement."""
    fn = _function(env.dist, op)[1]
    layouts = [op.layout(size, ITEMSIZE, env.nranks) for size in settings.sizes]
    prepared = [op.build(env, layout, fn) for layout in layouts]
    times = _interleaved([p.sides for p in prepared], sides,
                         [settings.timed_iterations(la.nbytes) for la in layouts],
                         [settings.warmup_iterations(la.nbytes) for la in layouts],
                         settings.rounds, timer)
    return times / op.ops_per_call


def _op_result(op: TorchOp, env: Env, settings: Settings, raw: numpy.ndarray | None,
               gloo: numpy.ndarray | None) -> TorchOpResult:
    """The rows of ``op`` from its two phases (None: skipped, too few ranks)."""
    call = op.call.format(fn=_function(env.dist, op)[0])
    if raw is None or gloo is None:
        return TorchOpResult(op.name, call, op.raw_call, op.bus_factor.formula, ())
    factor = op.bus_factor(env.nranks)

    def series(times: numpy.ndarray, i: int, k: int) -> tuple[float, ...]:
        return tuple(times[i, :, k].tolist())

    rows = []
    for i, size in enumerate(settings.sizes):
        nbytes = op.layout(size, ITEMSIZE, env.nranks).nbytes
        rows.append(TorchRow(
            op.name, size, nbytes, settings.timed_iterations(nbytes),
            settings.warmup_iterations(nbytes), env.nranks, factor,
            Timings(SIDES, (series(raw, i, 0), series(raw, i, 1), series(gloo, i, 1)),
                    settings.stat),
            Timings(("backend", "gloo"), (series(gloo, i, 0), series(gloo, i, 1)),
                    settings.stat)))
    return TorchOpResult(op.name, call, op.raw_call, op.bus_factor.formula, tuple(rows))


def build_ddp_steps(env: Env, features: int, width: int, batch: int
                    ) -> tuple[dict[str, Callable[[], Any]], int, dict[str, Any]]:
    """Copies of the MLP (same weights, same data) and one training step of each.

    ``backend``: ``DistributedDataParallel(model)`` on the default group; ``gloo``:
    ``DistributedDataParallel(model, process_group=gloo)``; ``local``: the model alone;
    ``bound``: the model alone, then raw mpi4py all-reduces (``Allreduce`` in place, one per
    gradient, averaged) of the same gradients, DDP's bound; ``reducer``: ``backend`` with a
    comm hook that communicates nothing, so ``reducer - local`` is what DDP itself costs
    (bucket copies, hooks, its forward's bookkeeping) whatever the backend; ``bucket_view``:
    ``DistributedDataParallel(model, gradient_as_bucket_view=True)`` on the default group;
    ``overlap``: ``DistributedDataParallel(model)`` on :func:`overlap_group`. Collective
    (wrapping broadcasts the parameters).

    Returns:
        The steps by side (:data:`DDP_SIDES`), the parameter count, and the models by side.
    """
    torch = env.torch
    from torch.nn.parallel import DistributedDataParallel

    def model() -> Any:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(features, width), torch.nn.ReLU(),
                                   torch.nn.Linear(width, features))

    def no_comm(state: Any, bucket: Any) -> Any:
        done = torch.futures.Future()
        done.set_result(bucket.buffer())
        return done

    # DDP checks a hook's annotations against its own classes (this module's are strings)
    no_comm.__annotations__ = {"bucket": env.dist.GradBucket}

    generator = torch.Generator().manual_seed(1000 + env.rank)
    x = torch.randn(batch, features, generator=generator)
    y = torch.randn(batch, features, generator=generator)
    models = {"backend": DistributedDataParallel(model()),
              "gloo": DistributedDataParallel(model(), process_group=env.gloo),
              "local": model(), "bound": model(), "reducer": DistributedDataParallel(model()),
              "bucket_view": DistributedDataParallel(model(), gradient_as_bucket_view=True),
              "overlap": DistributedDataParallel(model(), process_group=(
                  env.overlap if env.overlap is not None else overlap_group(env.dist)))}
    models["reducer"].register_comm_hook(None, no_comm)
    mse = torch.nn.functional.mse_loss
    raw = MPI.COMM_WORLD
    scale = 1.0 / raw.Get_size()

    def stepper(m: Any, reduce: bool = False) -> Callable[[], None]:
        opt = torch.optim.SGD(m.parameters(), lr=1e-3)
        params = list(m.parameters())

        def step() -> None:
            opt.zero_grad()
            mse(m(x), y).backward()
            if reduce:
                for p in params:
                    raw.Allreduce(MPI.IN_PLACE, p.grad.numpy(), op=MPI.SUM)
                    p.grad.mul_(scale)
            opt.step()

        return step

    params = sum(p.numel() for p in models["local"].parameters())
    return ({side: stepper(models[side], side == "bound") for side in DDP_SIDES}, params,
            models)


def _measure_ddp(env: Env, settings: TorchSettings, timer: Any) -> DDPStepResult:
    steps, params, _ = build_ddp_steps(env, settings.torch_ddp_features, settings.torch_ddp_width,
                                    settings.torch_ddp_batch)
    nbytes = params * ITEMSIZE
    iters = settings.timed_iterations(nbytes)
    warmup = max(1, settings.warmup_iterations(nbytes))
    times = _interleaved([steps], DDP_SIDES, [iters], [warmup], settings.rounds, timer)
    timings = Timings(DDP_SIDES, tuple(tuple(times[0, :, k].tolist())
                                       for k in range(len(DDP_SIDES))), settings.stat)
    return DDPStepResult(settings.torch_ddp_features, settings.torch_ddp_width,
                         settings.torch_ddp_batch, params, env.nranks, iters, timings)


def run_torch(settings: Settings) -> TorchResult:
    """Run the torch suite (collective over the world): every operation, then the DDP step.

    Args:
        settings: sizes, iterations, rounds; a :class:`TorchSettings` for the suite's own
            options (otherwise their defaults).

    Raises:
        ImportError: torch is missing (:func:`torch_problem` says so before a run).
    """
    opts = torch_settings(settings)  # the defaults where settings has no torch options
    torch, dist = _import_torch(opts.torch_threads)
    torch.set_num_threads(opts.torch_threads)
    with contextlib.suppress(RuntimeError):  # settable only before torch's first parallel work
        torch.set_num_interop_threads(opts.torch_threads)
    gloo, made = init_groups(dist)
    overlap = overlap_group(dist) if "ddp" in opts.torch_ops else None
    raw, timer = MPI.COMM_WORLD.Dup(), MPI.COMM_WORLD.Dup()
    try:
        env = Env(torch, dist, raw, gloo, world_comm.rank, world_comm.size, overlap)
        ops = [OPS[name] for name in opts.torch_ops if name in OPS]
        runs = [op for op in ops if env.nranks >= op.min_ranks]
        # First every operation beside raw mpi4py, then beside gloo: see the module's notes.
        by_raw = {op.name: _time_op(op, env, opts, timer, ("backend", "raw")) for op in runs}
        by_gloo = {op.name: _time_op(op, env, opts, timer, ("backend", "gloo")) for op in runs}
        results = tuple(_op_result(op, env, opts, by_raw.get(op.name), by_gloo.get(op.name))
                        for op in ops)
        ddp = _measure_ddp(env, opts, timer) if "ddp" in opts.torch_ops else None
    finally:
        raw.Free()
        timer.Free()
        dist.destroy_process_group(gloo)
        if overlap is not None:
            dist.destroy_process_group(overlap)
        if made:
            dist.destroy_process_group()
    return TorchResult(str(torch.__version__), torch.get_num_threads(), world_comm.size,
                       opts.rounds, opts.stat, results, ddp)


# -- formatting -------------------------------------------------------------------------------
