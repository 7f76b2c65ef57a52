"""Adding a backend: one class implementing `core.Backend`, one `register_backend` line,
and axes graphs run on it through `ng.make_transformer` (docs/architecture.md)."""
import dataclasses

import numpy as np
import pytest

import axgraph as ng
from axgraph import core


class Tiny(core.Backend):
    """The core interpreter, reached through the protocol: what a JAX or XLA backend
    would be, with `jax.jit` where this calls the interpreter."""

    def __init__(self, capabilities=core.Capabilities()):
        self.capabilities = capabilities
        self.compiled = []  # (function, options)
        self.calls = []  # the keyword arguments of each call

    def compile(self, function, trace=False):
        self.compiled.append((function, {"trace": trace}))
        run = core.get_backend("interpreter").compile(function)

        def executable(*arrays, out=None, donate=None):
            self.calls.append({"out": out, "donate": donate})
            return run(*arrays, out=out)

        return executable


@pytest.fixture
def registry(monkeypatch):
    """The backend registry, restored after the test."""
    monkeypatch.setattr(core.backend, "_BACKENDS", dict(core.backend._BACKENDS))


def _training_graph():
    N = ng.make_axis(name="N")  # the batch: its length comes from the data
    F = ng.make_axis(length=4, name="F")
    x = ng.placeholder([F, N], dtype=np.float64, name="x")
    w = ng.variable([F], initial_value=np.array([0.5, -1.0, 2.0, 0.25]), dtype=np.float64,
                    name="w")
    cost = ng.sum(ng.tanh(x * w)[1:3, :], out_axes=())
    step = ng.assign(w, w - 0.1 * ng.deriv(cost, w))
    return x, w, cost, step


def test_a_backend_defined_here_runs_axes_graphs_through_make_transformer(registry, rng):
    tiny = Tiny()
    core.register_backend("tiny", tiny)
    assert "tiny" in ng.transformers.transformer_choices() and "tiny" in core.backends()
    x, w, cost, step = _training_graph()
    xv = rng.standard_normal((4, 3))
    got, expected = [], []
    for name, values in (("tiny", got), ("numpy", expected)):
        with ng.make_transformer(name) as t:
            train = t.computation([cost, step, w], x)  # w: its value after the step
            for batch in (xv, xv[:, :2]):  # two batch lengths, one computation
                loss, _, weights = train(batch)
                values.append(loss)
            values.append(weights)
    for value, reference in zip(got, expected):
        np.testing.assert_allclose(value, reference, rtol=1e-13)
    # by hand: the first cost, and w after two steps of gradient descent on rows 1..2
    wv = np.array([0.5, -1.0, 2.0, 0.25])
    assert got[0] == pytest.approx(np.sum(np.tanh(xv * wv[:, None])[1:3]), rel=1e-13)
    for batch in (xv, xv[:, :2]):
        gradient = np.sum(batch * (1 - np.tanh(batch * wv[:, None]) ** 2), axis=1)
        gradient[[0, 3]] = 0
        wv = wv - 0.1 * gradient
    np.testing.assert_allclose(got[2], wv, rtol=1e-13)
    # Lowered and optimized once (the default pipeline: the backend asks for no passes of
    # its own); the size variable of the batch axis is bound by Function.bind per call.
    ((function, options),) = tiny.compiled
    assert options == {"trace": False} and function.free_symbols == {"N"}
    assert all(call == {"out": None, "donate": None} for call in tiny.calls)


def test_backend_options_are_checked_against_its_compile(registry):
    core.register_backend("tiny", Tiny)  # a class is made with no arguments
    with ng.make_transformer("tiny", trace=True) as t:
        x = ng.placeholder([ng.make_axis(length=2, name="A")], dtype=np.float64)
        np.testing.assert_array_equal(t.computation(x * 2.0, x)(np.ones(2)), [2.0, 2.0])
        assert t.backend.compiled[0][1] == {"trace": True}
    with pytest.raises(ng.AxgraphTypeError) as info:
        ng.make_transformer("tiny", fast=True)
    assert "fast" in str(info.value) and "trace" in str(info.value)
    assert "test_transformer_backends.py" in str(info.value)
    factory = ng.transformers.make_transformer_factory("tiny", trace=True)
    with factory() as t:
        assert t.transformer_name == "tiny" and t.backend_options == {"trace": True}


def test_declared_capabilities_decide_what_a_call_passes(registry, rng):
    x, w, cost, step = _training_graph()
    xv = rng.standard_normal((4, 3))
    for capabilities in (core.Capabilities(), core.Capabilities(donation=True),
                         core.Capabilities(caller_outputs=True)):
        tiny = Tiny(capabilities)
        core.register_backend("tiny", tiny)
        with ng.make_transformer("tiny") as t:
            target = np.empty(())
            returned = t.computation([cost, step], x)(xv, out=[target, None])
            assert returned[0] is target and target == pytest.approx(
                np.sum(np.tanh(xv * np.array([0.5, -1.0, 2.0, 0.25])[:, None])[1:3]))
        (call,) = tiny.calls
        # donate: w's new value may overwrite w's array (result 1 <- argument 1, x is 0)
        assert call["donate"] == ({1: 1} if capabilities.donation else None)
        if capabilities.caller_outputs:
            assert call["out"][0] is target and call["out"][1] is None
        else:
            assert call["out"] is None  # the computation copies into `out` itself


def test_capabilities_are_declared_values_and_bad_backends_are_refused(registry):
    with pytest.raises(dataclasses.FrozenInstanceError):
        core.Capabilities().donation = True
    assert core.get_backend("cpu").capabilities == core.Capabilities(donation=True,
                                                                      caller_outputs=True)
    assert core.get_backend("interpreter").capabilities == core.Capabilities()
    with pytest.raises(ng.AxgraphTypeError, match="takes a Backend"):
        core.register_backend("plain", object())
    with pytest.raises(ng.AxgraphValueError, match="no core backend named 'missing'"):
        core.get_backend("missing")
