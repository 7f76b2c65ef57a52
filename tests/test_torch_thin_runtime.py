"""The torch bridge's thin autograd runtime: plain training graphs run under it and agree
with eager PyTorch (outputs, every gradient, weights after training); graphs that are not
plain keep AOTAutograd's runtime and still agree; double backward is refused."""
from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from axgraph.errors import NotDifferentiableError  # noqa: E402
from axgraph.frontends.torch import AxgraphBackend  # noqa: E402
from torch_checks import assert_close, fresh_dynamo  # noqa: E402,F401


def small_net():
    return nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3))


def test_a_small_net_runs_thin_and_its_outputs_and_gradients_are_eagers():
    model, x = small_net(), torch.randn(5, 12, requires_grad=True)
    eager, x_eager = copy.deepcopy(model), x.detach().clone().requires_grad_()
    backend = AxgraphBackend()
    out = torch.compile(model, backend=backend)(x)
    expected = eager(x_eager)
    assert backend.runtimes == ["thin"]
    assert_close(out, expected, "outputs")
    assert out.grad_fn is not None
    labels = torch.tensor([0, 2, 1, 1, 0])
    F.cross_entropy(out, labels).backward()
    F.cross_entropy(expected, labels).backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, q.grad, f"gradient of {name}")
    assert_close(x.grad, x_eager.grad, "the input's gradient")


@pytest.mark.parametrize("optimizer", ["SGD", "AdamW"])
def test_training_steps_under_the_thin_runtime_end_with_eagers_weights(optimizer):
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(),
                          nn.Linear(16, 3))
    eager = copy.deepcopy(model)
    backend = AxgraphBackend()
    compiled = torch.compile(model, backend=backend)
    make = {"SGD": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
            "AdamW": lambda ps: torch.optim.AdamW(ps, lr=0.01)}[optimizer]
    opt, eager_opt = make(model.parameters()), make(eager.parameters())
    x, labels = torch.randn(8, 6), torch.randint(0, 3, (8,))
    for _ in range(6):
        for net, o in ((compiled, opt), (eager, eager_opt)):
            o.zero_grad()
            F.cross_entropy(net(x), labels).backward()
            o.step()
    assert backend.runtimes == ["thin"]
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p, q, f"{name} after 6 {optimizer} steps")


def test_a_frozen_layer_gets_no_gradient_and_the_others_eagers():
    model = small_net()
    model[0].weight.requires_grad_(False)
    eager = copy.deepcopy(model)
    backend = AxgraphBackend()
    x = torch.randn(4, 12)
    torch.compile(model, backend=backend)(x).pow(2).sum().backward()
    eager(x).pow(2).sum().backward()
    assert backend.runtimes == ["thin"]
    assert model[0].weight.grad is None
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        if p.requires_grad:
            assert_close(p.grad, q.grad, f"gradient of {name}")


def test_batch_norm_training_keeps_aotautograds_runtime_and_agrees():
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    eager = copy.deepcopy(model)
    backend = AxgraphBackend()
    x = torch.randn(10, 6)
    out, expected = torch.compile(model, backend=backend)(x), eager(x)
    assert len(backend.runtimes) == 1 and backend.runtimes[0].endswith("is mutated")
    assert_close(out, expected, "outputs")
    out.pow(2).mean().backward()
    expected.pow(2).mean().backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, q.grad, f"gradient of {name}")
    assert_close(model[1].running_mean, eager[1].running_mean, "running mean")
    assert_close(model[1].running_var, eager[1].running_var, "running variance")


@pytest.mark.parametrize("alias", ["view", "itself"])
def test_an_output_aliasing_an_input_is_the_inputs_own(alias):
    def f(x, w):
        y = torch.tanh(x @ w)
        return y, (x.view(-1) if alias == "view" else x)

    w = torch.randn(4, 3, requires_grad=True)
    x = torch.randn(5, 4, requires_grad=True)
    backend = AxgraphBackend()
    y, same = torch.compile(f, backend=backend)(x, w)
    if alias == "view":  # AOTAutograd's runtime regenerates the view of the input
        assert backend.runtimes == ["output 1 is a view or alias (alias_of_input)"]
        assert same._base is x and same.shape == (20,)
    else:  # Dynamo returns the input itself, outside the graph, which stays plain
        assert backend.runtimes == ["thin"]
        assert same is x
    (y.sum() + (same * 2).sum()).backward()
    w_eager, x_eager = w.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    y_eager, same_eager = f(x_eager, w_eager)
    (y_eager.sum() + (same_eager * 2).sum()).backward()
    assert_close(w.grad, w_eager.grad, "the weight's gradient")
    assert_close(x.grad, x_eager.grad, "the input's gradient")


def two_outputs(x, w, v):
    h = torch.relu(x @ w)
    return h @ v, torch.sigmoid(h).sum(1)


def parameters():
    return (torch.randn(6, 5, requires_grad=True), torch.randn(5, 3, requires_grad=True))


def eager_copies(*tensors):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def test_an_output_that_does_not_reach_the_loss_gets_a_zero_tangent():
    x, (w, v) = torch.randn(4, 6), parameters()
    backend = AxgraphBackend()
    first, second = torch.compile(two_outputs, backend=backend)(x, w, v)
    assert backend.runtimes == ["thin"]
    (first * first).sum().backward()  # `second` never reaches the loss
    w_eager, v_eager = eager_copies(w, v)
    first_eager, second_eager = two_outputs(x, w_eager, v_eager)
    assert_close(second, second_eager, "the unused output")
    (first_eager * first_eager).sum().backward()
    assert_close(w.grad, w_eager.grad, "the first weight's gradient")
    assert_close(v.grad, v_eager.grad, "the second weight's gradient")


def test_an_integer_output_beside_a_float_one_is_not_differentiable():
    def classify(x, w):
        scores = torch.log_softmax(x @ w, -1)
        return scores, scores.argmax(-1)

    x, (w, _) = torch.randn(7, 6), parameters()
    backend = AxgraphBackend()
    scores, labels = torch.compile(classify, backend=backend)(x, w)
    assert backend.runtimes == ["thin"]
    (w_eager,) = eager_copies(w)
    scores_eager, labels_eager = classify(x, w_eager)
    assert labels.dtype == torch.int64 and not labels.requires_grad
    assert torch.equal(labels, labels_eager)
    scores.gather(1, labels[:, None]).sum().backward()
    scores_eager.gather(1, labels_eager[:, None]).sum().backward()
    assert_close(w.grad, w_eager.grad, "the weight's gradient")


@pytest.mark.parametrize("loss", ["transposed", "expanded"])
def test_a_non_contiguous_output_gradient_gives_eagers_gradients(loss):
    weights = torch.randn(3, 4)
    losses = {"transposed": lambda out: (out.t() * weights).sum(),  # a transposed tangent
              "expanded": lambda out: out.sum()}  # a stride-0 tangent
    x, (w, v) = torch.randn(4, 6), parameters()
    backend = AxgraphBackend()
    first, _ = torch.compile(two_outputs, backend=backend)(x, w, v)
    losses[loss](first).backward()
    w_eager, v_eager = eager_copies(w, v)
    losses[loss](two_outputs(x, w_eager, v_eager)[0]).backward()
    assert backend.runtimes == ["thin"]
    assert_close(w.grad, w_eager.grad, "the first weight's gradient")
    assert_close(v.grad, v_eager.grad, "the second weight's gradient")


def spied(backend, seen):
    def compile(gm, example_inputs):
        compiled = backend(gm, example_inputs)
        seen.append(compiled)
        return compiled
    return compile


def test_without_grad_mode_or_inputs_needing_it_only_the_forward_runs():
    x, (w, v) = torch.randn(4, 6), parameters()
    backend, seen = AxgraphBackend(), []
    compiled = torch.compile(two_outputs, backend=spied(backend, seen))
    compiled(x, w, v)
    with torch.no_grad():  # Dynamo compiles an inference graph: AOTAutograd's runtime
        first, second = compiled(x, w, v)
    assert backend.runtimes == ["thin", "no gradients needed (an inference graph)"]
    expected = two_outputs(x, w, v)
    assert_close(first, expected[0], "first output, no grad")
    assert first.grad_fn is None and second.grad_fn is None
    thin = seen[0]  # the thin runtime called directly: Dynamo's guards would recompile
    with torch.no_grad():
        results = thin(x, w, v)
    detached = thin(x, w.detach(), v.detach())
    for got in (results, detached):
        assert len(got) == 2 and all(t.grad_fn is None for t in got)
        assert_close(got[0], expected[0], "first output")
        assert_close(got[1], expected[1], "second output")


@pytest.mark.parametrize("through", ["weight", "bias", "loss", "backward"])
def test_double_backward_is_refused_not_silently_wrong(through):
    model = nn.Sequential(nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 3))
    x = torch.randn(5, 12)
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend=AxgraphBackend())
    params = list(model.parameters())
    scale = torch.tensor(1.5, requires_grad=True)  # the loss's own: reaches the tangent
    grads = torch.autograd.grad((scale * compiled(x)).pow(2).sum(), params, create_graph=True)
    expected = torch.autograd.grad((scale * eager(x)).pow(2).sum(), list(eager.parameters()))
    for got, want in zip(grads, expected):
        assert_close(got, want, "first derivative with create_graph")
    assert all(g.requires_grad for g in grads)
    # the first weight's gradient depends on the first bias (through tanh's derivative),
    # which the backward graph reads only as a saved activation
    penalty = grads[0].pow(2).sum() + params[1].sum() + scale
    with pytest.raises(NotDifferentiableError, match="double backward"):
        if through == "backward":
            penalty.backward()
        else:
            torch.autograd.grad(penalty, {"weight": params[0], "bias": params[1],
                                          "loss": scale}[through])


def test_a_dynamic_batch_trains_under_the_thin_runtime():
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    eager = copy.deepcopy(model)
    backend = AxgraphBackend()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    for batch in (5, 9):
        x = torch.randn(batch, 6)
        for net in (compiled, eager):
            net.zero_grad()
            out = net(x)
            (out * out.detach().sign()).mean().backward()  # a tangent that is not uniform
        assert out.shape == (batch, 3)
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            assert_close(p.grad, q.grad, f"gradient of {name}, batch {batch}")
    assert backend.runtimes == ["thin"]


@pytest.mark.parametrize("fallback", [False, True])
def test_a_cloned_input_is_a_fresh_output(fallback):
    def f(x, w):
        y = (x * w).sum(1)
        if fallback:
            y = torch.cumsum(y, 0)  # an op without a rule: the graph is split
        return y, x.clone()

    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    backend = AxgraphBackend()
    y, copy_of_x = torch.compile(f, backend=backend)(x, w)
    assert backend.runtimes == ["thin"]
    assert bool(backend.fallbacks) == fallback
    assert copy_of_x.data_ptr() != x.data_ptr() and copy_of_x._base is None
    assert_close(copy_of_x, x, "the clone")
    (y.sum() + (copy_of_x * 3).sum()).backward()
    with torch.no_grad():
        copy_of_x.zero_()
    assert not bool((x == 0).any())
    x_eager, w_eager = eager_copies(x, w)
    y_eager, clone_eager = f(x_eager, w_eager)
    (y_eager.sum() + (clone_eager * 3).sum()).backward()
    assert_close(x.grad, x_eager.grad, "the input's gradient")
    assert_close(w.grad, w_eager.grad, "the weight's gradient")


def test_a_cloned_input_is_fresh_on_aotautograds_runtime_too():
    """An inference graph (no input needs a gradient) keeps AOTAutograd's runtime; the
    clone it returns must still be memory of its own."""
    def f(x):
        return x.clone(), x.t()

    x = torch.randn(3, 4)
    backend = AxgraphBackend()
    copy_of_x, x_t = torch.compile(f, backend=backend)(x)
    assert backend.runtimes != ["thin"]
    assert copy_of_x.data_ptr() != x.data_ptr()
    with torch.no_grad():
        copy_of_x.zero_()
    assert not bool((x == 0).any())
    assert_close(x_t, x.t(), "the transpose")


def _mlp():
    return nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 16), nn.GELU(),
                         nn.Linear(16, 4))


def test_saved_activations_reach_the_backward_as_arrays_and_gradients_are_eagers():
    model = _mlp()
    eager = copy.deepcopy(model)
    backend = AxgraphBackend()
    x = torch.randn(6, 10)
    out = torch.compile(model, backend=backend)(x)
    forward = backend.graphs[0]
    assert backend.runtimes == ["thin"] and forward.raw  # the tanh and GELU inputs, ...
    user = {o.index for o in forward.built.outputs[:1] if o.kind == "result"}
    raw = [forward.built.outputs[p] for p in forward.raw]
    assert all(o.index not in user for o in raw if o.kind == "result")
    assert {o.kind for o in raw} == {"result", "argument"}  # ... and x and the weights
    (out ** 2).sum().backward()
    (eager(x) ** 2).sum().backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, q.grad, f"gradient of {name}")


def test_saved_tensor_hooks_see_every_saved_value_as_a_tensor():
    """Under the caller's saved-tensor hooks (offloading, say) the raw arrays are saved
    as tensors, so the hooks pack each of them."""
    model = _mlp()
    eager = copy.deepcopy(model)
    backend = AxgraphBackend()
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(6, 10)
    compiled(x).sum().backward()  # compiled, raw arrays chosen
    model.zero_grad()
    packed = []

    def pack(tensor):
        assert isinstance(tensor, torch.Tensor)
        packed.append(tensor)
        return tensor.clone()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = compiled(x)
    raw = len(backend.graphs[0].raw)
    assert raw and len(packed) >= raw
    (out * 3).sum().backward()
    (eager(x) * 3).sum().backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p.grad, q.grad, f"gradient of {name} under saved-tensor hooks")


def test_an_output_the_backward_reads_changed_in_place_is_refused_as_in_eager():
    """tanh's backward reads its output: an output handed to the user and saved is one
    tensor, so writing to it is caught by autograd's version check, never a silently
    wrong gradient."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(5, 5)

        def forward(self, x):
            return torch.tanh(self.linear(x))

    for net in (Net(), torch.compile(Net(), backend=AxgraphBackend())):
        out = net(torch.randn(3, 5))
        out.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


@pytest.mark.parametrize("written", ["input", "weight"])
def test_an_input_saved_as_an_array_and_changed_in_place_is_refused_as_in_eager(written):
    """The backward reads x and the second weight from arrays over their memory (no
    tensor saved): writing to either between the forward and the backward is refused as
    autograd refuses it in eager, never a gradient from the new values."""
    for compiled in (False, True):
        torch.manual_seed(0)
        model = _mlp()
        net = torch.compile(model, backend=AxgraphBackend()) if compiled else model
        x = torch.randn(6, 10)
        out = net(x)
        with torch.no_grad():
            (x if written == "input" else model[2].weight).mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()
