"""OneFlow's graph/test_graph_pipeline.py on mpiflow (see README.md's table).

Four stages, one rank each (``1n4d``): Linear(1452, 8) on rank 0, Linear(8, 8) on ranks 1 and
2, Linear(8, 1) on rank 3, no biases, weights 0.00023; MSELoss("sum") on rank 3; SGD lr 1e-4;
4 micro-batches of 4 per call; 3 calls. The same layers trained eagerly on one rank with
local tensors, micro-batch by micro-batch (loss * 0.25, a step every 4), give the same
losses, compared with ``array_equal`` as OneFlow does. OneFlow reads 22 x 22 x 3 images and
their labels from an ImageNet OFRecord set in ``build()``; here a seeded batch of that shape
is the graph's input (the labels as (n, 1) floats: OneFlow broadcasts an (n,) label against
the (n, 1) output).
"""

from __future__ import annotations

import numpy
from oneflow_case import RANK, exactly, on_every_rank

import mpiflow as flow
from mpiflow.nn.graph import GraphModule

B = [flow.sbp.broadcast]
ITERS = 3


class StageModule(flow.nn.Module):
    def __init__(self, *linear_args: object) -> None:
        super().__init__()
        self.linear = flow.nn.Linear(*linear_args)
        flow.nn.init.constant_(self.linear.weight, 0.00023)

    def forward(self, input: flow.Tensor) -> flow.Tensor:
        return self.linear(input)


def _data() -> tuple[numpy.ndarray, numpy.ndarray]:
    rng = numpy.random.default_rng(2022)
    images = rng.integers(0, 256, (ITERS, 16, 1452)).astype(numpy.float32)
    labels = rng.integers(0, 1000, (ITERS, 16, 1)).astype(numpy.float32)
    return images, labels


def _train_with_graph() -> list[numpy.ndarray]:
    p = [flow.placement("cpu", [r]) for r in range(4)]

    class PipelineModule(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stage_0_m = StageModule(1452, 8, False).to_global(placement=p[0], sbp=B)
            self.stage_1_m = StageModule(8, 8, False).to_global(placement=p[1], sbp=B)
            self.stage_2_m = StageModule(8, 8, False).to_global(placement=p[2], sbp=B)
            self.stage_3_m = StageModule(8, 1, False).to_global(placement=p[3], sbp=B)

        def forward(self, image: flow.Tensor) -> flow.Tensor:
            out = self.stage_0_m(image)
            out = self.stage_1_m(out.to_global(placement=p[1], sbp=B))
            out = self.stage_2_m(out.to_global(placement=p[2], sbp=B))
            return self.stage_3_m(out.to_global(placement=p[3], sbp=B))

    pp_m = PipelineModule()
    sgd = flow.optim.SGD(pp_m.parameters(), lr=0.0001)

    class PipelineGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.pp_m = pp_m
            self.pp_m.stage_0_m.to(GraphModule).set_stage(0)
            self.pp_m.stage_1_m.to(GraphModule).set_stage(1)
            self.pp_m.stage_2_m.to(GraphModule).set_stage(2)
            self.pp_m.stage_3_m.to(GraphModule).set_stage(3)
            self.mseloss = flow.nn.MSELoss("sum")
            self.add_optimizer(sgd)
            self.config.set_gradient_accumulation_steps(4)

        def build(self, image: flow.Tensor, label: flow.Tensor) -> flow.Tensor:
            pp_m.train()
            out = self.pp_m(image)
            loss = self.mseloss(out, label.to_global(placement=p[3], sbp=B))
            loss.backward()
            return loss

    graph = PipelineGraph()
    images, labels = _data()
    losses = []
    for i in range(ITERS):
        image = flow.tensor(images[i]).to_global(p[0], B)
        label = flow.tensor(labels[i]).to_global(p[0], B)
        losses.append(graph(image, label).to_local().numpy())  # empty off rank 3
    return losses


def _train_with_module() -> list[numpy.ndarray]:
    linears = [flow.nn.Linear(a, b, False) for a, b in [(1452, 8), (8, 8), (8, 8), (8, 1)]]
    for linear in linears:
        flow.nn.init.constant_(linear.weight, 0.00023)
    mseloss = flow.nn.MSELoss("sum")
    sgd = flow.optim.SGD([w for m in linears for w in m.parameters()], lr=0.0001)
    images, labels = _data()
    losses = []
    for it in range(ITERS * 4):
        s = (it % 4) * 4
        out = flow.tensor(images[it // 4][s:s + 4])
        for linear in linears:
            out = linear(out)
        loss = mseloss(out, flow.tensor(labels[it // 4][s:s + 4]))
        losses.append(loss.numpy())
        (loss * 0.25).backward()
        if it % 4 == 3:
            sgd.step()
            sgd.zero_grad()
    return losses


@exactly(4)
def test_graph_pipeline() -> None:
    graph_losses = _train_with_graph()
    module_losses = _train_with_module()

    def check() -> None:
        if RANK == 3:
            for i in range(ITERS * 4):
                assert numpy.array_equal(module_losses[i], graph_losses[i // 4][i % 4]), (
                    i, module_losses[i], graph_losses[i // 4])

    on_every_rank(check)
