"""torch.export programs that write into tensors (index_put, scatter, padding with a value
and cropping), split along symbolic sizes, and joint forward-backward programs, imported
and run against PyTorch."""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import axgraph as ng  # noqa: E402
from axgraph.frontends.torch import (UnsupportedOperatorError, import_exported,  # noqa: E402
                                     imported_ops)

HERE = os.path.abspath(__file__)


def _run(program, transformer, *inputs):
    with ng.make_transformer(transformer) as t:
        return t.computation(program.outputs, *program.inputs.values())(
            *(x.numpy() for x in inputs))


def _agree(got, expected):
    assert len(got) == len(expected)
    for value, wanted in zip(got, expected):
        wanted = wanted.detach().numpy()
        assert value.shape == wanted.shape and value.dtype == wanted.dtype
        np.testing.assert_allclose(value, wanted, rtol=1e-5, atol=1e-6)


class Writes(nn.Module):
    """Writes at index tensors (negative and repeated ones too), under a mask, scatters."""

    def forward(self, x, rows, src, cols, picks):
        put = x.clone()
        put[rows] = src * 2                                   # index_put on dim 0
        added = x.index_put((rows,), src, accumulate=True)    # index_put with accumulate
        filled = x.clone()
        filled[:, cols] = 7.0                                 # one value on dim 1
        bumped = x.clone()
        bumped[:, cols] += src[:, :2]                         # a repeated column: last wins
        masked = x.clone()
        masked[x > 0.5] = -1.0                                # a boolean mask
        scattered = torch.zeros(3, 4).scatter(0, picks.view(-1, 1).expand(-1, 4), src)
        summed = x.scatter_add(1, cols.view(1, -1).expand(3, -1), src[:, :2])
        valued = x.scatter(1, picks.view(-1, 1).flip(0), 5.0)
        return put, added, filled, bumped, masked, scattered, summed, valued


def _write_inputs():
    torch.manual_seed(1)
    return (torch.randn(3, 4), torch.tensor([2, 0, -2]), torch.randn(3, 4),
            torch.tensor([1, 1]), torch.tensor([2, 0, 1]))


@pytest.mark.parametrize("transformer", ["numpy", "cpu"])
def test_index_put_and_scatter_agree_with_pytorch(transformer):
    inputs = _write_inputs()
    program = import_exported(torch.export.export(Writes(), inputs))
    _agree(_run(program, transformer, *inputs), Writes()(*inputs))


def test_a_write_repeating_an_index_keeps_the_last_value_and_accumulating_adds_all():
    x, rows = torch.zeros(2, 3), torch.tensor([1, 0, 1])
    src = torch.arange(9.0).reshape(3, 3)

    class Repeat(nn.Module):
        def forward(self, x, rows, src):
            return x.index_put((rows,), src), x.index_put((rows,), src, accumulate=True)

    program = import_exported(torch.export.export(Repeat(), (x, rows, src)))
    last, summed = _run(program, "cpu", x, rows, src)
    np.testing.assert_array_equal(last, np.array([[3.0, 4, 5], [6, 7, 8]]))
    np.testing.assert_array_equal(summed, np.array([[3.0, 4, 5], [6 + 0, 7 + 1, 8 + 2]]))


class Pads(nn.Module):
    """Constant padding with a value, cropping by negative amounts, and both at once."""

    def forward(self, x):
        pad = nn.functional.pad
        return (pad(x, (1, 2), value=-3.5), pad(x, (-1, 0, 0, -1)),
                pad(x, (1, -1, -1, 2), value=3.0), pad(x, (0, 0, 2, 0), value=1.0))


@pytest.mark.parametrize("transformer", ["numpy", "cpu"])
def test_padding_with_a_value_and_cropping_agree_with_pytorch(transformer):
    x = torch.randn(2, 3, 4)
    program = import_exported(torch.export.export(Pads(), (x,)))
    _agree(_run(program, transformer, x), Pads()(x))


class Halves(nn.Module):
    """Two symbolic batches joined, worked on, and split back by their sizes."""

    def forward(self, x, y):
        joined = torch.cat([x, y], 0) * 2 + 1
        a, b = joined.split([x.shape[0], y.shape[0]], 0)
        c, d = torch.split(joined, [x.shape[0], y.shape[0]])
        return a - x, b.sum(0), c + d.mean()


@pytest.mark.parametrize("transformer", ["numpy", "cpu", "jax"])
def test_a_split_into_symbolic_sizes_gives_each_batch_its_axis(transformer):
    if transformer == "jax":
        pytest.importorskip("jax")
    x, y = torch.randn(4, 3), torch.randn(2, 3)
    program = import_exported(torch.export.export(
        Halves(), (x, y), dynamic_shapes=({0: torch.export.Dim("first")},
                                          {0: torch.export.Dim("second")})))
    first, second = program.inputs.values()
    assert program.outputs[0].axes[0] is first.axes[0]
    x, y = torch.randn(5, 3), torch.randn(3, 3)
    _agree(_run(program, transformer, x, y), Halves()(x, y))



class Scaled(nn.Module):
    """A weight over two symbolic batches joined, split back, and a loss of both."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([0.5, -1.0, 2.0]))

    def forward(self, x, y):
        first, second = (torch.cat([x, y]) * self.weight).split([x.shape[0], y.shape[0]])
        return (first * first).sum() + (second * 3.0).sum()


@pytest.mark.parametrize("transformer", ["numpy", "cpu", "jax"])
def test_gradients_flow_through_a_split_into_symbolic_sizes(transformer):
    if transformer == "jax":
        pytest.importorskip("jax")
    model = Scaled()
    program = import_exported(torch.export.export(
        model, (torch.randn(4, 3), torch.randn(2, 3)),
        dynamic_shapes=({0: torch.export.Dim("first")}, {0: torch.export.Dim("second")})))
    (loss,) = program.outputs
    x_ng, y_ng = program.inputs.values()
    # (the weight's: the inputs' would pass back through the concat of symbolic batches,
    # whose derivative the axes graph refuses without the lengths)
    grad = ng.deriv(loss, program.variables["weight"])
    x, y = torch.randn(5, 3), torch.randn(3, 3)
    expected = model(x, y)
    expected.backward()
    with ng.make_transformer(transformer) as t:
        got = t.computation([loss, grad], x_ng, y_ng)(x.numpy(), y.numpy())
    _agree(got, [expected, model.weight.grad])


class Embedded(nn.Module):
    """An embedding, a dense layer, a layer norm, gelu and softmax: a loss."""

    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(6, 4)
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x, tokens):
        h = nn.functional.gelu(self.norm(torch.relu(self.fc(x) + self.table(tokens))))
        return torch.softmax(h, -1)[:, 0].sum()


@pytest.mark.parametrize("transformer", ["numpy", "cpu"])
def test_a_joint_forward_backward_program_gives_pytorchs_gradients(transformer):
    # the backward ops are decomposed when torch.export writes the joint graph: the
    # embedding's gradient is an accumulating index_put, relu's a where
    from torch.export.experimental import _export_forward_backward

    torch.manual_seed(0)
    model = Embedded()
    x, tokens = torch.randn(3, 4), torch.tensor([1, 4, 1])
    program = import_exported(_export_forward_backward(torch.export.export(model, (x, tokens))))
    loss = model(x, tokens)
    loss.backward()
    _agree(_run(program, transformer, x, tokens),
           [loss] + [parameter.grad for parameter in model.parameters()])


class Gridded(nn.Module):
    """Writes by several index tensors: adjacent dims, dims apart, broadcast indices."""

    def forward(self, x, rows, cols, src):
        a = x.clone()
        a[rows, cols] = src[0, :3]                # (rows, cols) pairs on dims 0 and 1
        b = x.index_put((rows, cols), src[:, 0], accumulate=True)  # (3, 1) twice: both add
        c = x.clone()
        c[rows.view(-1, 1), cols.view(1, -1)] = -2.0  # a grid of positions
        d = x.clone()
        d[:, rows, cols[:1]] = src[1, :, :3]      # dims 1 and 2: sources in place
        e = x.clone()
        e[rows, :, cols] = src[:, 1]              # dims 0 and 2 apart: sources first
        return a, b, c, d, e


@pytest.mark.parametrize("transformer", ["numpy", "cpu"])
def test_writes_by_several_index_tensors_agree_with_pytorch(transformer):
    torch.manual_seed(2)
    inputs = (torch.randn(4, 4, 4), torch.tensor([3, 0, 3]), torch.tensor([1, -1, 1]),
              torch.randn(3, 4, 4))
    program = import_exported(torch.export.export(Gridded(), inputs))
    _agree(_run(program, transformer, *inputs), Gridded()(*inputs))


class Masks(nn.Module):
    def forward(self, x, rows, values):
        y = x.clone()
        y[x[:, 0] > 0, rows] = 1.0
        z = x.clone()
        z[x > 0] = values
        return y, z


def test_masks_beside_indices_or_written_with_several_values_are_refused():
    inputs = (torch.zeros(3, 3), torch.tensor([0, 1, 2]), torch.ones(3))
    with pytest.raises(UnsupportedOperatorError,
                       match="aten.index_put.default.*boolean mask beside other indices.*"
                             "index_put.default.*boolean mask written with several") as caught:
        import_exported(torch.export.export(Masks(), inputs))
    assert caught.value.location[0] == HERE
    for op in ("aten.index_put.default", "aten.scatter.src", "aten.scatter.value",
               "aten.scatter_add.default"):
        assert op in imported_ops()


class Narrow(nn.Module):
    def forward(self, x, index):
        return x.scatter_add(0, index, torch.ones(1, 2))


def test_a_scatter_by_an_index_narrower_than_the_tensor_is_refused():
    with pytest.raises(UnsupportedOperatorError, match="scatter_add.*index not of x's size"):
        import_exported(torch.export.export(Narrow(), (torch.zeros(3, 4),
                                                        torch.tensor([[0, 2]]))))
