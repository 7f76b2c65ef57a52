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
from axgraph.serialization import restore_variables, save_variables  # noqa: E402
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


class Split(nn.Module):
    def forward(self, x):
        return x.reshape(2, 3, 2).sum(1)


def test_ops_without_a_rule_are_named_with_their_line():
    with pytest.raises(UnsupportedOperatorError) as caught:
        import_exported(exported(Scan(), torch.ones(3)))
    assert "aten.cumsum.default" in str(caught.value)
    assert caught.value.location[0] == HERE
    assert "aten.addmm.default" in imported_ops()


def test_a_reshape_that_splits_a_dim_is_refused():
    with pytest.raises(TorchBridgeError, match="splits a dim"):
        import_exported(exported(Split(), torch.ones(4, 3)))
