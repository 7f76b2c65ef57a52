"""The thin runtime's C++ autograd node (frontends/torch/thin_node.py): once a plain graph
pair has run natively, its calls go through one C++ node; values, gradients and training
are eager's, in-place writes and second derivatives are refused as on the Python path, the
caller's saved-tensor hooks see the saved values, and arguments the plan does not describe
run in Python."""
from __future__ import annotations

import copy
import gc

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from axgraph.errors import NotDifferentiableError  # noqa: E402
from axgraph.frontends.torch import AxgraphBackend, thin_node  # noqa: E402
from axgraph.transformers.cpu import kernel_c  # noqa: E402
from torch_checks import assert_close, fresh_dynamo  # noqa: E402,F401

pytestmark = pytest.mark.skipif(not kernel_c.c_available() or thin_node.library() is None,
                                reason="no C++ compiler, or torch's or Python's headers")


def _net():
    return nn.Sequential(nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 3))


def _warm(model, x, steps=2):
    """The model compiled and stepped until its runtime has planned the node."""
    backend = AxgraphBackend()
    compiled = torch.compile(model, backend=backend)
    for _ in range(steps):
        compiled(x).sum().backward()
    model.zero_grad(set_to_none=True)
    (runtime,) = backend.thin_runtimes
    assert runtime.node is not None
    return compiled, runtime


@pytest.mark.parametrize("optimizer", ["SGD", "AdamW"])
def test_training_through_the_node_ends_with_eagers_weights(optimizer):
    model, x = _net(), torch.randn(5, 12)
    eager = copy.deepcopy(model)
    labels = torch.tensor([0, 2, 1, 1, 0])
    compiled, _ = _warm(model, x)
    with torch.no_grad():
        for p, q in zip(model.parameters(), eager.parameters()):
            q.copy_(p)
    for net, params in ((compiled, model), (eager, eager)):
        step = getattr(torch.optim, optimizer)(params.parameters(), lr=0.05)
        for _ in range(10):
            step.zero_grad(set_to_none=True)
            F.cross_entropy(net(x), labels).backward()
            step.step()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p, q, f"{name} after ten {optimizer} steps")


@pytest.mark.parametrize("written", ["input", "weight"])
def test_a_saved_value_written_in_place_is_refused(written):
    model, x = _net(), torch.randn(5, 12)
    compiled, _ = _warm(model, x)
    out = compiled(x)
    with torch.no_grad():
        (x if written == "input" else model[2].weight).mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_a_second_derivative_through_the_node_is_refused_after_first_ones_are_given():
    model, x = _net(), torch.randn(5, 12)
    eager = copy.deepcopy(model)
    compiled, _ = _warm(model, x)
    grads = torch.autograd.grad(compiled(x).pow(2).sum(), list(model.parameters()),
                                create_graph=True)
    expected = torch.autograd.grad(eager(x).pow(2).sum(), list(eager.parameters()))
    for got, want in zip(grads, expected):
        assert_close(got, want, "first derivative with create_graph")
    assert all(g.requires_grad for g in grads)
    with pytest.raises(NotDifferentiableError, match="double backward"):
        grads[0].pow(2).sum().backward()


def test_saved_tensor_hooks_see_the_nodes_saved_values():
    model, x = _net(), torch.randn(5, 12)
    eager = copy.deepcopy(model)
    compiled, _ = _warm(model, x)
    packed = []

    def pack(tensor):
        packed.append(tuple(tensor.shape))
        return tensor.clone()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = compiled(x)
    assert packed  # x, the tanh output and the second weight at least
    (out * 3).sum().backward()
    (eager(x) * 3).sum().backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, q.grad, f"gradient of {name} under saved-tensor hooks")


def test_arguments_the_plan_does_not_describe_run_in_python():
    model, x = _net(), torch.randn(5, 12)
    _, runtime = _warm(model, x)
    params = [p for p in model.parameters()]
    args = [params[0], params[1], x, params[2], params[3]]
    assert runtime.node(tuple(args)) is not None
    assert runtime.node(tuple(a.double() if a is x else a for a in args)) is None
    assert runtime.node(tuple(torch.randn(12, 5).t() if a is x else a for a in args)) is None
    assert runtime.node(tuple(args[:-1])) is None


def test_a_nodes_graph_outlives_its_compiled_model():
    """The autograd graph a call made keeps the plan and the steps' memory alive after
    the compiled model, its backend and Dynamo's caches are gone."""
    model, x = _net(), torch.randn(5, 12)
    eager = copy.deepcopy(model)
    compiled, _ = _warm(model, x)
    out = compiled(x)
    del compiled
    torch._dynamo.reset()
    gc.collect()
    out.pow(2).sum().backward()
    eager(x).pow(2).sum().backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, q.grad, f"gradient of {name}")


def test_the_node_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("AXGRAPH_TORCH_NODE", "0")
    model, x = _net(), torch.randn(5, 12)
    backend = AxgraphBackend()
    compiled = torch.compile(model, backend=backend)
    for _ in range(3):
        compiled(x).sum().backward()
    (runtime,) = backend.thin_runtimes
    assert runtime.node is None


def test_while_the_library_compiles_in_the_background_the_python_runtime_trains(monkeypatch):
    """On a machine whose kernel cache lacks the node library, the first use compiles it
    in a background thread; the steps meanwhile run in Python with eager's values, and
    the first step after it is built plans the node."""
    import threading

    built = thin_node.library()  # the real library, for the fake compilation to hand back
    release, asked = threading.Event(), []

    def opened(key, source, commands, compile_it):
        asked.append(compile_it)
        if not compile_it:
            return None  # not in the cache: compile it
        assert release.wait(60)
        return built

    monkeypatch.setattr(thin_node, "_outcome", [])
    monkeypatch.setattr(thin_node, "_builder", None)
    monkeypatch.setattr(thin_node, "_opened", opened)
    model, x = _net(), torch.randn(5, 12)
    eager = copy.deepcopy(model)
    labels = torch.tensor([0, 2, 1, 1, 0])
    backend = AxgraphBackend()
    compiled = torch.compile(model, backend=backend)
    steps = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (model, eager)]

    def train(net, step):
        step.zero_grad(set_to_none=True)
        F.cross_entropy(net(x), labels).backward()
        step.step()

    for _ in range(4):
        train(compiled, steps[0])
        train(eager, steps[1])
    (runtime,) = backend.thin_runtimes
    assert thin_node.pending() and runtime.node is None and asked == [False, True]
    release.set()
    thin_node._builder.join(60)
    assert not thin_node.pending()
    for _ in range(3):
        train(compiled, steps[0])
        train(eager, steps[1])
    assert runtime.node is not None
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p, q, f"{name} after seven steps, four before the node")
