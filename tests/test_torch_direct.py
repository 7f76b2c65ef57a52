"""The torch bridge's direct call (frontends/torch/direct.py): a static graph that runs as one
C function, or as a Python program, is called through a short generated function after its
first call; its values are the general path's and eager's, and wherever its assumptions fail
(a tensor now needing gradients, a strided or mistyped argument, a released program) the
general path runs the call instead."""
from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from axgraph.errors import AxgraphError  # noqa: E402
from axgraph.frontends.torch import AxgraphBackend  # noqa: E402
from axgraph.frontends.torch.direct import MISS  # noqa: E402
from axgraph.transformers.cpu import kernel_c  # noqa: E402
from torch_checks import assert_close, fresh_dynamo  # noqa: E402,F401

pytestmark = pytest.mark.skipif(not kernel_c.c_available(), reason="no C compiler")


@pytest.fixture(autouse=True)
def python_runtime(monkeypatch):
    """The thin runtime's Python path, which the direct calls serve (the C++ node, which
    takes over where it builds, is tests/test_torch_thin_node.py's)."""
    monkeypatch.setenv("AXGRAPH_TORCH_NODE", "0")


def _trained(steps=3, native=True):
    """A small net trained a few SGD steps compiled and in eager, with its backend (its
    graphs C steps, or with `native` False Python programs)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3))
    eager = copy.deepcopy(model)
    backend = AxgraphBackend(native=native)
    compiled = torch.compile(model, backend=backend)
    x, labels = torch.randn(5, 12), torch.tensor([0, 2, 1, 1, 0])
    for net, params in ((compiled, model), (eager, eager)):
        optimizer = torch.optim.SGD(params.parameters(), lr=0.1)
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(net(x), labels).backward()
            optimizer.step()
    return model, eager, backend, x, compiled


@pytest.mark.parametrize("native", [True, False])
def test_a_training_step_runs_through_the_direct_calls_and_ends_with_eagers_weights(native):
    model, eager, backend, _, _ = _trained(native=native)
    forward, backward = backend.graphs
    for graph in (forward, backward):
        assert graph.direct is not None
        assert ("ENTRY(FIXED" in graph.direct.source) == native
        assert ("RUN(PROGRAM" in graph.direct.source) == (not native)
        assert graph.direct_calls[0] >= 2  # every call after the first
        info = graph.cache_info()
        assert (info.misses, info.hits) == (1, 2)  # direct calls count as hits
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p, q, f"{name} after three steps")


@pytest.mark.parametrize("native", [True, False])
def test_arguments_the_direct_call_cannot_take_run_the_general_path(native):
    """Called with other tensors than those it was written for, the forward graph still
    gives eager's values: a strided x (C takes dense arrays: the general path copies
    it; a Python program reads it as it is), a weight no longer needing gradients
    (viewed with numpy()); and a float64 x is refused with the general path's error,
    never read as float32."""
    model, _, backend, x, compiled = _trained(steps=1, native=native)
    forward = backend.graphs[0]
    direct, seen = forward.direct, []
    forward.direct = lambda args: (seen.append(args), direct(args))[1]
    compiled(x)
    forward.direct = direct
    expected = model(x)
    (args,) = seen
    (position,) = [i for i, a in enumerate(args) if a is x]
    strided = torch.randn(12, 5).t().copy_(x)
    assert not strided.is_contiguous()
    moved = [strided if i == position else a for i, a in enumerate(args)]
    if native:
        assert direct(tuple(moved)) is MISS
    else:
        assert_close(direct(tuple(moved))[0], expected, "the direct output for a strided x")
    assert_close(forward(*moved)[0], expected, "the output for a strided x")
    frozen = [a.detach().clone() if a is model[0].weight else a for a in args]
    assert_close(forward(*frozen)[0], expected, "the output for a weight without gradients")
    wide = [a.double() if i == position else a for i, a in enumerate(args)]
    assert direct(tuple(wide)) is MISS
    with pytest.raises(AxgraphError, match="float64|f64"):
        forward(*wide)


def test_a_released_program_is_not_run_by_the_direct_call():
    """A Python program evicted from its graph's cache is released (its namespace
    emptied): the direct call written for it hands the call to the general path,
    which builds the program again."""
    model, _, backend, x, compiled = _trained(steps=1, native=False)
    forward = backend.graphs[0]
    program = forward.executable.last_program
    direct, seen = forward.direct, []
    forward.direct = lambda args: (seen.append(args), direct(args))[1]
    compiled(x)
    forward.direct = direct
    executable = forward.executable
    (key,) = list(executable._cache.programs)  # evicted as the cache evicts: released
    executable._cache.on_evict(key, executable._cache.programs.pop(key))
    assert not program.namespace
    assert direct(seen[0]) is MISS
    assert_close(compiled(x), model(x), "the output after the release")
    assert executable.last_program is not program
