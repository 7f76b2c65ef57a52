"""Normalizations (layer norm, RMS norm, a torch-style decomposition saving its mean and
reciprocal deviation) as one multi-pass row kernel on the cpu backend, forward and
backward, against float64 NumPy written here; the NumPy engine's kernel for such a group;
and the generated program's single kernel line."""
from __future__ import annotations

import re

import numpy as np
import pytest

import axgraph as ng
from axgraph import core
from axgraph.transformers.cpu import fusion
from axgraph.transformers.cpu.backend import CpuFunction
from axgraph.transformers.cpu.fusion import FusionPass, compile_group, find_fusion_groups


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """Kernels built for this module only."""
    patch = pytest.MonkeyPatch()
    patch.setenv("AXGRAPH_CACHE_DIR", str(tmp_path_factory.mktemp("row-norms")))
    yield
    patch.undo()


@pytest.fixture(scope="module")
def has_c(own_cache) -> bool:
    return "c" in fusion.available_engines()


def kernel_calls(source: str):
    """The generated program's fused-kernel calls (`F12(...)`)."""
    return re.findall(r"^\s+(F\d+)\(", source, re.MULTILINE)


def axes_of(batch, features):
    batch_axes = [ng.make_axis(n, name=f"B{k}") for k, n in enumerate(batch)]
    return batch_axes, ng.make_axis(features, name="F")


def layer_norm64(x, gain, bias, eps):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    return (x - mean) * rstd * gain + bias, mean[..., 0], rstd[..., 0]


def layer_norm_grads64(x, gain, dy, eps):
    """d(sum(dy * layer_norm(x)))/d(x, gain, bias), by the textbook formulas."""
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    n = x.shape[-1]
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    g = dy * gain
    dx = rstd / n * (n * g - g.sum(-1, keepdims=True) - xhat * (g * xhat).sum(-1, keepdims=True))
    lead = tuple(range(x.ndim - 1))
    return dx, (dy * xhat).sum(lead), dy.sum(lead)


#: (batch dims, features): every program here has a node of more than 32K elements, so it
#: runs as generated Python (a smaller one may run as one C function and keeps its nodes).
SHAPES = [((40, 30), 64), ((33000,), 1), ((5000, 2), 7), ((257,), 129), ((2, 60), 300)]


@pytest.mark.parametrize("batch, features", SHAPES)
@pytest.mark.parametrize("eps", [1e-5, 0.25])
def test_layer_norm_runs_as_one_kernel_and_matches_float64(has_c, batch, features, eps):
    batch_axes, f = axes_of(batch, features)
    x = ng.placeholder(batch_axes + [f])
    gain, bias = ng.placeholder([f]), ng.placeholder([f])
    rng = np.random.default_rng(features)
    xv = (rng.standard_normal(batch + (features,)) * 3 + 1).astype(np.float32)
    gv = rng.standard_normal(features).astype(np.float32)
    bv = rng.standard_normal(features).astype(np.float32)
    with ng.make_transformer("cpu", fuse_min_elements=0) as transformer:
        step = transformer.computation(ng.layer_norm(x, [f], gain, bias, eps=eps), x, gain, bias)
        got = step(xv, gv, bv)
        source = step.source
    want, _, _ = layer_norm64(xv, gv, bv, eps)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    if has_c:
        assert len(kernel_calls(source)) == 1, source
        assert "matmul" not in source and "reduce" not in source


@pytest.mark.parametrize("batch, features", [((60, 20), 32), ((40000,), 1), ((1000,), 33)])
def test_rms_norm_runs_as_one_kernel_and_matches_float64(has_c, batch, features):
    batch_axes, f = axes_of(batch, features)
    x, gain = ng.placeholder(batch_axes + [f]), ng.placeholder([f])
    rng = np.random.default_rng(1)
    xv = rng.standard_normal(batch + (features,)).astype(np.float32)
    gv = rng.standard_normal(features).astype(np.float32)
    with ng.make_transformer("cpu", fuse_min_elements=0) as transformer:
        step = transformer.computation(ng.rms_norm(x, [f], gain, eps=1e-6), x, gain)
        got = step(xv, gv)
        source = step.source
    x64 = xv.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * gv
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    if has_c:
        assert len(kernel_calls(source)) == 1, source


def torch_style_layer_norm(x, f, gain, bias, eps):
    """aten.native_layer_norm as AOTAutograd decomposes it: the mean and the reciprocal
    deviation are results too (saved for the backward pass)."""
    mean = ng.sum(x, reduction_axes=[f]) / f.length
    centered = x - mean
    rstd = ng.rsqrt(ng.sum(centered * centered, reduction_axes=[f]) / f.length + eps)
    return centered * rstd * gain + bias, mean, rstd


@pytest.mark.parametrize("batch, features", [((20, 32), 64), ((11000,), 3)])
def test_a_decomposed_layer_norm_gives_its_mean_and_deviation_from_the_one_kernel(
        has_c, batch, features):
    batch_axes, f = axes_of(batch, features)
    x = ng.placeholder(batch_axes + [f])
    gain, bias = ng.placeholder([f]), ng.placeholder([f])
    rng = np.random.default_rng(2)
    xv = (rng.standard_normal(batch + (features,)) - 2).astype(np.float32)
    gv, bv = (rng.standard_normal(features).astype(np.float32) for _ in range(2))
    with ng.make_transformer("cpu", fuse_min_elements=0) as transformer:
        step = transformer.computation(list(torch_style_layer_norm(x, f, gain, bias, 1e-5)),
                                       x, gain, bias)
        got = step(xv, gv, bv)
        again = step(xv + 1, gv, bv)  # the kept row values are the new call's
        source = step.source
    for value, wanted in zip(got, layer_norm64(xv, gv, bv, 1e-5)):
        np.testing.assert_allclose(value, wanted, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(again[1], (xv + np.float32(1)).astype(np.float64).mean(-1),
                               rtol=1e-5, atol=1e-6)
    if has_c:
        assert len(kernel_calls(source)) == 1, source
        assert source.count("np.copyto(") == 2, source


@pytest.mark.parametrize("batch, features", [((20, 32), 64), ((33000,), 1), ((400, 5), 21)])
def test_layer_norm_gradients_match_float64(has_c, batch, features):
    batch_axes, f = axes_of(batch, features)
    x = ng.placeholder(batch_axes + [f])
    dy = ng.placeholder(batch_axes + [f])
    rng = np.random.default_rng(3)
    xv = rng.standard_normal(batch + (features,)).astype(np.float32)
    dyv = rng.standard_normal(batch + (features,)).astype(np.float32)
    gv = rng.standard_normal(features).astype(np.float32)
    bv = rng.standard_normal(features).astype(np.float32)
    with ng.make_transformer("cpu", fuse_min_elements=0) as transformer:
        g_in, b_in = ng.placeholder([f]), ng.placeholder([f])
        y, _, _ = torch_style_layer_norm(x, f, g_in, b_in, 1e-5)
        cost = ng.sum(y * dy, reduction_axes=y.axes)
        step = transformer.computation(
            [ng.deriv(cost, x), ng.deriv(cost, g_in), ng.deriv(cost, b_in)],
            x, dy, g_in, b_in)
        got = step(xv, dyv, gv, bv)
        fused = [node for node in step.fused_function.nodes if isinstance(node, core.Fused)]
    for value, wanted in zip(got, layer_norm_grads64(xv, gv, dyv, 1e-5)):
        np.testing.assert_allclose(value, wanted, rtol=5e-4, atol=5e-5)
    if has_c:  # the input's gradient: both its row sums and the rest in one kernel
        assert any(sum(type(n) is core.Sum for n in node.body) == 2 for node in fused)


def decomposed_core(batch, features):
    """A torch-style layer norm in core ops: (y, mean, rstd) of x, times a gain."""
    f32 = core.element_type(np.float32)
    x = core.Parameter(f32, tuple(batch) + (features,))
    gain = core.Parameter(f32, (features,))
    rank = len(batch) + 1
    total = core.Sum(x, (rank - 1,))
    count = core.Constant(f32, total.shape, np.float32(features))
    mean = core.Divide(total, count)
    centered = core.Subtract(x, core.Broadcast(mean, x.shape, (rank - 1,)))
    square = core.Sum(core.Multiply(centered, centered), (rank - 1,))
    rstd = core.Rsqrt(core.Add(core.Divide(square, count),
                               core.Constant(f32, total.shape, np.float32(1e-5))))
    y = core.Multiply(core.Multiply(centered, core.Broadcast(rstd, x.shape, (rank - 1,))),
                      core.Broadcast(gain, x.shape, tuple(range(rank - 1))))
    return core.Function([y, mean, rstd], [x, gain]), (y, mean, rstd)


def test_a_group_of_several_results_is_a_fused_node_per_result_over_one_body(has_c):
    """The IR any backend runs: one Fused node per result (`result=k` printed), one body;
    the interpreter runs each (its body) to the unfused function's values."""
    function, _ = decomposed_core((40, 60), 16)  # too large to run as one C function
    fused = FusionPass().run(function) if has_c else None
    if fused is None:
        pytest.skip("no working C compiler here: no multi-pass groups are formed")
    nodes = [node for node in fused.nodes if isinstance(node, core.Fused)]
    assert [node.result for node in nodes] == [0, 1, 2]
    assert len({id(node.function) for node in nodes}) == 1
    assert "result=1" in str(fused) and "result=2" in str(fused)
    rng = np.random.default_rng(6)
    xv = rng.standard_normal((40, 60, 16)).astype(np.float32)
    gv = rng.standard_normal(16).astype(np.float32)
    for got, want in zip(core.compile(fused, backend="interpreter")(xv, gv),
                         core.compile(function, backend="interpreter")(xv, gv)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("batch, features", [((8, 32), 64), ((2,), 5), ((7,), 1), ((1,), 1),
                                             ((3, 1), 257)])
def test_the_numpy_engine_computes_what_the_c_engine_does(has_c, batch, features):
    if not has_c:
        pytest.skip("no working C compiler here")
    function, (y, mean, rstd) = decomposed_core(batch, features)
    (group,) = find_fusion_groups(function)
    assert group.row_dims == 1 and group.output is y and group.extras == (mean, rstd)
    rng = np.random.default_rng(4)
    xv = rng.standard_normal(batch + (features,)).astype(np.float32)
    gv = rng.standard_normal(features).astype(np.float32)
    shapes = {n: tuple(n.shape) for n in group.nodes + group.inputs}
    results = {}
    for engine in ("c", "numpy"):
        kernel = compile_group(group, shapes, engine=engine)
        assert kernel.engine == engine
        out = np.empty(xv.shape, np.float32)
        extras = (np.empty(batch, np.float32), np.empty(batch, np.float32))
        kernel(xv, gv, out=out, extras=extras)
        results[engine] = (out, *extras)
    want_y, want_mean, want_rstd = layer_norm64(xv, gv, 0.0, 1e-5)
    for engine, (out, got_mean, got_rstd) in results.items():
        np.testing.assert_allclose(out, want_y, rtol=2e-5, atol=2e-5, err_msg=engine)
        np.testing.assert_allclose(got_mean, want_mean, rtol=1e-5, atol=1e-6, err_msg=engine)
        np.testing.assert_allclose(got_rstd, want_rstd, rtol=1e-5, err_msg=engine)
    np.testing.assert_allclose(results["c"][0], results["numpy"][0], rtol=1e-5, atol=1e-6)
    # in place: the output over its own input
    kernel = compile_group(group, shapes, engine="c")
    inplace = xv.copy()
    kernel(inplace, gv, out=inplace, extras=(np.empty(batch, np.float32),) * 2)
    np.testing.assert_allclose(inplace, results["c"][0], rtol=0, atol=0)
    # calls remembering their arrays: new values, a new array, a strided one, one
    # overlapping an output (copied first)
    out = np.empty(xv.shape, np.float32)
    extras = (np.empty(batch, np.float32), np.empty(batch, np.float32))
    second = (xv * 2 + 1).astype(np.float32)
    strided = np.repeat(second, 2, axis=-1)[..., ::2]
    for x_in in (xv, second, second.copy(), strided, xv):
        kernel(x_in, gv, out=out, extras=extras)
        want_y, want_mean, _ = layer_norm64(np.ascontiguousarray(x_in), gv, 0.0, 1e-5)
        np.testing.assert_allclose(out, want_y, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(extras[0], want_mean, rtol=1e-5, atol=1e-5)
    gain_in_mean = np.zeros(max(batch[0], features) * 2, np.float32)
    gain_view, mean_view = gain_in_mean[:features], gain_in_mean[:batch[0]]
    if len(batch) == 1:  # the gain shares its bytes with the mean written: read a copy
        gain_view[...] = gv
        kernel(xv, gain_view, out=out, extras=(mean_view, extras[1]))
        np.testing.assert_allclose(out, results["c"][0], rtol=1e-6, atol=1e-6)


def test_a_row_value_whose_reader_leads_back_is_no_extra_output(has_c):
    """A row sum read outside the group, where that reader feeds the group's output,
    cannot be an extra output of that group (its node would depend on itself): the sum
    and the output land in different groups, and the program computes the right values."""
    f32 = core.element_type(np.float32)
    x = core.Parameter(f32, (6, 8))
    total = core.Sum(x, (1,))
    round_trip = core.Reshape(core.Reshape(total, (3, 2)), (6,))  # outside any group
    centered = core.Subtract(x, core.Broadcast(total, (6, 8), (1,)))
    y = core.Multiply(centered, core.Broadcast(round_trip, (6, 8), (1,)))
    function = core.Function([y], [x])
    for group in find_fusion_groups(function, row_passes=True):
        assert not (total in group.nodes and y in group.nodes)
    xv = np.random.default_rng(5).standard_normal((6, 8)).astype(np.float32)
    (got,) = CpuFunction(function, fuse_min_elements=0)(xv)
    x64 = xv.astype(np.float64)
    want = (x64 - x64.sum(1, keepdims=True)) * x64.sum(1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_an_extra_output_listed_before_an_input_the_group_reads_later(has_c):
    """The mean comes first in the function's order, the gain (computed, not a parameter)
    only after it: the group's nodes are made once every input is."""
    f32 = core.element_type(np.float32)
    x, g = core.Parameter(f32, (300, 130)), core.Parameter(f32, (130,))
    total = core.Sum(x, (1,))
    mean = core.Divide(total, core.Constant(f32, (300,), np.float32(130)))
    centered = core.Subtract(x, core.Broadcast(mean, (300, 130), (1,)))
    y = core.Multiply(centered, core.Broadcast(core.Exp(g), (300, 130), (0,)))
    function = core.Function([mean, y], [x, g])
    assert function.nodes.index(mean) < function.nodes.index(y.inputs[1].inputs[0])
    rng = np.random.default_rng(7)
    xv = rng.standard_normal((300, 130)).astype(np.float32)
    gv = rng.standard_normal(130).astype(np.float32)
    compiled = CpuFunction(function)
    got_mean, got_y = compiled(xv, gv)
    if has_c:
        assert sum(isinstance(n, core.Fused) for n in compiled.fused_function.nodes) == 2
    x64 = xv.astype(np.float64)
    np.testing.assert_allclose(got_mean, x64.mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_y, (x64 - x64.mean(1, keepdims=True)) * np.exp(gv),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch, features", [((3,), 0), ((0,), 5)])
def test_empty_rows_and_no_rows_give_the_reference_values(has_c, batch, features):
    """Rows of no elements: a mean of 0 / 0 (NaN), as the interpreter's unfused ops give."""
    function, _ = decomposed_core(batch, features)
    (group,) = find_fusion_groups(function, row_passes=True)
    shapes = {n: tuple(n.shape) for n in group.nodes + group.inputs}
    x, gain = np.zeros(batch + (features,), np.float32), np.ones(features, np.float32)
    want = core.compile(function, backend="interpreter")(x, gain)
    for engine in ("c", "numpy") if has_c else ("numpy",):
        out = np.empty_like(x)
        extras = (np.empty(batch, np.float32), np.empty(batch, np.float32))
        compile_group(group, shapes, engine=engine)(x, gain, out=out, extras=extras)
        for got, wanted in zip((out, *extras), want):
            np.testing.assert_array_equal(got, wanted)


@pytest.mark.parametrize("engine", ["auto", "numpy"])
def test_a_batch_of_symbolic_size_on_either_engine(has_c, engine):
    """Rows over a size variable: the kernel takes the bound sizes at each binding."""
    f32 = core.element_type(np.float32)
    n = core.Dim("N")
    x, gain = core.Parameter(f32, (n, 48)), core.Parameter(f32, (48,))
    total = core.Sum(core.Multiply(x, x), (1,))
    rms = core.Rsqrt(core.Add(core.Divide(total, core.Constant(f32, (n,), np.float32(48))),
                              core.Constant(f32, (n,), np.float32(1e-6))))
    y = core.Multiply(core.Multiply(x, core.Broadcast(rms, (n, 48), (1,))),
                      core.Broadcast(gain, (n, 48), (0,)))
    compiled = CpuFunction(core.Function([y], [x, gain]), engine=engine)
    rng = np.random.default_rng(8)
    gv = rng.standard_normal(48).astype(np.float32)
    for rows in (700, 1500):
        xv = rng.standard_normal((rows, 48)).astype(np.float32)
        (got,) = compiled(xv, gv)
        x64 = xv.astype(np.float64)
        want = x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + 1e-6) * gv
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
        fused = [node for node in compiled.fused_function.nodes
                 if isinstance(node, core.Fused) and type(node.output) is core.Multiply
                 and any(type(m) is core.Sum for m in node.body)]
        # the NumPy engine would run such a group op by op: it keeps the ops unfused
        assert len(fused) == (1 if has_c and engine == "auto" else 0)
