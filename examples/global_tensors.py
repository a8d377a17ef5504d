"""The oneflow.distributed seed's global-tensor examples, on mpiflow with a "cpu" placement.

Run: ``mpiexec -n 2 python examples/global_tensors.py`` (any number of ranks works).
"""

from __future__ import annotations

import mpiflow as flow


def main() -> None:
    ranks = list(range(flow.env.get_world_size()))

    # Construct a global tensor: randn with a placement and an sbp.
    placement = flow.placement(type="cpu", ranks=ranks)
    sbp = flow.sbp.split(dim=0)
    x = flow.randn(4, 5, placement=placement, sbp=sbp)
    assert x.shape == flow.Size([4, 5])

    # Convert a local tensor to a global one: each rank's (2, 5) tensor is its component.
    local = flow.randn(2, 5)
    x_global = local.to_global(placement=placement, sbp=flow.sbp.split(0))
    assert x_global.shape == flow.Size([2 * len(ranks), 5])

    # Redistribute: S(0) -> B gathers the whole value on every rank.
    y = x.to_global(placement=placement, sbp=flow.sbp.broadcast)
    assert y.to_local().shape == flow.Size([4, 5])

    # Ops redistribute for you: S(0) + S(1) works.
    a = flow.randn(4, 4, placement=placement, sbp=flow.sbp.split(0))
    b = flow.randn(4, 4, placement=placement, sbp=flow.sbp.split(1))
    z = a + b

    # Back to a local tensor: this rank's component.
    part = z.to_local()
    assert part.is_local

    # numpy() of a global tensor is collective: every rank calls it, one prints.
    checksum = float(z.numpy().sum())
    if flow.env.get_rank() == 0:
        print(f"x: {x.shape} {x.sbp}; z = a + b: {z.shape} {z.sbp}; local part {part.shape}")
        print(f"checksum {checksum:.6g}")


if __name__ == "__main__":
    main()
