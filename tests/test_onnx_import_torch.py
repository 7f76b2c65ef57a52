"""Models written in PyTorch, exported with torch.onnx.export and imported, agree with PyTorch."""
from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxscript")  # torch.onnx.export's exporter

from test_onnx_import import TRANSFORMERS, run_axgraph  # noqa: E402

from axgraph.frontends.onnx import import_model  # noqa: E402


class SmallCNN(torch.nn.Module):
    """Conv, BatchNorm, ReLU, max and average pooling, flatten, a dense layer, log_softmax."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)
        self.conv2 = torch.nn.Conv2d(4, 6, 3, stride=2)
        self.dense = torch.nn.Linear(6 * 2 * 2, 5)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.norm(self.conv1(x))), 2)
        x = torch.nn.functional.avg_pool2d(torch.relu(self.conv2(x)), 1)
        return torch.log_softmax(self.dense(torch.flatten(x, 1)), -1)


class Upsampler(torch.nn.Module):
    """Nearest upsampling (Resize), a transposed convolution and a grouped convolution."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.Upsample(scale_factor=2),
            torch.nn.ConvTranspose2d(3, 2, 2, stride=2), torch.nn.Conv2d(2, 4, 3, groups=2))

    def forward(self, x):
        return self.layers(x)


class TransformerBlock(torch.nn.Module):
    """A pre-LayerNorm block: multi-head self-attention, then a GELU MLP, each residual."""

    def __init__(self, width=8, heads=2):
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.attention = torch.nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 16), torch.nn.GELU(),
                                       torch.nn.Linear(16, width))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


# torch.export's own deprecation warnings, and the one it gives for nn.LSTM's weights
pytestmark = [pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:Converting a tensor to a Python boolean"),
              pytest.mark.filterwarnings("ignore:The tensor attributes:UserWarning")]


def exported(module, example, batch_dim=0, dynamo=True):
    """The ONNX model of `module` (eval mode), dimension `batch_dim` a dynamic 'batch'.

    dynamo=False uses the TorchScript exporter, which writes shapes as Shape, Gather,
    Concat chains of its own.
    """
    module.eval()
    if not dynamo:
        buffer = io.BytesIO()
        torch.onnx.export(module, (example,), buffer, dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {batch_dim: "batch"}}, opset_version=14)
        return onnx.load_from_string(buffer.getvalue())
    dynamic = ({batch_dim: torch.export.Dim("batch")},) if batch_dim is not None else None
    program = torch.onnx.export(module, (example,), input_names=["x"], dynamo=True,
                                dynamic_shapes=dynamic, verbose=False)
    return program.model_proto


def randomize_batch_norm(module):
    """Running statistics other than 0 and 1, so that inference-mode BatchNorm is tested."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, torch.nn.BatchNorm2d):
                layer.running_mean.uniform_(-0.5, 0.5)
                layer.running_var.uniform_(0.5, 1.5)
                layer.weight.uniform_(0.5, 1.5)


@pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "torchscript"])
@pytest.mark.parametrize("make, shape", [(SmallCNN, (2, 1, 12, 12)),
                                         (Upsampler, (2, 2, 4, 4)),
                                         (TransformerBlock, (2, 5, 8))],
                         ids=["cnn", "upsampler", "transformer-block"])
def test_exported_model_agrees_with_pytorch(make, shape, dynamo):
    torch.manual_seed(0)
    module = make()
    randomize_batch_norm(module)
    model = exported(module, torch.randn(*shape), dynamo=dynamo)
    imported = import_model(model)
    assert imported.input_names == ["x"] and imported.inputs[0].axes[0] is imported.axes["batch"]
    x = np.random.default_rng(1).standard_normal((3,) + shape[1:]).astype(np.float32)
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()  # a batch size other than the example's
    for transformer in TRANSFORMERS:
        got = run_axgraph(model, {"x": x}, transformer)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                   err_msg=f"on the {transformer} transformer")


@pytest.mark.parametrize("make", [torch.nn.LSTM, torch.nn.GRU], ids=["lstm", "gru"])
def test_exported_recurrent_layer_agrees_with_pytorch(make):
    """nn.LSTM and nn.GRU export as ONNX LSTM and GRU (GRU with linear_before_reset)."""
    torch.manual_seed(0)
    module = make(3, 4)
    x = torch.randn(5, 2, 3)  # (time, batch, features)
    model = exported(module, x, batch_dim=None)
    assert make.__name__ in {n.op_type for n in model.graph.node}
    with torch.no_grad():
        want = [t.numpy() for t in _flat(module(x))]
    for transformer in TRANSFORMERS:
        got = run_axgraph(model, {"x": x.numpy()}, transformer)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5,
                                       err_msg=f"on the {transformer} transformer")


def _flat(outputs):
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    return [t for item in outputs for t in _flat(item)]
