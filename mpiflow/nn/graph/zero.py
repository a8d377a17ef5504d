"""ZeRO for ``nn.Graph``: the optimizer's states sharded over the data-parallel ranks.

With ``graph.config.enable_zero(True, stage=1)``, each parameter that is global, broadcast
(``B``) along a mesh axis of more than one rank (the others ``B`` or ``S``: data parallel, or
data and model parallel on a 2-D mesh) and has at least ``shard_min_size`` elements is updated
through a shard of it: a global tensor of the same value whose first such axis is split along
dim 0 (``S(0)``, as OneFlow rewrites it), which takes the parameter's place in the optimizer's
group. Each rank then keeps the optimizer's states (momentum, Adam's moments) for its rows
only, about ``1/N`` of them (``N`` that axis's ranks); after
the update the rows are gathered back into the parameter (one all-gather per parameter). The
updates are elementwise, so the parameters get the same bits as without ZeRO. Gradient
clipping runs on the whole gradients before they are sharded, as without ZeRO. What eager code
writes into a parameter between the graph's calls (``load_state_dict``, an init function, any
in-place op: the parameter's version changes) is copied into its shard when the next call
begins, so the update goes on from the written value.

Stage 2 also shards the gradients: during the graph's calls the parameter's gradients are
accumulated into its shard (:func:`~mpiflow.autograd.graph.redirect_grad`), so the
data-parallel gradient, a partial sum ``P``, is reduce-scattered into ``S(0)`` rows instead
of all-reduced whole, and each rank holds its rows of the gradient only. A reduce-scatter
adds the ranks' values as the all-reduce does where the reduction order is the same: at 2
ranks, and at any rank count under ``flow.use_deterministic_algorithms(True)`` (exact sums);
otherwise MPI's algorithms may add in another order and the parameters agree with stage 1 to
rounding. Clipping (parameter groups with ``clip_grad_max_norm``) then takes the norm over the
shards: the same norm, its partial sums added in another order, so clipped updates agree to
rounding.

Stage 3 shards the parameters too (:mod:`mpiflow.nn.graph.zero3`): the shard becomes the
parameter's storage. Its whole value is all-gathered from the shards when the graph (or eager
code) reads it and let go after the update (and, in a replayed plan, after the last step that
reads it), so between calls each rank holds about ``1/N`` of each sharded parameter. The
gradients take stage 2's path (reduce-scattered into the shards), the update is stage 2's, and
the gather copies rows exactly: stage 3 gives stage 2's bits.

Examples:
    >>> p = nn.Parameter(flow.ones(4))
    >>> opt = flow.optim.SGD([p], lr=0.1, momentum=0.9)
    >>> zero = Zero(opt, min_size=1)
    >>> zero.sharded   # nothing to shard on one rank
    0
"""

from __future__ import annotations

from typing import Any

from ...autograd import no_grad
from ...autograd.graph import redirect_grad
from ...layouts.sbp import Broadcast, Split
from ...tensors.tensor import Tensor
from ..utils import clip_grad_norm_
from . import zero3

__all__ = ["Zero", "state_bytes"]


def _shard_sbp(p: Tensor, min_size: int) -> tuple[Any, ...] | None:
    """The layout of ``p``'s shard: ``p``'s, with its first ``B`` axis of more than one rank
    split along dim 0 (None: ``p`` stays whole: local, under ``min_size`` elements, partial,
    or no such axis)."""
    if not p.is_global or p.ndim < 1 or p.numel() < min_size:
        return None
    if not all(isinstance(s, (Broadcast, Split)) for s in p.sbp):
        return None
    for axis, (s, n) in enumerate(zip(p.sbp, p.placement.mesh_shape)):
        if isinstance(s, Broadcast) and n > 1:
            return (*p.sbp[:axis], Split(0), *p.sbp[axis + 1:])
    return None


class Zero:
    """The shards of one optimizer's parameters, and the update through them.

    Args:
        optim: the optimizer; its groups' shardable parameters are replaced by their shards
            (once, here), so its state is kept per shard.
        min_size: parameters with fewer elements stay whole.
    """

    def __init__(self, optim: Any, min_size: int = 1024, stage: int = 1) -> None:
        self.optim = optim
        self.stage = stage
        self.pairs: list[tuple[Tensor, Tensor]] = []  # (parameter, its shard)
        self.clip: list[tuple[list[Tensor], float, float]] = []
        for group in optim.param_groups:
            whole = list(group["params"])
            params = []
            for p in whole:
                sbp = _shard_sbp(p, min_size)
                if sbp is not None and not any(k is p for k in optim.state):
                    shard = zero3.shard_of(p) if zero3.is_sharded(p) else _shard_of(p, sbp)
                    if stage >= 3 and not zero3.is_sharded(p):
                        zero3.shard_parameter(p, shard)
                    self.pairs.append((p, shard))
                    params.append(shard)
                else:
                    params.append(p)
            if group.get("clip_grad_max_norm") is not None:
                # Stage 1 clips the whole gradients, stage 2 the shards it holds.
                self.clip.append((whole if stage < 2 else params, group["clip_grad_max_norm"],
                                  group.get("clip_grad_norm_type", 2.0)))
                group["clip_grad_max_norm"] = None  # clipped here
            group["params"] = params
        self.versions = [p._version for p, _ in self.pairs]  # as the shards last saw them

    @property
    def sharded(self) -> int:
        """How many parameters are updated through shards."""
        return len(self.pairs)

    def grad_bytes(self) -> int:
        """The bytes of gradient this rank holds now for the optimizer's parameters (their
        shards' rows with stage 2)."""
        seen = {id(p) for p, _ in self.pairs}
        tensors = [t for group in self.optim.param_groups for t in group["params"]]
        tensors += [p for p, _ in self.pairs]
        return sum(int(t.grad._data.nbytes) for t in tensors
                   if t.grad is not None and (id(t) not in seen or self.stage < 2))

    def step(self) -> None:
        """Clip, hand each shard its rows of the gradient (stage 1), step, gather the rows
        back into the parameters."""
        for params, max_norm, norm_type in self.clip:
            clip_grad_norm_(params, max_norm, norm_type)
        with no_grad():
            if self.stage < 2:
                for p, shard in self.pairs:
                    g = p.grad
                    shard.grad = None if g is None else _shard_of(g, shard.sbp)
            self.optim.step()
            for p, shard in self.pairs:
                if zero3.is_sharded(p) and zero3.shard_of(p) is shard:
                    zero3.release(p)  # stage 3: the shard is the storage; let the whole go
                elif shard.grad is not None:
                    whole = shard.to_global(p.placement, p.sbp)
                    p._data[...] = whole._data
                    p._version += 1
            self.versions = [p._version for p, _ in self.pairs]
            for p, shard in self.pairs:
                shard.grad = None
                p.grad = None

    def redirect(self, on: bool) -> None:
        """Stage 2: send (``on``) or stop sending the parameters' gradients to their shards.
        The graph turns it on for its calls only, so the modules used eagerly between calls
        get their own gradients. With ``on``, first copy into the shards what eager code
        wrote into the parameters since the last update (an in-place write changes the
        parameter's version; a stage-3 parameter's value present at all is its value:
        :func:`~.zero3.sync`), so the update goes on from there."""
        for i, (p, shard) in enumerate(self.pairs):
            if on:
                if zero3.is_sharded(p):
                    zero3.sync(p)
                elif p._version != self.versions[i]:
                    with no_grad():
                        shard._data[...] = p.detach().to_global(shard.placement,
                                                                shard.sbp)._data
                    self.versions[i] = p._version
            if self.stage >= 2:
                redirect_grad(p, shard if on else None)

    def parameters(self) -> list[Tensor]:
        """The stage-3 parameters (whose storage is their shard)."""
        return [p for p, _ in self.pairs if zero3.is_sharded(p)]


def _shard_of(t: Tensor, sbp: tuple[Any, ...]) -> Tensor:
    """``t`` as a new global tensor of layout ``sbp`` (its rows copied)."""
    shard = t.detach().to_global(t.placement, sbp)
    out = Tensor(shard._data.copy(), shard._placement, shard._sbp, shard._shape)
    out.requires_grad = t.requires_grad
    return out


def state_bytes(optim: Any) -> int:
    """The bytes this rank holds in ``optim``'s state tensors (its shards of them).

    Examples:
        >>> p = nn.Parameter(flow.ones(4))
        >>> opt = flow.optim.SGD([p], lr=0.1, momentum=0.9)
        >>> p.sum().backward(); opt.step()
        >>> state_bytes(opt)
        16
    """
    total = 0
    for state in optim.state.values():
        for value in state.values():
            if isinstance(value, Tensor):
                total += int(value._data.nbytes)
    return total
