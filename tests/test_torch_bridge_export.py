"""torch.export programs imported as axes graphs: named axes, variables, every transformer."""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import axgraph as ng  # noqa: E402
from axgraph.frontends.torch import (TorchBridgeError, UnsupportedOperatorError,  # noqa: E402
                                     import_exported, imported_ops)
from axgraph.serialization import (load_graph, restore_variables, save_graph,  # noqa: E402
                                   save_variables)
from axgraph.visualize import graph_to_dot  # noqa: E402

HERE = os.path.abspath(__file__)


class Net(nn.Module):
    """Flatten, dense layers, a layer norm, a residual, two outputs."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 8)
        self.norm = nn.LayerNorm(8)
        self.fc2 = nn.Linear(8, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        h = self.norm(torch.tanh(self.fc1(x.flatten(1))))
        h = h + nn.functional.gelu(self.fc2(h)) * 0.5
        return torch.log_softmax(self.out(h), -1), (h * h).mean(-1, keepdim=True)


def exported(model, *inputs, **dynamic):
    torch.manual_seed(0)
    return torch.export.export(model.eval(), inputs, dynamic_shapes=dynamic.get("shapes"))


@pytest.fixture(scope="module")
def imported():
    torch.manual_seed(0)
    model = Net().eval()
    program = torch.export.export(model, (torch.randn(5, 3, 4),),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    return model, import_exported(program)


def test_axes_are_named_after_the_dims_inputs_and_parameters(imported):
    model, program = imported
    (x,) = program.inputs.values()
    assert [a.name for a in x.axes] == ["batch", "x_1", "x_2"]
    assert x.axes[0].length is None  # the Dim: any batch binds it
    scores, energy = program.outputs
    assert [a.name for a in scores.axes] == ["batch", "out_weight_0"]
    assert [a.length for a in energy.axes][1:] == [1]
    assert program.axes["batch"] is x.axes[0]


def test_parameters_are_variables_holding_their_values(imported):
    model, program = imported
    assert list(program.variables) == [name for name, _ in model.named_parameters()]
    for name, parameter in model.named_parameters():
        variable = program.variables[name]
        assert variable.name.startswith(name)
        np.testing.assert_array_equal(variable.initial_value, parameter.detach().numpy())
    text = ng.format_graph(program.outputs)
    assert "fc1.weight" in text and "(fc1_weight_0:8, fc1_weight_1:12)" in text
    assert "fc2.bias" in graph_to_dot(program.outputs)


@pytest.mark.parametrize("transformer", ["cpu", "numpy", "jax"])
def test_the_program_runs_on_every_transformer_for_every_batch(imported, transformer):
    if transformer == "jax":
        pytest.importorskip("jax")
    model, program = imported
    with ng.make_transformer(transformer) as t:
        run = t.computation(program.outputs, *program.inputs.values())
        for batch in (5, 2, 9):
            x = torch.randn(batch, 3, 4)
            for got, expected in zip(run(x.numpy()), model(x)):
                np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_variables_save_and_restore_by_their_names(imported, tmp_path):
    model, program = imported
    path = tmp_path / "net.npz"
    with ng.make_transformer("cpu") as t:
        t.computation(program.outputs, *program.inputs.values())
        save_variables(path, program.variables, t)
    again = import_exported(exported(Net(), torch.randn(5, 3, 4),
                                     shapes=({0: torch.export.Dim("batch")},)))
    x = torch.randn(4, 3, 4)
    with ng.make_transformer("numpy") as t:
        run = t.computation(again.outputs[0], *again.inputs.values())
        restore_variables(path, again.variables, t)
        np.testing.assert_allclose(run(x.numpy()), model(x)[0].detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


class Gram(nn.Module):
    """A product of a tensor with its own transpose, and size-1 broadcasting."""

    def forward(self, x, scale):
        return torch.mm(x, x.t()) * scale - x.sum(1, keepdim=True)


def test_a_product_of_a_tensor_with_itself_keeps_its_two_dims_apart():
    x, scale = torch.randn(4, 3), torch.randn(4, 1)
    program = import_exported(exported(Gram(), x, scale))
    (result,) = program.outputs
    assert len(result.axes) == 2 and result.axes[0] is not result.axes[1]
    with ng.make_transformer("numpy") as t:
        got = t.computation(result, *program.inputs.values())(x.numpy(), scale.numpy())
    np.testing.assert_allclose(got, Gram()(x, scale).numpy(), rtol=1e-5, atol=1e-6)


class Scan(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 0) * 2  # no import rule


def test_ops_without_a_rule_are_named_with_their_line():
    with pytest.raises(UnsupportedOperatorError) as caught:
        import_exported(exported(Scan(), torch.ones(3)))
    assert "aten.cumsum.default" in str(caught.value)
    assert caught.value.location[0] == HERE
    assert "aten.addmm.default" in imported_ops()


class CeilPool(nn.Module):
    def forward(self, x):
        return nn.functional.max_pool2d(x, 2, ceil_mode=True)


def test_arguments_beyond_a_rule_are_refused_with_the_bridges_reason():
    with pytest.raises(UnsupportedOperatorError, match="max_pool2d_with_indices.*ceil_mode"):
        import_exported(exported(CeilPool(), torch.ones(1, 1, 5, 5)))


# -- convolutional networks, dim-splitting reshapes, symbolic batches ------------------------


class SmallCNN(nn.Module):
    """Convolutions (padded, strided, dilated, grouped), batch norm, pooling, a dense head."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.grouped = nn.Conv2d(8, 6, 3, stride=2, padding=2, dilation=2, groups=2)
        self.head = nn.Linear(6, 4)

    def forward(self, x):
        h = nn.functional.max_pool2d(torch.relu(self.norm(self.conv(x))), 2)
        h = nn.functional.avg_pool2d(self.grouped(h), 2, stride=1, padding=1)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))


class Signal(nn.Module):
    """A 1-d convolution and a transposed one."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, stride=2, dilation=2, groups=2, bias=False)
        self.back = nn.ConvTranspose1d(6, 2, 3, stride=2, padding=1)

    def forward(self, x):
        return self.back(torch.tanh(self.conv(x)))


class Attention(nn.Module):
    """Multi-head self-attention written by hand: (N, T, H*D) split to (N, T, H, D)."""

    def __init__(self, width=16, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        n, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (y.view(n, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        weights = torch.softmax(q @ k.transpose(-2, -1) / (c // self.heads) ** 0.5, dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(n, t, c))


def _randomized(model):
    """The model with batch norms whose running statistics are not the identity."""
    torch.manual_seed(1)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-1, 1)
            module.running_var.uniform_(0.5, 2)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.5, 0.5)
    return model.eval()


CASES = {
    "cnn": (lambda: _randomized(SmallCNN()), (2, 3, 10, 10), ({0: torch.export.Dim("batch")},)),
    "signal": (Signal, (3, 4, 11), None),
    "attention": (Attention, (3, 5, 16), ({0: torch.export.Dim("batch")},)),
}


def _program(case):
    make, shape, dynamic = CASES[case]
    torch.manual_seed(0)
    model = make().eval()
    return model, import_exported(torch.export.export(model, (torch.randn(*shape),),
                                                      dynamic_shapes=dynamic))


def _expected(model, x):
    with torch.no_grad():
        return model(x).numpy()


@pytest.mark.parametrize("transformer", ["numpy", "cpu", "jax"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_networks_agree_with_pytorch_on_every_transformer(case, transformer):
    if transformer == "jax":
        pytest.importorskip("jax")
    model, program = _program(case)
    shape = CASES[case][1]
    batches = (shape[0], 2, 7) if CASES[case][2] else (shape[0],)
    with ng.make_transformer(transformer) as t:
        run = t.computation(program.outputs[0], *program.inputs.values())
        for batch in batches:
            x = torch.randn(batch, *shape[1:])
            np.testing.assert_allclose(run(x.numpy()), _expected(model, x), rtol=1e-4,
                                       atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_imported_networks_save_load_and_run_again(case, tmp_path):
    model, program = _program(case)
    path = save_graph(program.outputs[0], tmp_path / f"{case}.axg",
                      inputs=list(program.inputs.values()))
    loaded = load_graph(path)
    shape = CASES[case][1]
    x = torch.randn(*shape)
    with ng.make_transformer("cpu") as t:
        got = loaded.computation(t)(x.numpy())
    np.testing.assert_allclose(got, _expected(model, x), rtol=1e-4, atol=1e-5)


def test_a_split_dim_takes_new_axes_and_a_merged_symbolic_batch_comes_back():
    model, program = _program("attention")
    (x,) = program.inputs.values()
    (y,) = program.outputs
    assert x.axes[0].name == "batch" and x.axes[0].length is None
    assert y.axes[0] is x.axes[0]  # through (batch*T) and back, still the symbolic batch
    text = ng.format_graph(program.outputs)
    assert "batch" in text and "Unflatten" in text  # the heads split onto their own axes


class Norms(nn.Module):
    """A batch norm in training mode: batch statistics, running statistics stepped."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(3, momentum=0.25)

    def forward(self, x):
        return self.norm(x) * 2


@pytest.mark.parametrize("transformer", ["numpy", "cpu", "jax"])
def test_batch_norm_in_training_mode_normalizes_by_the_batch_and_updates_its_buffers(
        transformer):
    if transformer == "jax":
        pytest.importorskip("jax")
    torch.manual_seed(0)
    model = _randomized(Norms()).train()
    program = import_exported(torch.export.export(
        model, (torch.randn(4, 3, 5, 5),), dynamic_shapes=({0: torch.export.Dim("batch")},)))
    x = torch.randn(6, 3, 5, 5)  # another batch: the count in n / (n - 1) is symbolic
    assert sorted(program.updates) == ["norm.num_batches_tracked", "norm.running_mean",
                                       "norm.running_var"]
    mean, var = model.norm.running_mean.clone(), model.norm.running_var.clone()
    batch_mean = x.mean((0, 2, 3))
    batch_var = x.var((0, 2, 3), unbiased=False)
    normalized = (x - batch_mean[:, None, None]) / torch.sqrt(batch_var[:, None, None] + 1e-5)
    expected = (normalized * model.norm.weight[:, None, None]
                + model.norm.bias[:, None, None]) * 2
    count = x.numel() / 3
    running_mean = 0.75 * mean + 0.25 * batch_mean
    running_var = 0.75 * var + 0.25 * batch_var * count / (count - 1)
    updates = [program.updates[f"norm.{name}"] for name in ("running_mean", "running_var")]
    with ng.make_transformer(transformer) as t:
        got, new_mean, new_var = t.computation(
            [program.outputs[0]] + updates, *program.inputs.values())(x.numpy())
    np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(new_mean, running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(new_var, running_var.numpy(), rtol=1e-5, atol=1e-6)


def test_an_imported_cnn_prints_and_draws_its_layers():
    model, program = _program("cnn")
    text = ng.format_graph(program.outputs)
    assert "Convolution" in text and "Pooling" in text and "conv.weight" in text
    assert "norm.running_var" in graph_to_dot(program.outputs)


class Zoo(nn.Module):
    """The torch bridge's other forward ops, each once."""

    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(10, 4)

    def forward(self, x, tokens):
        rows = self.table(tokens).sum(1)
        joined = torch.cat([x, x.sin(), x.cos()], dim=1)[:, 2:12:3]
        chosen = torch.where(x > 0, x, x * 0.1).clamp(-0.5, 0.8)
        padded = nn.functional.pad(x, (1, 2))[:, :4]
        spread = x.std(1) + x.var(0).sum() + x.norm(dim=1) + x.abs().prod(1) + x.amin(1)
        top, where = x.max(1)
        inside = ((x > -0.5) & (x < 0.5)).float() + torch.ones_like(x) * torch.arange(4.0)
        rounded = torch.floor(x * 3).to(torch.int32)
        odd = torch.log1p(x.abs()) + torch.expm1(x) * x.sign() + torch.tan(x * 0.3)
        return (rows + joined + chosen + padded + inside + odd + x[1] + x[:, :1].expand(3, 4),
                spread + top, where, x.argmin(1), rounded)


@pytest.mark.parametrize("transformer", ["numpy", "cpu", "jax"])
def test_the_bridges_other_forward_ops_agree_with_pytorch(transformer):
    if transformer == "jax":
        pytest.importorskip("jax")
    torch.manual_seed(0)
    model = Zoo().eval()
    x, tokens = torch.randn(3, 4), torch.tensor([[1, 2], [3, 9], [0, 0]])
    program = import_exported(torch.export.export(model, (x, tokens)))
    with torch.no_grad():
        expected = [y.numpy() for y in model(x, tokens)]
    with ng.make_transformer(transformer) as t:
        got = t.computation(program.outputs, *program.inputs.values())(x.numpy(),
                                                                         tokens.numpy())
    for value, wanted in zip(got, expected):
        assert value.dtype == wanted.dtype
        np.testing.assert_allclose(value, wanted, rtol=1e-5, atol=1e-6)


class Picks(nn.Module):
    """Gathers by index tensors (negative ones too), any, and the NLL losses."""

    def forward(self, x, index, target):
        chosen = x.index_select(1, index) * 2 + x[:, index] + x[index - 3][:, :3]
        weight = torch.tensor([1.0, 2.0, 3.0, 0.5])
        scores = torch.log_softmax(x, 1)
        return (chosen, (x > 1).any(1), nn.functional.cross_entropy(x, target, ignore_index=2),
                nn.functional.nll_loss(scores, target, weight=weight, reduction="sum"),
                nn.functional.nll_loss(scores, target, reduction="none"))


@pytest.mark.parametrize("transformer", ["numpy", "cpu", "jax"])
def test_gathers_and_losses_agree_with_pytorch(transformer):
    if transformer == "jax":
        pytest.importorskip("jax")
    torch.manual_seed(0)
    x = torch.randn(3, 4) * 2
    index, target = torch.tensor([0, 2, 1]), torch.tensor([1, 2, 3])
    program = import_exported(torch.export.export(Picks(), (x, index, target)))
    expected = [y.numpy() for y in Picks()(x, index, target)]
    with ng.make_transformer(transformer) as t:
        got = t.computation(program.outputs, *program.inputs.values())(
            x.numpy(), index.numpy(), target.numpy())
    for value, wanted in zip(got, expected):
        assert value.dtype == wanted.dtype
        np.testing.assert_allclose(value, wanted, rtol=1e-5, atol=1e-6)


class Moves(nn.Module):
    """Writes into slices of a copy, flips and tiles."""

    def forward(self, x):
        y = x.clone()
        y[:, 1:3] = x[:, :2] * 10
        y[0] = -1.0
        y[:, -1] = x[:, 0]
        return x.flip(1) + y, x.repeat(2, 1, 3), x.flip(0, 1).repeat(1, 2)


@pytest.mark.parametrize("transformer", ["numpy", "cpu", "jax"])
def test_slice_writes_flips_and_tiles_agree_with_pytorch(transformer):
    if transformer == "jax":
        pytest.importorskip("jax")
    x = torch.randn(3, 4)
    program = import_exported(torch.export.export(Moves(), (x,)))
    expected = [y.numpy() for y in Moves()(x)]
    with ng.make_transformer(transformer) as t:
        got = t.computation(program.outputs, *program.inputs.values())(x.numpy())
    for value, wanted in zip(got, expected):
        np.testing.assert_allclose(value, wanted, rtol=1e-6)
