"""mpiflow.nn: the Module API (registration, state dicts, hooks, modes, conversions), the
containers, and each layer's forward pass against numpy."""

from __future__ import annotations

import copy
import math
from collections import OrderedDict

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
import mpiflow.nn as nn
import mpiflow.nn.functional as F
from mpiflow.autograd import no_grad

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()


def data(*shape: int, seed: int = 0) -> numpy.ndarray:
    return numpy.random.default_rng(seed).standard_normal(shape).astype(numpy.float32)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(3, 4)
        self.scale = nn.Parameter(flow.ones(4))
        self.register_buffer("count", flow.zeros(1, dtype=flow.int64))
        self.register_buffer("cache", flow.zeros(2), persistent=False)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.layer(x) * self.scale


# -- Parameter and registration ----------------------------------------------------------------
def test_parameter_is_a_leaf_tensor_sharing_its_data() -> None:
    base = flow.zeros(2, 3)
    p = nn.Parameter(base)
    assert isinstance(p, flow.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad is None
    base[0, 0] = 5.0
    assert p.numpy()[0, 0] == 5.0
    assert not nn.Parameter(flow.zeros(2), requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor(")
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(flow.zeros(2, dtype=flow.int64))


def test_assignment_registers_parameters_children_and_buffers() -> None:
    block = Block()
    assert [n for n, _ in block.named_parameters()] == ["scale", "layer.weight", "layer.bias"]
    assert [n for n, _ in block.named_buffers()] == ["count", "cache"]
    assert [n for n, _ in block.named_children()] == ["layer"]
    assert [n for n, _ in block.named_modules()] == ["", "layer"]
    assert [id(p) for p in block.parameters(recurse=False)] == [id(block.scale)]
    assert block.get_submodule("layer") is block.layer
    block.layer = nn.Identity()  # replacing a child keeps it registered, no parameters left
    assert [n for n, _ in block.named_parameters()] == ["scale"]
    block.scale = None
    assert block.scale is None and list(block.parameters()) == []
    with pytest.raises(TypeError, match="Parameter or None"):
        block.scale = flow.ones(4)
    with pytest.raises(TypeError, match="Module or None"):
        block.layer = 3
    block.plain = 7  # anything else is a plain attribute
    assert block.plain == 7 and "plain" not in block._parameters
    del block.layer
    assert not hasattr(block, "layer")
    with pytest.raises(KeyError, match="contain"):
        block.register_buffer("a.b", flow.zeros(1))
    with pytest.raises(KeyError, match="already exists"):
        block.register_parameter("plain", None)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = block.missing


def test_parameters_before_init_and_shared_parameters() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            self.w = nn.Parameter(flow.zeros(1))

    with pytest.raises(AttributeError, match=r"before Module\.__init__"):
        Broken()
    shared = nn.Linear(2, 2)
    net = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(net.parameters())) == 2  # each shared parameter once
    assert [n for n, _ in net.named_modules()] == ["", "0", "1"]
    assert list(net.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_apply_train_eval_and_requires_grad() -> None:
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.Sequential(nn.ReLU()))
    seen: list[str] = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Dropout", "ReLU", "Sequential", "Sequential"]
    assert net.training and all(m.training for m in net.modules())
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_zero_grad_to_none_or_zeros() -> None:
    layer = nn.Linear(3, 2)
    layer(flow.ones(4, 3)).sum().backward()
    assert layer.weight.grad is not None
    layer.zero_grad(set_to_none=False)
    assert_array_equal(layer.weight.grad.numpy(), numpy.zeros((2, 3)))
    layer.zero_grad()
    assert layer.weight.grad is None and layer.bias.grad is None


# -- state dicts ---------------------------------------------------------------------------------
def test_state_dict_keys_order_and_sharing() -> None:
    net = nn.Sequential(OrderedDict(block=Block(), head=nn.Linear(4, 1)))
    state = net.state_dict()
    assert list(state) == ["block.scale", "block.count", "block.layer.weight",
                           "block.layer.bias", "head.weight", "head.bias"]
    assert not state["head.weight"].requires_grad  # detached, sharing memory
    with no_grad():
        net.head.weight.fill_(2.0)
    assert_array_equal(state["head.weight"].numpy(), numpy.full((1, 4), 2.0))
    assert net.state_dict(keep_vars=True)["head.weight"] is net.head.weight
    assert next(iter(net.state_dict(prefix="model."))) == "model.block.scale"


def test_load_state_dict_round_trip_copies_in_place() -> None:
    src, dst = Block(), Block()
    weight = dst.layer.weight
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dst.layer.weight is weight  # the same object: optimizers stay valid
    for (name, a), (_, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    arrays = {k: v.numpy().astype(numpy.float64) if v.dtype.is_floating_point else v.numpy()
              for k, v in src.state_dict().items()}
    arrays["scale"] = numpy.full(4, 3.0)  # numpy (float64) values are cast
    dst.load_state_dict(arrays)
    assert dst.scale.dtype == flow.float32
    assert_array_equal(dst.scale.numpy(), numpy.full(4, 3.0, dtype=numpy.float32))


def test_load_state_dict_errors_name_the_key_and_copy_nothing() -> None:
    net = Block()
    before = net.layer.weight.numpy().copy()
    state = {k: v.clone() for k, v in Block().state_dict().items()}
    bad = dict(state)
    bad["layer.bias"] = flow.zeros(5)
    with pytest.raises(RuntimeError, match=r"size mismatch for layer.bias: copying a param with "
                                           r"shape \(5,\) from checkpoint, the shape in current "
                                           r"model is \(4,\)"):
        net.load_state_dict(bad)
    assert_array_equal(net.layer.weight.numpy(), before)
    bad = dict(state, scale=numpy.ones(4, dtype=numpy.int32))
    with pytest.raises(RuntimeError, match="dtype mismatch for scale"):
        net.load_state_dict(bad)
    missing = {k: v for k, v in state.items() if k != "count"}
    missing["extra"] = flow.zeros(1)
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "extra"'
                                           r'(.|\n)*Missing key\(s\) in state_dict: "count"'):
        net.load_state_dict(missing)
    assert net.load_state_dict(missing, strict=False) == (["count"], ["extra"])
    assert_array_equal(net.layer.weight.numpy(), state["layer.weight"].numpy())
    with pytest.raises(RuntimeError, match="expected a mpiflow tensor or a numpy array"):
        net.load_state_dict(dict(state, scale=[1.0, 2.0, 3.0, 4.0]))


# -- hooks and calling ---------------------------------------------------------------------------
def test_forward_hooks_change_inputs_and_outputs_and_can_be_removed() -> None:
    layer = nn.Identity()
    calls: list[str] = []
    pre = layer.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    post = layer.register_forward_hook(lambda m, args, out: out + 1)
    layer.register_forward_hook(lambda m, args, out: calls.append("last"))
    layer.register_forward_hook(lambda m, args, out: calls.append("first"), prepend=True)
    assert layer(flow.tensor([1.0])).tolist() == [3.0]
    assert calls == ["first", "last"]
    pre.remove()
    post.remove()
    post.remove()  # a second remove does nothing
    assert layer(flow.tensor([1.0])).tolist() == [1.0]
    kw = layer.register_forward_pre_hook(lambda m, args, kwargs: ((args[0] - 1,), kwargs),
                                         with_kwargs=True)
    assert layer(flow.tensor([1.0])).tolist() == [0.0]
    kw.remove()
    with layer.register_forward_hook(lambda m, args, kwargs, out: out * 0, with_kwargs=True):
        assert layer(flow.tensor([4.0])).tolist() == [0.0]
    assert layer(flow.tensor([4.0])).tolist() == [4.0]
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


def test_repr_matches_pytorch() -> None:
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Dropout(0.1)),
                        nn.LayerNorm(3), nn.Embedding(5, 3, padding_idx=0),
                        nn.Linear(3, 1, bias=False), nn.Softmax(dim=1), nn.GELU())
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Dropout(p=0.1, inplace=False)\n"
        "  )\n"
        "  (3): LayerNorm((3,), eps=1e-05, elementwise_affine=True)\n"
        "  (4): Embedding(5, 3, padding_idx=0)\n"
        "  (5): Linear(in_features=3, out_features=1, bias=False)\n"
        "  (6): Softmax(dim=1)\n"
        "  (7): GELU(approximate='none')\n"
        ")")


def test_to_dtype_keeps_objects_and_skips_integer_buffers() -> None:
    block = Block()
    weight = block.layer.weight
    assert block.to(flow.float64) is block
    assert block.layer.weight is weight and weight.dtype == flow.float64
    assert block.count.dtype == flow.int64 and block.cache.dtype == flow.float64
    assert block.float().scale.dtype == flow.float32
    out = block.double()(flow.ones(2, 3, dtype=flow.float64))
    assert out.dtype == flow.float64
    with pytest.raises(TypeError, match="floating point"):
        block.to(flow.int32)


def test_deepcopy_gives_an_independent_module() -> None:
    net = nn.Sequential(nn.Linear(2, 2))
    twin = copy.deepcopy(net)
    assert isinstance(twin[0].weight, nn.Parameter) and twin[0].weight is not net[0].weight
    with no_grad():
        twin[0].weight.fill_(0.0)
    assert not (net[0].weight.numpy() == 0).all()


# -- containers ----------------------------------------------------------------------------------
def test_sequential_indexing_and_editing() -> None:
    a, b, c = nn.Linear(2, 2), nn.ReLU(), nn.Tanh()
    seq = nn.Sequential(a, b)
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b and list(seq) == [a, b]
    assert isinstance(seq[1:], nn.Sequential) and list(seq[1:]) == [b]
    seq.append(c)
    assert list(seq._modules) == ["0", "1", "2"]
    del seq[0]
    assert list(seq._modules) == ["0", "1"] and seq[0] is b
    seq.insert(0, a)
    seq[2] = nn.Identity()
    assert [type(m).__name__ for m in seq] == ["Linear", "ReLU", "Identity"]
    named = nn.Sequential(OrderedDict(first=a, second=b))
    assert list(named._modules) == ["first", "second"]
    x = flow.tensor(data(3, 2))
    assert_allclose(named(x).numpy(), numpy.maximum(a(x).numpy(), 0))


def test_module_list_and_dict() -> None:
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and len(list(layers.parameters())) == 6
    layers.append(nn.ReLU())
    layers += [nn.Tanh()]
    del layers[0]
    assert [type(m).__name__ for m in layers] == ["Linear", "Linear", "ReLU", "Tanh"]
    assert isinstance(layers[:2], nn.ModuleList) and len(layers[:2]) == 2
    layers.insert(1, nn.Identity())
    assert type(layers[1]).__name__ == "Identity" and list(layers._modules)[-1] == "4"
    heads = nn.ModuleDict({"a": nn.Linear(2, 1)})
    heads["b"] = nn.Linear(2, 3)
    heads.update([("c", nn.ReLU())])
    assert heads.keys() == ["a", "b", "c"] and "b" in heads and len(heads) == 3
    assert [n for n, _ in heads.named_parameters()] == ["a.weight", "a.bias", "b.weight",
                                                        "b.bias"]
    assert isinstance(heads.pop("c"), nn.ReLU) and list(heads) == ["a", "b"]


# -- layers against numpy ------------------------------------------------------------------------
def test_linear_init_bounds_and_forward() -> None:
    flow.manual_seed(3)
    layer = nn.Linear(16, 5)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    assert w.shape == (5, 16) and b.shape == (5,)
    assert numpy.abs(w).max() <= 0.25 and numpy.abs(b).max() <= 0.25
    assert numpy.abs(w).max() > 0.2  # spread over the whole interval
    x = data(7, 16)
    assert_allclose(layer(flow.tensor(x)).numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    x3 = data(2, 3, 16)
    assert_allclose(layer(flow.tensor(x3)).numpy(), x3 @ w.T + b, rtol=1e-5, atol=1e-6)
    assert nn.Linear(3, 2, bias=False)(flow.ones(1, 3)).shape == (1, 2)
    flow.manual_seed(3)
    assert_array_equal(nn.Linear(16, 5).weight.numpy(), w)  # the seed decides


def test_activations_against_numpy() -> None:
    x = data(4, 5) * 3
    t = flow.tensor(x)
    erf = numpy.vectorize(math.erf)
    cases = {
        nn.ReLU(): numpy.maximum(x, 0),
        nn.GELU(): 0.5 * x * (1 + erf(x / math.sqrt(2))),
        nn.GELU("tanh"): 0.5 * x * (1 + numpy.tanh(math.sqrt(2 / math.pi)
                                                    * (x + 0.044715 * x ** 3))),
        nn.Tanh(): numpy.tanh(x),
        nn.Sigmoid(): 1 / (1 + numpy.exp(-x)),
        nn.SiLU(): x / (1 + numpy.exp(-x)),
        nn.LeakyReLU(0.1): numpy.where(x > 0, x, 0.1 * x),
        nn.Softmax(dim=1): numpy.exp(x) / numpy.exp(x).sum(1, keepdims=True),
        nn.LogSoftmax(dim=0): x - numpy.log(numpy.exp(x).sum(0, keepdims=True)),
        nn.Identity(): x,
    }
    for module, want in cases.items():
        assert_allclose(module(t).numpy(), want, rtol=1e-5, atol=1e-6, err_msg=repr(module))
    assert nn.Flatten()(flow.zeros(2, 3, 4)).shape == (2, 12)
    assert nn.Flatten(0, 1)(flow.zeros(2, 3, 4)).shape == (6, 4)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        F.softmax(t)
    relu_in = flow.tensor(x.copy())
    assert F.relu(relu_in, inplace=True) is relu_in and relu_in.numpy().min() >= 0


def test_layer_norm_against_numpy() -> None:
    x = data(3, 4, 5)
    norm = nn.LayerNorm((4, 5))
    with no_grad():
        norm.weight.copy_(flow.tensor(data(4, 5, seed=1)))
        norm.bias.copy_(flow.tensor(data(4, 5, seed=2)))
    mean = x.mean((1, 2), keepdims=True)
    var = x.var((1, 2), keepdims=True)
    want = (x - mean) / numpy.sqrt(var + 1e-5) * data(4, 5, seed=1) + data(4, 5, seed=2)
    assert_allclose(norm(flow.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
    plain = nn.LayerNorm(5, elementwise_affine=False, eps=1e-3)
    assert plain.weight is None and list(plain.parameters()) == []
    m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    assert_allclose(plain(flow.tensor(x)).numpy(), (x - m) / numpy.sqrt(v + 1e-3), rtol=1e-4,
                    atol=1e-5)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        norm(flow.zeros(3, 5, 4))


def test_embedding_forward_and_backward_with_repeated_indices() -> None:
    emb = nn.Embedding(6, 3)
    w = emb.weight.numpy().copy()
    idx = numpy.array([[1, 4, 1], [0, 1, 5]])
    out = emb(flow.tensor(idx))
    assert_array_equal(out.numpy(), w[idx])
    out.sum().backward()
    counts = numpy.bincount(idx.ravel(), minlength=6).astype(numpy.float32)
    assert_array_equal(emb.weight.grad.numpy(), numpy.repeat(counts[:, None], 3, axis=1))
    padded = nn.Embedding(4, 2, padding_idx=-1)
    assert padded.padding_idx == 3 and (padded.weight.numpy()[3] == 0).all()
    padded(flow.tensor([3, 3, 1])).sum().backward()
    assert_array_equal(padded.weight.grad.numpy()[:, 0], [0, 1, 0, 0])
    frozen = nn.Embedding.from_pretrained(flow.tensor(w))
    assert not frozen.weight.requires_grad
    assert_array_equal(frozen(flow.tensor([2])).numpy(), w[[2]])
    with pytest.raises(TypeError, match="integer"):
        emb(flow.zeros(2))
    with pytest.raises(IndexError, match="out of range"):
        emb(flow.tensor([0, 6]))
    with pytest.raises(IndexError, match="out of range"):
        emb(flow.tensor([-1]))


def test_dropout_masks_scales_and_is_identity_in_eval() -> None:
    x = flow.ones(400, 50)
    drop = nn.Dropout(0.3)
    flow.manual_seed(7)
    out = drop(x).numpy()
    kept = out != 0
    assert abs(kept.mean() - 0.7) < 0.02
    assert_allclose(out[kept], 1 / 0.7, rtol=1e-6)
    flow.manual_seed(7)
    assert_array_equal(drop(x).numpy(), out)  # the counter-based generator decides
    assert drop.eval()(x) is x
    assert F.dropout(x, 0.0) is x
    assert (F.dropout(x, 1.0).numpy() == 0).all()
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    leaf = flow.ones(10, requires_grad=True)
    F.dropout(leaf, 0.5).sum().backward()
    assert set(numpy.unique(leaf.grad.numpy())) <= {0.0, 2.0}


# -- init ----------------------------------------------------------------------------------------
def test_init_gains_fans_and_bounds() -> None:
    init = nn.init
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == 5 / 3 and init.calculate_gain("selu") == 0.75
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01 ** 2))
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    assert init._calculate_fan_in_and_fan_out(flow.empty(8, 3, 2, 2)) == (12, 32)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(flow.empty(3))
    w = nn.Parameter(flow.empty(200, 50))
    checks = [
        (lambda: init.kaiming_uniform_(w, a=math.sqrt(5)), 1 / math.sqrt(50)),
        (lambda: init.kaiming_uniform_(w, nonlinearity="relu"), math.sqrt(6 / 50)),
        (lambda: init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu"),
         math.sqrt(6 / 200)),
        (lambda: init.xavier_uniform_(w, gain=2.0), 2 * math.sqrt(6 / 250)),
    ]
    for fill, bound in checks:
        assert fill() is w and w.requires_grad and w.is_leaf
        values = numpy.abs(w.numpy())
        assert values.max() <= bound and values.max() > 0.95 * bound
    init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / 50)) < 0.01
    init.xavier_normal_(w)
    assert abs(w.numpy().std() - math.sqrt(2 / 250)) < 0.005
    init.normal_(w, 3.0, 0.5)
    assert abs(w.numpy().mean() - 3.0) < 0.02
    assert (init.constant_(w, 0.25).numpy() == 0.25).all()
    assert (init.zeros_(w).numpy() == 0).all() and (init.ones_(w).numpy() == 1).all()
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(w, mode="fan_avg")


@pytest.mark.mpi
def test_init_of_a_global_tensor_does_not_depend_on_the_layout() -> None:
    everyone = flow.placement("cpu", list(range(SIZE)))
    shape = (3 * SIZE + 1, 5)
    flow.manual_seed(11)
    local = nn.init.kaiming_uniform_(nn.Parameter(flow.empty(*shape)))
    for sbp in (flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast):
        flow.manual_seed(11)
        glob = nn.Parameter(flow.empty(*shape, placement=everyone, sbp=sbp))
        nn.init.kaiming_uniform_(glob)
        assert glob.sbp == (sbp,)
        assert_array_equal(glob.numpy(), local.numpy())
