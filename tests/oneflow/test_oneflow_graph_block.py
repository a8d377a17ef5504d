"""OneFlow's graph/test_graph_block.py on mpiflow (see README.md's table).

Modules with their own helper methods and attributes, a trained Linear inside a custom
module, Sequential / ModuleList / ModuleDict blocks with activation checkpointing set through
``config``, ParameterList / ParameterDict: the graph's output ``array_equal`` to the module's.
OneFlow's ``flow._C.matmul`` is ``flow.matmul``. Expected differences: inside a module's own
forward, ``self.linear`` is the module (OneFlow: a Block proxy), and parameters are not
``is_lazy`` (mpiflow traces eager tensors); OneFlow's checks of its lazy-mode scope protos
(the ``checkpointing`` attribute) are replaced by the settings themselves.
"""

from __future__ import annotations

import numpy
from oneflow_case import exactly

import mpiflow as flow

X8 = [[-0.94630778, -0.83378579, -0.87060891], [2.0289922, -0.28708987, -2.18369248],
      [0.35217619, -0.67095644, -1.58943879], [0.08086036, -1.81075924, 1.20752494],
      [0.8901075, -0.49976737, -1.07153746], [-0.44872912, -1.07275683, 0.06256855],
      [-0.22556897, 0.74798368, 0.90416439], [0.48339456, -2.32742195, -0.59321527]]


@exactly(1)
def test_module_has_custom_func() -> None:
    class CustomModuleHasFunc(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.data_mem = 10

        def forward(self, x: flow.Tensor) -> flow.Tensor:
            return self._custom_func(x)

        def _custom_func(self, x: flow.Tensor) -> flow.Tensor:
            assert self.data_mem == 10
            return x

    class CustomGraphHasFunc(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.m = CustomModuleHasFunc()

        def build(self, x: flow.Tensor) -> flow.Tensor:
            return self.m(x)

    x = flow.tensor(numpy.ones((10, 10)), dtype=flow.float32)
    assert numpy.array_equal(x.numpy(), CustomGraphHasFunc()(x).numpy())


@exactly(1)
def test_block_with_parameter() -> None:
    linear = flow.nn.Linear(3, 8).to("cpu")
    flow.nn.init.constant_(linear.weight, 2.068758)
    flow.nn.init.constant_(linear.bias, 0.23)
    of_sgd = flow.optim.SGD(linear.parameters(), lr=0.001, momentum=0.9)
    x = flow.tensor(X8, dtype=flow.float32, device="cpu", requires_grad=False)

    class CustomModule(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = linear

        def forward(self, x: flow.Tensor) -> flow.Tensor:
            return self._forward_impl(x)

        def _forward_impl(self, x: flow.Tensor) -> flow.Tensor:
            assert self.linear is linear  # expected difference: OneFlow gives a Block
            return self.linear(x)

    class LinearTrainGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.m = CustomModule()
            self.add_optimizer(of_sgd)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            out = self.m(x).sum()
            out.backward()
            assert isinstance(self.m.linear, flow.nn.graph.Block)
            return out

    before = linear.weight.numpy().copy()
    out = LinearTrainGraph()(x)
    want = (x.numpy() @ before.T + 0.23).sum()
    numpy.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    assert not numpy.array_equal(linear.weight.numpy(), before)  # the step ran


class SubModule0(flow.nn.Module):
    def __init__(self, out: int = 10) -> None:
        super().__init__()
        self.linear = flow.nn.Linear(10, out, False)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.linear(x)


def _input() -> flow.Tensor:
    return flow.tensor(numpy.random.randn(4, 10), dtype=flow.float32)


@exactly(1)
def test_block_with_seq_container() -> None:
    list_of_m = [SubModule0() for _ in range(3)]

    class SeqGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.linears = flow.nn.Sequential(*list_of_m)
            self.linears.config.activation_checkpointing = True

        def build(self, x: flow.Tensor) -> flow.Tensor:
            return self.linears(x)

    seq_m = flow.nn.Sequential(*list_of_m)
    seq_g = SeqGraph()
    assert seq_g.linears.config.activation_checkpointing
    input = _input()
    assert numpy.array_equal(seq_m(input).numpy(), seq_g(input).numpy())


@exactly(1)
def test_block_with_list_container() -> None:
    list_of_m = [SubModule0() for _ in range(3)]

    class ModuleListGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.linears = flow.nn.ModuleList(list_of_m)
            for i, _ in enumerate(self.linears):
                self.linears[i].config.activation_checkpointing = True

        def build(self, x: flow.Tensor) -> flow.Tensor:
            for i, _ in enumerate(self.linears):
                x = self.linears[i](x)
            return x

    module_list_m = flow.nn.ModuleList(list_of_m)
    graph = ModuleListGraph()
    assert all(graph.linears[i].config.activation_checkpointing for i in range(3))
    input = _input()
    want = input
    for m in module_list_m:
        want = m(want)
    assert numpy.array_equal(want.numpy(), graph(input).numpy())


@exactly(1)
def test_block_with_dict_container() -> None:
    dict_of_m = {"0": SubModule0(10), "1": SubModule0(6)}

    class ModuleDictGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.linears = flow.nn.ModuleDict(dict_of_m)
            for k, _ in self.linears.items():
                self.linears[k].config.activation_checkpointing = True

        def build(self, x: flow.Tensor) -> flow.Tensor:
            return self.linears["1"](self.linears["0"](x))

    module_dict_m = flow.nn.ModuleDict(dict_of_m)
    input = _input()
    want = module_dict_m["1"](module_dict_m["0"](input))
    assert numpy.array_equal(want.numpy(), ModuleDictGraph()(input).numpy())


@exactly(1)
def test_block_with_para_list_container() -> None:
    list_of_p = [flow.nn.Parameter(flow.randn(10, 10)) for _ in range(2)]

    class ParaListModule(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.params = flow.nn.ParameterList(list_of_p)

        def forward(self, x: flow.Tensor) -> flow.Tensor:
            for i, _ in enumerate(self.params):
                x = flow.matmul(x, self.params[i])
            return x

    class ParaListGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.params = flow.nn.ParameterList(list_of_p)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            for i, _ in enumerate(self.params):
                x = flow.matmul(x, self.params[i])
            return x

    input = _input()
    assert numpy.array_equal(ParaListModule()(input).numpy(), ParaListGraph()(input).numpy())


@exactly(1)
def test_block_with_para_dict_container() -> None:
    dict_of_p = {"0": flow.nn.Parameter(flow.randn(10, 3)),
                 "1": flow.nn.Parameter(flow.randn(10, 10))}

    class ParaDictModule(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.params = flow.nn.ParameterDict(dict_of_p)

        def forward(self, x: flow.Tensor) -> flow.Tensor:
            return flow.matmul(x, self.params["0"])

    class ParaDictGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.params = flow.nn.ParameterDict(dict_of_p)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            return flow.matmul(x, self.params["0"])

    input = _input()
    assert numpy.array_equal(ParaDictModule()(input).numpy(), ParaDictGraph()(input).numpy())
