"""The pipeline-parallel program of OneFlow's documentation (parallelism chapter), on mpiflow.

The same API calls as the documented program, with ``import mpiflow as flow`` and ``cpu``
for ``cuda``: the quickstart MLP cut in two stages, stage 0 (flatten, Linear(784, 512), ReLU)
on rank 0 and stage 1 (Linear(512, 512), ReLU, Linear(512, 10), ReLU) on rank 1, the
activation moved between them with ``to_global``, the stages marked with
``config.set_stage``, two micro-batches per step (gradient accumulation), SGD. Each step
prints the two micro-batches' losses (on rank 1, where the loss lives; rank 0 prints an empty
tensor, as OneFlow does).

Run: ``mpiexec -n 2 python examples/oneflow_pipeline.py`` (written for exactly 2 ranks).
"""

import mpiflow as flow

BATCH_SIZE = 16
BROADCAST = [flow.sbp.broadcast]
P0 = flow.placement("cpu", [0])
P1 = flow.placement("cpu", [1])


class Stage0Module(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = flow.nn.Flatten()
        self.linear0 = flow.nn.Linear(28 * 28, 512)
        self.relu0 = flow.nn.ReLU()

    def forward(self, x):
        return self.relu0(self.linear0(self.flatten(x)))


class Stage1Module(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = flow.nn.Linear(512, 512)
        self.relu1 = flow.nn.ReLU()
        self.linear2 = flow.nn.Linear(512, 10)
        self.relu2 = flow.nn.ReLU()

    def forward(self, x):
        hidden = self.relu1(self.linear1(x))
        return self.relu2(self.linear2(hidden))


class PipelineModule(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.m_stage0 = Stage0Module()
        self.m_stage1 = Stage1Module()
        self.m_stage0.to_global(placement=P0, sbp=BROADCAST)
        self.m_stage1.to_global(placement=P1, sbp=BROADCAST)

    def forward(self, x):
        activation = self.m_stage0(x)
        return self.m_stage1(activation.to_global(placement=P1, sbp=BROADCAST))


module_pipeline = PipelineModule()
sgd = flow.optim.SGD(module_pipeline.parameters(), lr=0.001)


class PipelineGraph(flow.nn.Graph):
    def __init__(self):
        super().__init__()
        self.module_pipeline = module_pipeline
        self.module_pipeline.m_stage0.config.set_stage(stage_id=0, placement=P0)
        self.module_pipeline.m_stage1.config.set_stage(stage_id=1, placement=P1)
        self.loss_fn = flow.nn.CrossEntropyLoss()
        self.config.set_gradient_accumulation_steps(2)
        self.add_optimizer(sgd)

    def build(self, x, y):
        loss = self.loss_fn(self.module_pipeline(x), y)
        loss.backward()
        return loss


graph_pipeline = PipelineGraph()

x = flow.randn(BATCH_SIZE, 1, 28, 28).to_global(P0, BROADCAST)
y = flow.randint(0, 10, (BATCH_SIZE,)).to_global(P1, BROADCAST)

for _ in range(20):
    loss = graph_pipeline(x, y)
    print(loss.to_local())
