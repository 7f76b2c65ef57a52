"""The torch.compile backend: compiled models agree with eager PyTorch (outputs, gradients,
training), unsupported ops fall back to PyTorch and are reported, sizes stay symbolic."""
from __future__ import annotations

import copy
import gc
import importlib
import inspect
import os
import re
import sys
import weakref

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from axgraph.errors import AxgraphTypeError, AxgraphValueError  # noqa: E402
from axgraph.frontends.torch import (AxgraphBackend, UnsupportedOperatorError,  # noqa: E402
                                     axgraph_backend, explain, supported_ops)
from axgraph.frontends.torch.registry import RULES, op_name  # noqa: E402
from torch_checks import assert_close, fresh_dynamo  # noqa: E402,F401

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))


def line_of(text: str) -> int:
    """The line of this file holding `text` (where a traced op comes from)."""
    source = inspect.getsource(sys.modules[__name__]).splitlines()
    matches = [i + 1 for i, line in enumerate(source) if text in line]
    assert len(matches) == 1, matches
    return matches[0]


def check_against_eager(model, inputs, loss, transformer="cpu", fallbacks=()):
    """Outputs and every parameter's gradient agree with an eager copy of the model."""
    eager = copy.deepcopy(model)
    backend = AxgraphBackend(transformer=transformer)
    compiled = torch.compile(model, backend=backend)
    out, expected = compiled(*inputs), eager(*inputs)
    assert_close(out, expected, "outputs")
    loss(out).backward()
    loss(expected).backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, q.grad, f"gradient of {name}")
    assert set(fallbacks) <= {f.op for f in backend.fallbacks}
    if not fallbacks:
        assert backend.fallbacks == []
    assert {g.built.function is not None for g in backend.graphs} == {True}
    return backend


# -- models -----------------------------------------------------------------------------------


def mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(),
                         nn.Linear(8, 4), nn.Sigmoid(), nn.Linear(4, 3))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4)
        self.down = nn.Conv2d(4, 4, 3, stride=2)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.norm(self.conv(x))), 2)
        h = F.avg_pool2d(h, 3, stride=1, padding=1)
        h = torch.tanh(self.down(F.pad(h, (1, 0, 1, 0))))
        return F.log_softmax(self.fc(h.flatten(1)), -1)


class Recurrent(nn.Module):
    """A GRU layer, then an LSTM cell feeding a GRU cell, unrolled over the sequence."""

    def __init__(self):
        super().__init__()
        self.layer = nn.GRU(3, 3)
        self.lstm = nn.LSTMCell(3, 5)
        self.gru = nn.GRUCell(5, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, xs):
        h = c = torch.zeros(xs.shape[1], 5)
        g = torch.zeros(xs.shape[1], 4)
        for x in self.layer(xs)[0]:
            h, c = self.lstm(x, (h, c))
            g = self.gru(h, g)
        return self.out(g)


class Block(nn.Module):
    """A pre-norm transformer block over token embeddings, with a causal attention."""

    def __init__(self, vocabulary=11, width=8):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width, padding_idx=0)
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = nn.MultiheadAttention(width, 2, batch_first=True)
        self.feed = nn.Sequential(nn.Linear(width, 16), nn.GELU(), nn.Dropout(0.1),
                                  nn.Linear(16, width), nn.GELU(approximate="tanh"))
        self.head = nn.Linear(width, vocabulary)

    def forward(self, tokens):
        x = self.embed(tokens)
        h = self.norm1(x)
        x = x + self.attention(h, h, h, need_weights=False)[0]
        q = self.norm2(x).unflatten(-1, (2, 4)).transpose(1, 2)
        x = x + F.scaled_dot_product_attention(q, q, q, is_causal=True).transpose(1, 2).flatten(2)
        return self.head(x + self.feed(x))


# -- agreement with eager ---------------------------------------------------------------------


def test_the_supported_list_is_the_rule_table():
    listed = supported_ops()
    assert listed == sorted(op_name(op) for op in RULES)
    for op in ("aten.addmm.default", "aten.convolution_backward.default",
               "aten.nll_loss_backward.default", "aten.embedding_dense_backward.default",
               "aten.max_pool2d_with_indices_backward.default", "aten._softmax.default"):
        assert op in listed


@pytest.mark.parametrize("transformer", ["cpu", "numpy", "jax"])
def test_mlp_outputs_and_gradients_agree(transformer):
    if transformer == "jax":
        pytest.importorskip("jax")
    x, labels = torch.randn(5, 6), torch.tensor([0, 2, 1, 1, 0])
    check_against_eager(mlp(), [x], lambda out: F.cross_entropy(out, labels),
                        transformer=transformer)


def test_cnn_outputs_and_gradients_agree():
    x = torch.randn(2, 2, 8, 8)
    check_against_eager(SmallCNN(), [x], lambda out: F.nll_loss(out, torch.tensor([0, 2])))


def test_lstm_and_gru_cells_agree():
    xs = torch.randn(3, 2, 3)
    check_against_eager(Recurrent(), [xs], lambda out: (out * out).sum())


def test_transformer_block_agrees():
    tokens = torch.tensor([[1, 3, 0, 5], [2, 2, 7, 10]])
    model = Block().eval()  # dropout off: the rest (attention included) runs on axgraph
    check_against_eager(model, [tokens],
                        lambda out: F.cross_entropy(out.flatten(0, 1), tokens.flatten()))


class MaskedAttention(nn.Module):
    """Attention of `heads` heads over sequences of `length` under a mask that hides every
    key from the second query."""

    def __init__(self, width=8, length=5, heads=2):
        super().__init__()
        self.heads = heads
        self.project = nn.Linear(width, 3 * width)
        self.mask = torch.ones(length, length, dtype=torch.bool)
        self.mask[1] = False

    def forward(self, x):
        split = (3, self.heads, x.shape[-1] // self.heads)
        q, k, v = self.project(x).unflatten(-1, split).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)


def test_attention_runs_as_a_softmax_on_axgraph_and_a_fully_masked_row_is_zero():
    x = torch.randn(2, 5, 8)
    model = MaskedAttention()
    backend = check_against_eager(model, [x], lambda out: (out * out).sum())
    out = torch.compile(model, backend=backend)(x)
    assert torch.all(out[:, :, 1] == 0), "eager's attention gives a query with no key zeros"
    assert not backend.fallbacks
    names = {type(n).__name__ for g in backend.graphs if g.function is not None
             for n in g.function.nodes}
    assert {"Softmax", "SoftmaxBackprop"} <= names  # the math path, not the fused op's


def test_a_query_with_a_nan_score_keeps_softmaxs_nan_and_a_masked_one_gets_zeros():
    x = torch.randn(2, 5, 8)
    x[0, 3] = float("nan")  # key 3 of the first sequence: every query's row has a NaN
    model = MaskedAttention()
    out, expected = torch.compile(model, backend=AxgraphBackend())(x), model(x)
    assert torch.isnan(expected[0]).any() and not torch.isnan(expected[1]).any()
    np.testing.assert_array_equal(torch.isnan(out).numpy(), torch.isnan(expected).numpy())
    assert torch.all(out[1, :, 1] == 0)  # fully masked (the mask hides -inf only)
    assert_close(out[1], expected[1], "outputs of the sequence without a NaN")


def test_a_masked_softmax_of_many_scores_runs_as_one_guarded_row_kernel():
    from axgraph import core
    from axgraph.transformers.cpu.group import FusedGroup

    x = torch.randn(8, 32, 16)
    # 8 x 4 x 32 x 32 scores: enough for the cpu transformer to fuse, where smaller graphs
    # run as one native step
    model = MaskedAttention(width=16, length=32, heads=4)
    backend = check_against_eager(model, [x], lambda out: (out * out).sum())
    out = torch.compile(model, backend=backend)(x)
    assert torch.all(out[:, :, 1] == 0), "eager's attention gives a query with no key zeros"
    guarded = [n for g in backend.graphs if g.executable is not None
               for n in g.executable.last_program.function.nodes
               if isinstance(n, core.Fused) and FusedGroup.of(n).guard]
    assert len(guarded) == 1 and tuple(guarded[0].shape) == (8, 4, 32, 32)


class StackedProjection(nn.Module):
    """nn.MultiheadAttention: one product projects queries, keys and values."""

    def __init__(self, width=8):
        super().__init__()
        self.attention = nn.MultiheadAttention(width, 2, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


def test_the_gradient_of_a_stacked_projection_is_joined_by_one_concat():
    x = torch.randn(3, 5, 8)
    backend = check_against_eager(StackedProjection(), [x], lambda out: (out * out).sum())
    backward = backend.graphs[-1].function
    ops = [type(n).__name__ for n in backward.nodes]
    # the query, key and value gradients, written side by side where the product reads
    # them; not three selects of full size and their sum
    assert ops.count("Concat") == 1 and "Select" not in ops and "Pad" not in ops
    concat = next(n for n in backward.nodes if type(n).__name__ == "Concat")
    readers = [type(n).__name__ for n in backward.nodes if concat in n.inputs]
    assert readers and set(readers) == {"Reshape"}


def test_the_fused_cpu_attention_called_directly_is_decomposed_with_its_gradient():
    fused = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default

    def attend(q, k, v):
        return fused(q, k, v, is_causal=True)[0]

    inputs = [torch.randn(2, 2, 5, 4, requires_grad=True) for _ in range(3)]
    copies = [t.detach().clone().requires_grad_() for t in inputs]
    backend = AxgraphBackend()
    out, expected = torch.compile(attend, backend=backend)(*inputs), attend(*copies)
    assert_close(out, expected, "outputs")
    (out * out).sum().backward()
    (expected * expected).sum().backward()
    for name, a, b in zip("qkv", inputs, copies):
        assert_close(a.grad, b.grad, f"gradient of {name}")
    assert not backend.fallbacks


def test_max_pool_indices_are_torchs():
    x = torch.randn(2, 3, 7, 6)
    x[0, 0, :2, :2] = 1.0  # a tie: the first maximum of the window wins, as in torch

    def pool(x):
        return F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)

    (values, indices), (eager_values, eager_indices) = \
        torch.compile(pool, backend=AxgraphBackend())(x), pool(x)
    assert torch.equal(values, eager_values)
    assert torch.equal(indices, eager_indices)


@pytest.mark.parametrize("optimizer", ["SGD", "AdamW"])
def test_twenty_training_steps_end_with_eagers_weights(optimizer):
    model = mlp()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend=AxgraphBackend())
    make = {"SGD": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
            "AdamW": lambda ps: torch.optim.AdamW(ps, lr=0.01)}[optimizer]
    opt, eager_opt = make(model.parameters()), make(eager.parameters())
    x, labels = torch.randn(8, 6), torch.randint(0, 3, (8,))
    for _ in range(20):
        for net, o in ((compiled, opt), (eager, eager_opt)):
            o.zero_grad()
            F.cross_entropy(net(x), labels).backward()
            o.step()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p, q, f"{name} after 20 {optimizer} steps")
    moved = [not torch.equal(p, q) for p, q in zip(model.parameters(), mlp().parameters())]
    assert all(moved)


# -- unsupported ops ----------------------------------------------------------------------------


class Spectral(nn.Module):
    """A model with an op the bridge has no rule for (a real FFT, complex inside)."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(8, 8)
        self.outer = nn.Linear(5, 2)

    def forward(self, x):
        h = torch.tanh(self.inner(x))
        spectrum = torch.fft.rfft(h).abs()  # the op PyTorch runs
        return self.outer(spectrum)


def test_an_unsupported_op_falls_back_and_trains():
    x = torch.randn(4, 8)
    model = Spectral()
    backend = check_against_eager(model, [x], lambda out: (out * out).mean(),
                                  fallbacks=("aten._fft_r2c.default", "aten._fft_c2c.default"))
    assert len(backend.graphs) >= 4  # the linear layers' parts of both graphs
    for fallback in backend.fallbacks:  # the FFT ops, and ops on their complex values
        assert fallback.reason in ("no rule for this op",
                                   "element type torch.complex64 is not compiled")
        assert fallback.reason == "no rule for this op" or fallback.op in supported_ops()


def test_explain_names_the_fallback_and_the_users_line():
    report = explain(Spectral(), torch.randn(4, 8))
    assert report.ops[0] == "aten._fft_r2c.default"
    first = report.fallbacks[0]
    assert first.location == (HERE, line_of("# the op " + "PyTorch runs"))
    assert first.source.startswith("spectrum = torch.fft.rfft(h).abs()")
    assert {f.graph for f in report.fallbacks} == {"forward", "backward"}
    assert "aten._fft_r2c.default (no rule for this op) in the forward graph, at " in str(report)
    assert report.graphs >= 2
    assert str(explain(mlp(), torch.randn(2, 6))).startswith("every op ran on axgraph")


def test_training_dropout_runs_in_pytorch_with_its_random_stream():
    model = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5), nn.Linear(6, 2))
    eager = copy.deepcopy(model)
    backend = AxgraphBackend()
    x = torch.randn(16, 6)
    torch.manual_seed(3)
    out = torch.compile(model, backend=backend)(x)
    torch.manual_seed(3)
    assert_close(out, eager(x), "dropout's masks are PyTorch's own")
    assert [f.op for f in backend.fallbacks] == ["aten.native_dropout.default"]


def test_without_fallback_an_unsupported_op_is_an_error_at_the_users_line():
    def scan(x):
        return torch.cumsum(x * 2, 0)  # no rule

    compiled = torch.compile(scan, backend=AxgraphBackend(fallback=False))
    with pytest.raises(Exception) as caught:
        compiled(torch.ones(3))
    error = caught.value
    while not isinstance(error, UnsupportedOperatorError):
        error = error.__cause__ or error.inner_exception
    assert error.location == (HERE, line_of("# no " + "rule"))
    assert "aten.cumsum.default" in str(error)


# -- sizes, options, registration ---------------------------------------------------------------


def test_a_dynamic_batch_is_compiled_once_per_binding():
    model = mlp()
    backend = AxgraphBackend(cache_size=4)
    compiled = torch.compile(model, backend=backend, dynamic=True)
    with torch.no_grad():
        for batch in (3, 5, 3, 5, 7):
            x = torch.randn(batch, 6)
            assert_close(compiled(x), model(x), f"batch {batch}")
    (graph,) = backend.graphs
    info = graph.cache_info()
    assert (info.hits, info.misses, info.currsize) == (2, 3, 3)
    (name,) = info.keys[0]
    assert [k[name] for k in info.keys] == [3, 5, 7]


def test_options_are_checked():
    with pytest.raises(AxgraphValueError, match="transformer 'tpu'"):
        AxgraphBackend(transformer="tpu")
    with pytest.raises(AxgraphTypeError, match="colour"):
        axgraph_backend(None, [], options={"colour": "blue"})
    with pytest.raises(AxgraphTypeError, match="must be a dict"):
        axgraph_backend(None, [], options=["cpu"])


def test_the_entry_point_names_the_backend_function():
    with open(os.path.join(ROOT, "pyproject.toml")) as file:
        text = file.read()
    table = text.split("[project.entry-points.torch_dynamo_backends]\n", 1)[1].split("\n[", 1)[0]
    (target,) = re.findall(r'^axgraph = "([^"]+)"$', table, re.MULTILINE)
    module, _, attribute = target.partition(":")
    assert getattr(importlib.import_module(module), attribute) is axgraph_backend


@pytest.mark.parametrize("module", ["backend", "explain", "exported"])
def test_docstring_examples_run_as_written(module):
    import doctest

    found = importlib.import_module(f"axgraph.frontends.torch.{module}")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in doctest.DocTestFinder().find(found) if t.examples]
    assert tests
    for test in tests:
        runner.run(test, clear_globs=False)  # Dynamo keeps references into them
    assert runner.summarize(verbose=False).failed == 0


def test_backend_by_name_once_installed():
    from importlib.metadata import entry_points

    if not any(e.name == "axgraph" for e in entry_points(group="torch_dynamo_backends")):
        pytest.skip("the installed axgraph predates the entry point: reinstall it")
    model = mlp()
    x = torch.randn(4, 6)
    compiled = torch.compile(model, backend="axgraph", options={"transformer": "numpy"})
    assert_close(compiled(x), model(x), "backend='axgraph'")


# -- op by op ---------------------------------------------------------------------------------

def _nll(x, w):
    scores = F.log_softmax(x @ w, 1)
    labels = torch.tensor([0, 2, -100, 1])
    weight = torch.tensor([0.5, 2.0, 1.0])
    return (F.nll_loss(scores, labels, weight=weight)
            + F.nll_loss(scores, labels, reduction="sum") * 0.1
            + (F.nll_loss(scores, labels, reduction="none") ** 2).sum())


FUNCTIONS = {
    "where and comparisons": lambda a, b: torch.where(a > b, a * 2, b / 3) + (a <= 0.1) * b,
    "clamp": lambda a, b: a.clamp(-0.5, 0.5) * b + a.clamp_min(0.1) - b.clamp_max(0.2),
    "unary": lambda a, b: (a.abs() + 1).sqrt().log() * b.exp() + a.pow(3) - torch.rsqrt(
        b * b + 1) + torch.sin(a) * torch.cos(b) - torch.log1p(a * a) / (1 + b.abs()),
    "activations": lambda a, b: F.gelu(a) + F.gelu(b, approximate="tanh") + F.silu(a)
    + F.leaky_relu(b, 0.1) + F.softplus(a) + F.elu(b) + F.hardtanh(a),
    "reductions": lambda a, b: (a.mean(1, keepdim=True) * b).sum(0) + a.amax(0)
    + a.var(1).sum() + b.std(0) + (a - b).abs().amin(0),
    "softmax": lambda a, b: F.softmax(a, 0) * b + F.log_softmax(b * a, -1),
    "matrix products": lambda a, b: (a @ b.t()) @ a + torch.bmm(
        a.unsqueeze(0).expand(2, -1, -1), b.t().unsqueeze(0).expand(2, -1, -1)).sum(0) @ b,
    "movement": lambda a, b: torch.cat([a, b], 1)[:, 1:7:2] * a.select(0, -1)[:3]
    + a.split([1, 3], 0)[1].sum(0, keepdim=True)[:, :3] + b.transpose(0, 1).reshape(4, 5)[:, 1:4]
    + F.pad(a[:, :2], (0, 1)),
    "layer norm": lambda a, b: F.layer_norm(a * b, (5,), b[0], a[1]),
    "indexing": lambda a, b: a[torch.tensor([2, 0, 2])] * b[1:4] + a.index_select(
        1, torch.tensor([4, 4, 0, 1, 2])).flip(0)[:3] + b.repeat(1, 2)[:3, 3:8],
    "extrema and norms": lambda a, b: a.max(1, keepdim=True).values * b + b.min(0).values
    + torch.linalg.vector_norm(a, dim=1, keepdim=True) + (a.argmax(1, keepdim=True) + b.argmin())
    + a.amax() + F.normalize(b, dim=0),
    "nll loss": _nll,
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_ops_and_their_gradients_agree(name):
    function = FUNCTIONS[name]
    a, b = torch.randn(4, 5, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    if name == "nll loss":
        b = torch.randn(5, 3, requires_grad=True)
    backend = AxgraphBackend()
    out = torch.compile(function, backend=backend)(a, b)
    (ga, gb) = torch.autograd.grad(out.sum(), (a, b))
    expected = function(a, b)
    (ea, eb) = torch.autograd.grad(expected.sum(), (a, b))
    assert_close(out, expected, name)
    assert_close(ga, ea, f"{name}: gradient of a")
    assert_close(gb, eb, f"{name}: gradient of b")
    assert backend.fallbacks == []


def test_products_and_positions_agree():
    def summary(a):
        return a.prod(1), a.prod(), a.argmax(), a.argmin(0, keepdim=True), a.max(0)[1]

    a = torch.randn(4, 5)
    backend = AxgraphBackend()
    with torch.no_grad():
        got, expected = torch.compile(summary, backend=backend)(a), summary(a)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        assert_close(g, e, "products and positions")
    assert backend.fallbacks == []


WINDOWS = {
    "strided dilated convolution": lambda x, w: F.conv2d(x, w, stride=2, dilation=2, padding=2),
    "1-d convolution": lambda x, w: F.conv1d(x.flatten(2), w[:, :, 0], padding=1),
    "pools without padding counted": lambda x, w: F.avg_pool2d(
        x, 3, 2, padding=1, count_include_pad=False) + F.max_pool2d(x, 2, 2, ceil_mode=True)
    * F.conv2d(x, w, stride=2, padding=1)[:, :3],
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_windows_and_their_gradients_agree(name):
    function = WINDOWS[name]
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    backend = AxgraphBackend()
    out = torch.compile(function, backend=backend)(x, w)
    grads = torch.autograd.grad(out.sum(), (x, w))
    expected = function(x, w)
    expected_grads = torch.autograd.grad(expected.sum(), (x, w))
    assert_close(out, expected, name)
    for g, e in zip(grads, expected_grads):
        assert_close(g, e, f"{name}: gradient")
    assert backend.fallbacks == []


def test_batch_norm_in_eval_mode_uses_the_running_statistics():
    model = SmallCNN()
    model.norm.running_mean.uniform_(-1, 1)
    model.norm.running_var.uniform_(0.5, 2)
    model.eval()
    x = torch.randn(2, 2, 8, 8)
    check_against_eager(model, [x], lambda out: out.sum())


def test_training_updates_batch_norms_running_statistics_as_eager_does():
    model = SmallCNN()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend=AxgraphBackend())
    for _ in range(3):
        x = torch.randn(2, 2, 8, 8)
        compiled(x).sum().backward()
        eager(x).sum().backward()
    assert_close(model.norm.running_mean, eager.norm.running_mean, "running mean")
    assert_close(model.norm.running_var, eager.norm.running_var, "running variance")
    assert int(model.norm.num_batches_tracked) == 3


def test_batch_norm_trains_through_a_batch_size_that_becomes_symbolic():
    """The second batch size makes Dynamo recompile with a symbolic batch; batch norm's
    n / (n - 1) is then computed from it at run time."""
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Tanh())
    eager = copy.deepcopy(model)
    backend = AxgraphBackend()
    compiled = torch.compile(model, backend=backend)
    for batch in (3, 5, 6):
        x = torch.randn(batch, 4)
        out, expected = compiled(x), eager(x)
        assert_close(out, expected, f"batch {batch}")
        out.sum().backward()
        expected.sum().backward()
    assert_close(model[1].running_var, eager[1].running_var, "running variance")
    assert_close(model[0].weight.grad, eager[0].weight.grad, "accumulated gradient")
    assert backend.fallbacks == []
    assert any(graph.built.size_inputs for graph in backend.graphs)


def test_a_dynamic_batch_trains():
    model = mlp()
    eager = copy.deepcopy(model)
    backend = AxgraphBackend()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    for batch in (3, 6):
        x, labels = torch.randn(batch, 6), torch.randint(0, 3, (batch,))
        F.cross_entropy(compiled(x), labels).backward()
        F.cross_entropy(eager(x), labels).backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, q.grad, f"gradient of {name}")
    assert len(backend.graphs) == 2  # one forward and one backward graph for every batch


def test_a_graph_a_rule_cannot_build_runs_in_pytorch_or_names_the_line(monkeypatch):
    from axgraph import core
    from axgraph.frontends.torch import TorchBridgeError, registry

    def broken(builder, node, args):  # a rule building an op the core refuses
        return core.Add(args.self, core.Constant(core.f32, (1,), 0.0))

    monkeypatch.setitem(registry.RULES, torch.ops.aten.relu.default,
                        registry.Rule(broken))

    def net(x):
        return torch.relu(x) * 2  # the op whose rule fails

    x = torch.randn(3, 4)
    backend = AxgraphBackend()
    assert_close(torch.compile(net, backend=backend)(x), net(x), "run by PyTorch")
    (fallback,) = backend.fallbacks
    assert fallback.op == "2 ops" and "Add: shapes differ" in fallback.reason
    assert fallback.location == (HERE, line_of("# the op whose " + "rule fails"))
    torch._dynamo.reset()
    with pytest.raises(Exception) as caught:
        torch.compile(net, backend=AxgraphBackend(fallback=False))(x)
    error = caught.value
    while not isinstance(error, TorchBridgeError):
        error = error.__cause__ or error.inner_exception
    assert error.location == fallback.location
    assert "aten.relu.default (return torch.relu(x) * 2" in str(error)


def test_any_failure_inside_a_rule_is_a_bridge_error_not_a_raw_one(monkeypatch):
    from axgraph.frontends.torch import registry

    def faulty(builder, node, args):
        raise ValueError("a rule's own bug")

    monkeypatch.setitem(registry.RULES, torch.ops.aten.relu.default, registry.Rule(faulty))
    x = torch.randn(3, 4)
    backend = AxgraphBackend()
    assert_close(torch.compile(lambda x: torch.relu(x) + 1, backend=backend)(x),
                 torch.relu(x) + 1, "run by PyTorch")
    (fallback,) = backend.fallbacks
    assert "ValueError: a rule's own bug" in fallback.reason


def test_inputs_needing_gradients_are_viewed_one_per_position():
    """A graph fed a new tensor that needs gradients on every call (an activation after a
    graph break) keeps at most one view per input, not one per call, and its values and
    gradients are eager's."""
    backend = AxgraphBackend()
    weight = torch.nn.Parameter(torch.randn(4, 3, generator=torch.Generator().manual_seed(0)))
    compiled = torch.compile(lambda x: torch.tanh(x @ weight).sum(), backend=backend)
    generator = torch.Generator().manual_seed(1)
    inputs = []
    for _ in range(5):
        x = torch.randn(2, 4, generator=generator, requires_grad=True)
        inputs.append(weakref.ref(x))
        loss = compiled(x)
        loss.backward()
        expected_x = x.detach().clone().requires_grad_(True)
        torch.tanh(expected_x @ weight.detach()).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), expected_x.grad.numpy(), rtol=1e-5, atol=1e-6)
    del loss
    gc.collect()
    assert [ref() is None for ref in inputs] == [True] * 4 + [False]
