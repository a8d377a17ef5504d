"""Data-parallel training: packed gradient sync and the DDP step, each beside its alternatives.

Two suites of ``python -m mpiflow.bench``:

* ``grad_sync``: a model of ``tensors`` float32 parameters whose sizes are log-spaced between
  two element counts (by default 100 tensors of 1 Ki..1 Mi elements, about 62 MB). Six sides
  sum the gradients over the ranks: ``dist.sync_gradients(model, average=False)`` (packed into
  buckets of one dtype of up to 64 MiB, a few all-reduces), the same call on a copy of the model
  wrapped by ``DistributedDataParallel`` whose gradients are views of its flat buckets
  (``bucket_view``: each bucket all-reduced where it lies), a variant that fuses only the small
  tensors (``fused_small``: the tensors below ``fuse_bytes`` packed into buckets as
  ``sync_gradients`` packs them, their all-reduces started first, and every larger tensor
  all-reduced in place, without the two copies packing costs), one ``dist.all_reduce(p.grad)``
  per parameter (the MPI seed's way) and one raw ``comm.Allreduce(MPI.IN_PLACE, g, MPI.SUM)``
  per parameter on the same arrays. The gradients are zeros, which stay zeros under repeated
  sums.
* ``ddp``: one training step (``zero_grad``, forward, ``((y * y).mean()).backward()``, SGD
  ``step``) of ``layers`` x ``Linear(width, width)`` with ReLU between, on ``batch`` rows per
  rank, five ways: DistributedDataParallel with its buckets (all-reduces started during
  backward; gradients are views of the buckets), the same with
  ``gradient_as_bucket_view=False`` (gradients copied into the buckets and back), DDP with one
  bucket (its one all-reduce starts when backward ends: no overlap),
  no DDP but ``sync_gradients`` after backward, and the same model without any communication.

The pure parts (:func:`param_sizes`, the result classes and their derived figures) need no MPI.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy
from mpi4py import MPI

from .. import distributed as dist
from ..communication import ReduceOp, count_collectives
from ..communication.mpi.group import world_comm
from ..parallel.packing import make_buckets
from .metrics import Timings
from .plan import Settings

__all__ = [
    "DDP_SIDES",
    "GRAD_SIDES",
    "GRAD_SMALL_GOAL",
    "GRAD_SYNC_GOAL",
    "DDPResult",
    "GradSyncResult",
    "build_ddp_steps",
    "build_grad_sync",
    "param_sizes",
    "run_ddp",
    "run_grad_sync",
]

GRAD_SYNC_GOAL = 1.10
"""Issue #13's goal for the 100-tensor model of 1 Ki..1 Mi elements at 4 ranks: the
``bucket_view`` sync at most this many times as slow as ``raw_chunked`` (raw all-reduces of one
flat buffer holding every gradient, the bound of any packing)."""

GRAD_SMALL_GOAL = 3.0
"""Issue #13's goal for the model of small tensors (100 of 256..4 Ki elements) at 4 ranks: the
``bucket_view`` sync at least this many times faster than one all-reduce per parameter."""

_SYNC_BUCKET_BYTES = 64 << 20  # sync_gradients' bucket size
GRAD_SIDES = ("packed", "bucket_view", "fused_small", "per_tensor", "raw_per_tensor",
              "raw_chunked")
DDP_SIDES = ("ddp", "ddp_copy", "ddp_one_bucket", "sync_after", "local")


def param_sizes(count: int, lo: int, hi: int) -> list[int]:
    """``count`` element counts log-spaced from ``lo`` to ``hi`` (both included), ascending.

    Raises:
        ValueError: ``count`` < 1 or not ``0 < lo <= hi``.

    Examples:
        >>> param_sizes(3, 1024, 1 << 20)
        [1024, 32768, 1048576]
    """
    if count < 1 or not 0 < lo <= hi:
        raise ValueError(f"need count >= 1 and 0 < lo <= hi, got {count}, {lo}, {hi}")
    if count == 1:
        return [hi]
    step = (math.log(hi) - math.log(lo)) / (count - 1)
    return [round(math.exp(math.log(lo) + i * step)) for i in range(count)]


# -- gradient sync -------------------------------------------------------------------------------

@dataclass(frozen=True)
class GradSyncResult:
    """The gradient sync of one model.

    Attributes:
        tensors: how many parameter tensors.
        lo: the smallest tensor in elements.
        hi: the largest tensor in elements.
        nbytes: all gradients together, in bytes.
        nranks: the number of ranks.
        iters: timed syncs per batch.
        collectives: per side, the communicator operations of one sync, by name.
        timings: the sides of :data:`GRAD_SIDES`.
        fuse_bytes: the ``fused_small`` side packs the tensors smaller than this.
    """

    tensors: int
    lo: int
    hi: int
    nbytes: int
    nranks: int
    iters: int
    collectives: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
    timings: Timings
    fuse_bytes: int = 256 << 10
    chunk_bytes: int = 16 << 20

    @property
    def speedup(self) -> float:
        """Per-parameter ``dist.all_reduce`` time over the packed time (paired by round)."""
        return self.timings.ratio("per_tensor", "packed")

    @property
    def raw_speedup(self) -> float:
        """Per-parameter raw ``Allreduce`` time over the packed time (paired by round)."""
        return self.timings.ratio("raw_per_tensor", "packed")

    @property
    def bound(self) -> float:
        """Per-parameter ``dist.all_reduce`` time over raw ``Allreduce`` calls on the flat
        buffer of every gradient, in pieces of ``chunk_bytes`` (paired by round): about the
        most any packing can gain, since it must still all-reduce every byte, and here
        starts from gradients already packed."""
        return self.timings.ratio("per_tensor", "raw_chunked")

    @property
    def view_speedup(self) -> float:
        """Per-parameter ``dist.all_reduce`` time over the ``bucket_view`` time (paired)."""
        return self.timings.ratio("per_tensor", "bucket_view")

    @property
    def view_over_bound(self) -> float:
        """The ``bucket_view`` time over the ``raw_chunked`` time (paired): what mpiflow's
        sync of DDP's flat buckets costs beyond raw MPI on one flat buffer."""
        return self.timings.ratio("bucket_view", "raw_chunked")

    @property
    def fused_speedup(self) -> float:
        """Per-parameter ``dist.all_reduce`` time over the ``fused_small`` time (paired)."""
        return self.timings.ratio("per_tensor", "fused_small")

    @property
    def is_goal_model(self) -> bool:
        """Whether this is the goal's model (100 tensors of 1 Ki..1 Mi elements)."""
        return (self.tensors, self.lo, self.hi) == (100, 1 << 10, 1 << 20)

    @property
    def is_small_model(self) -> bool:
        """Whether this is the goal's model of small tensors (100 of 256..4 Ki elements)."""
        return (self.tensors, self.lo, self.hi) == (100, 256, 4 << 10)

    @property
    def goal_met(self) -> bool | None:
        """Whether this model's goal holds (:data:`GRAD_SYNC_GOAL` for the 1 Ki..1 Mi model,
        :data:`GRAD_SMALL_GOAL` for the small one); None where none applies (another model,
        not 4 ranks)."""
        if self.nranks != 4:
            return None
        if self.is_goal_model:
            return self.view_over_bound <= GRAD_SYNC_GOAL
        if self.is_small_model:
            return self.view_speedup >= GRAD_SMALL_GOAL
        return None

    def goal_text(self) -> str:
        """The goal that applies to this model, in words ("" for none)."""
        if self.is_goal_model:
            return f"bucket_view <= {GRAD_SYNC_GOAL:g}x raw_chunked"
        if self.is_small_model:
            return f"bucket_view >= {GRAD_SMALL_GOAL:g}x faster than per_tensor"
        return ""

    def calls(self, side: str) -> int:
        """How many communicator operations one sync of ``side`` issued."""
        return sum(n for _, n in dict(self.collectives)[side])

    def to_json(self) -> dict[str, Any]:
        """The result as JSON-ready data (times in microseconds)."""
        return {"tensors": self.tensors, "min_elements": self.lo, "max_elements": self.hi,
                "bytes": self.nbytes, "ranks": self.nranks, "iters": self.iters,
                "collectives": {side: dict(ops) for side, ops in self.collectives},
                "fuse_bytes": self.fuse_bytes, "speedup": self.speedup,
                "raw_speedup": self.raw_speedup, "fused_speedup": self.fused_speedup,
                "view_speedup": self.view_speedup, "view_over_bound": self.view_over_bound,
                "bound": self.bound, "chunk_bytes": self.chunk_bytes,
                "goal": {"what": self.goal_text(), "ranks": 4,
                         "applies": self.goal_met is not None, "met": self.goal_met},
                "sides": self.timings.to_json()}


def build_grad_sync(sizes: list[int], comm: Any = None, fuse_bytes: int = 256 << 10,
                    chunk_bytes: int = 16 << 20
                    ) -> tuple[dict[str, Any], dict[str, Callable[[], Any]]]:
    """Modules holding one float32 parameter per size, zero gradients, and the six syncs
    (collective: the ``bucket_view`` module is wrapped by DistributedDataParallel).

    The gradients are consecutive views of one flat buffer, so that the ``raw_chunked`` side
    (raw ``Allreduce`` calls on that buffer, ``chunk_bytes`` at a time: about the floor of
    every packing scheme) sums the same gradients as the others. The ``bucket_view`` side syncs
    a second module of the same parameters, whose gradients are views of DistributedDataParallel's
    flat buckets (its default buckets: 25 MiB, the first 1 MiB, last parameter first).

    Args:
        sizes: the parameters' element counts.
        comm: the mpi4py communicator of the raw side (default: mpiflow's own).
        fuse_bytes: the ``fused_small`` side packs the tensors smaller than this.
        chunk_bytes: the piece of the ``raw_chunked`` side.

    Returns:
        Per side (:data:`GRAD_SIDES`), the module whose gradients it sums, and its sync call;
        no communication yet beyond the wrapping.
    """
    from ..nn import Module, Parameter
    from ..nn.parallel import DistributedDataParallel
    from ..tensors.creation import from_numpy, zeros

    comm = world_comm.mpi_comm if comm is None else comm
    model = Module()
    flat = numpy.zeros(sum(sizes), dtype=numpy.float32)
    offsets = numpy.cumsum([0, *sizes]).tolist()
    grads = [from_numpy(flat[offsets[i]:offsets[i + 1]]) for i in range(len(sizes))]
    for i, (size, grad) in enumerate(zip(sizes, grads, strict=True)):
        p = Parameter(zeros(size))
        p.grad = grad
        model.register_parameter(f"p{i}", p)
    arrays = [g.numpy() for g in grads]
    viewed = Module()
    for i, size in enumerate(sizes):
        viewed.register_parameter(f"p{i}", Parameter(zeros(size)))
    viewed = DistributedDataParallel(viewed, broadcast_parameters=False,
                                     broadcast_buffers=False, gradient_as_bucket_view=True)
    viewed._flat_gradients.attach_all()  # zero gradients, views of the buckets
    all_reduce, allreduce, in_place, total = dist.all_reduce, comm.Allreduce, MPI.IN_PLACE, MPI.SUM

    small = [a for a in arrays if a.nbytes < fuse_bytes]
    large = [a for a in arrays if a.nbytes >= fuse_bytes]
    buckets = make_buckets([(a.shape, a.dtype) for a in small], _SYNC_BUCKET_BYTES)

    def packed() -> None:
        dist.sync_gradients(model, average=False)

    def bucket_view() -> None:
        dist.sync_gradients(viewed, average=False)

    def fused_small() -> None:
        works = [(b, world_comm.all_reduce(b.pack(small), ReduceOp.SUM, async_op=True))
                 for b in buckets]
        for a in large:
            world_comm.all_reduce(a)
        for bucket, work in works:
            assert work is not None
            work.wait()
            bucket.unpack(small)

    def per_tensor() -> None:
        for g in grads:
            all_reduce(g)

    def raw_per_tensor() -> None:
        for a in arrays:
            allreduce(in_place, a, total)

    step = max(1, chunk_bytes // flat.itemsize)
    pieces = [flat[i:i + step] for i in range(0, flat.size, step)]

    def raw_chunked() -> None:
        for piece in pieces:
            allreduce(in_place, piece, total)

    calls = {"packed": packed, "bucket_view": bucket_view, "fused_small": fused_small,
             "per_tensor": per_tensor, "raw_per_tensor": raw_per_tensor,
             "raw_chunked": raw_chunked}
    return {side: viewed if side == "bucket_view" else model for side in calls}, calls


def run_grad_sync(settings: Settings) -> list[GradSyncResult]:
    """Measure the six syncs of every model of ``settings.grad_ranges`` (collective).

    Each model's six sides are timed in ``settings.rounds`` interleaved rounds, with
    ``settings.timed_iterations(bytes)`` syncs per batch; the collectives of one sync of each
    side are counted first.

    Returns:
        One result per model, identical on every rank.
    """
    from .runner import measure_interleaved

    results = []
    timer = MPI.COMM_WORLD.Dup()
    try:
        for lo, hi in settings.grad_ranges:
            sizes = param_sizes(settings.grad_tensors, lo, hi)
            _, calls = build_grad_sync(sizes, fuse_bytes=settings.grad_fuse_bytes,
                                       chunk_bytes=settings.grad_chunk_bytes)
            counted = []
            for side in GRAD_SIDES:
                with count_collectives() as ops:
                    calls[side]()
                counted.append((side, tuple(sorted(ops.items()))))
            nbytes = 4 * sum(sizes)
            iters = settings.timed_iterations(nbytes)
            warmup = settings.warmup_iterations(nbytes)
            times = measure_interleaved([[calls[s] for s in GRAD_SIDES]], [iters], [warmup],
                                        settings.rounds, timer)
            timings = Timings(GRAD_SIDES, tuple(tuple(times[0, :, i].tolist())
                                                for i in range(len(GRAD_SIDES))), settings.stat)
            results.append(GradSyncResult(len(sizes), lo, hi, nbytes, world_comm.size, iters,
                                          tuple(counted), timings, settings.grad_fuse_bytes,
                                          settings.grad_chunk_bytes))
    finally:
        timer.Free()
    return results


# -- DDP step ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DDPResult:
    """One training step of the DDP model, five ways.

    Attributes:
        layers: Linear layers.
        width: their features.
        batch: rows per rank.
        param_bytes: the parameters' (and gradients') size in bytes.
        bucket_mb: the bucket size of the ``ddp`` side.
        buckets: how many buckets the ``ddp`` side has.
        nranks: the number of ranks.
        iters: timed steps per batch.
        timings: the sides of :data:`DDP_SIDES`.
    """

    layers: int
    width: int
    batch: int
    param_bytes: int
    bucket_mb: float
    buckets: int
    nranks: int
    iters: int
    timings: Timings

    @property
    def comm_exposed(self) -> float:
        """Seconds a step without overlap spends beyond the local step (its communication)."""
        return self.timings.time("ddp_one_bucket") - self.timings.time("local")

    @property
    def overlap_saved(self) -> float:
        """Seconds the overlapped step saves over the one-bucket step."""
        return self.timings.time("ddp_one_bucket") - self.timings.time("ddp")

    @property
    def hidden_fraction(self) -> float | None:
        """The share of the exposed communication that overlap hides (None when none is)."""
        exposed = self.comm_exposed
        return self.overlap_saved / exposed if exposed > 0 else None

    @property
    def overlap_speedup(self) -> float:
        """The one-bucket step's time over the overlapped step's, paired by round."""
        return self.timings.ratio("ddp_one_bucket", "ddp")

    @property
    def view_speedup(self) -> float:
        """The step with gradients copied into the buckets over the step with gradients as
        bucket views (``ddp_copy`` / ``ddp``), paired by round."""
        return self.timings.ratio("ddp_copy", "ddp")

    def to_json(self) -> dict[str, Any]:
        """The result as JSON-ready data (times in microseconds)."""
        return {"layers": self.layers, "width": self.width, "batch": self.batch,
                "param_bytes": self.param_bytes, "bucket_mb": self.bucket_mb,
                "buckets": self.buckets, "ranks": self.nranks, "iters": self.iters,
                "overlap_speedup": self.overlap_speedup, "view_speedup": self.view_speedup,
                "comm_exposed_us": self.comm_exposed * 1e6,
                "overlap_saved_us": self.overlap_saved * 1e6,
                "hidden_fraction": self.hidden_fraction,
                "vs_local": {s: self.timings.ratio(s, "local") for s in self.timings.sides},
                "sides": self.timings.to_json()}


def build_ddp_steps(layers: int, width: int, batch: int, bucket_mb: float
                    ) -> tuple[dict[str, Callable[[], Any]], int, int]:
    """Five copies of the model (same weights) and one training step of each (collective).

    Wrapping with DistributedDataParallel broadcasts the parameters, so every rank must call
    this at the same point.

    Returns:
        The steps by side (:data:`DDP_SIDES`), the parameters' bytes, and the number of buckets
        of the ``ddp`` side.
    """
    from .. import optim
    from ..nn import Linear, ReLU, Sequential
    from ..nn.parallel import DistributedDataParallel
    from ..tensors.creation import tensor
    from ..tensors.random import manual_seed

    def model() -> Any:
        manual_seed(0)
        mods: list[Any] = []
        for i in range(layers):
            mods.append(Linear(width, width))
            if i < layers - 1:
                mods.append(ReLU())
        return Sequential(*mods)

    rng = numpy.random.default_rng(world_comm.rank)
    x = tensor(rng.standard_normal((batch, width), dtype=numpy.float32))
    models = {"ddp": DistributedDataParallel(model(), bucket_size_mb=bucket_mb),
              "ddp_copy": DistributedDataParallel(model(), bucket_size_mb=bucket_mb,
                                                  gradient_as_bucket_view=False),
              "ddp_one_bucket": DistributedDataParallel(model(), bucket_size_mb=1 << 20),
              "sync_after": model(), "local": model()}

    def stepper(m: Any, sync: bool) -> Callable[[], None]:
        opt = optim.SGD(m.parameters(), lr=1e-6)

        def step() -> None:
            opt.zero_grad()
            y = m(x)
            (y * y).mean().backward()
            if sync:
                dist.sync_gradients(m)
            opt.step()

        return step

    steps = {side: stepper(m, side == "sync_after") for side, m in models.items()}
    param_bytes = sum(p.numel() * 4 for p in models["local"].parameters())
    buckets = len(models["ddp"]._ddp_reducer.buckets)
    return steps, param_bytes, buckets


def run_ddp(settings: Settings) -> DDPResult:
    """Time the five training steps in interleaved rounds (collective).

    Each batch runs ``settings.timed_iterations(parameter bytes)`` steps.
    """
    from .runner import measure_interleaved

    steps, param_bytes, buckets = build_ddp_steps(settings.ddp_layers, settings.ddp_width,
                                                  settings.ddp_batch, settings.ddp_bucket_mb)
    iters = settings.timed_iterations(param_bytes)
    warmup = max(1, settings.warmup_iterations(param_bytes))
    timer = MPI.COMM_WORLD.Dup()
    try:
        times = measure_interleaved([[steps[s] for s in DDP_SIDES]], [iters], [warmup],
                                    settings.rounds, timer)
    finally:
        timer.Free()
    timings = Timings(DDP_SIDES, tuple(tuple(times[0, :, i].tolist())
                                       for i in range(len(DDP_SIDES))), settings.stat)
    return DDPResult(settings.ddp_layers, settings.ddp_width, settings.ddp_batch, param_bytes,
                     settings.ddp_bucket_mb, buckets, world_comm.size, iters, timings)
