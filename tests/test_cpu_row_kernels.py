"""The C engine's row kernels (softmax, log-softmax and their backprops over trailing dims),
each computing its operand from two inputs first, against float64 NumPy; and the kernels'
choice of exp and of threads for math-heavy loops."""
from __future__ import annotations

import math
import platform
import shutil
import subprocess

import numpy as np
import pytest

from axgraph import core
from axgraph.errors import ExecutionError
from axgraph.transformers.cpu import fusion, kernel_c
from axgraph.transformers.cpu.fusion import FusedGroup, compile_group, find_fusion_groups


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """Kernels built for this module only (the compile is the slow part, and a shared cache
    could hold a library built from other kernel text)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("AXGRAPH_CACHE_DIR", str(tmp_path_factory.mktemp("row-kernels")))
    yield
    patch.undo()


@pytest.fixture(scope="module")
def has_c(own_cache) -> bool:
    return "c" in fusion.available_engines()


def only_group(function: core.Function):
    (group,) = find_fusion_groups(function)
    return group


def run(group, arrays):
    kernel = compile_group(group, {n: tuple(n.shape) for n in group.nodes + group.inputs},
                           engine="c")
    assert kernel.engine == "c"
    out = np.empty(tuple(group.output.shape), group.output.element_type.dtype)
    kernel(*arrays, out=out)
    return kernel, out


def softmax64(x: np.ndarray, axis: int = -1):
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True), shifted - np.log(e.sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("rows, inner", [(1024, 32), (7, 3), (33, 100), (2, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_kernels_with_a_prologue_match_numpy(has_c, rows, inner, dtype):
    if not has_c:
        pytest.skip("no working C compiler here")
    et = core.element_type(dtype)
    shape = (rows, inner)
    a, b, dy = (core.Parameter(et, shape, name=n) for n in ("a", "b", "dy"))
    rng = np.random.default_rng(5)
    av = (rng.standard_normal(shape) * 3).astype(dtype)
    bv = rng.standard_normal(shape).astype(dtype)
    av[0, 0] = -np.inf                      # a masked entry
    if rows > 2 and inner > 1:
        av[1, :] = -np.inf                  # a row masked whole: NaN, as NumPy gives
    dyv = rng.standard_normal(shape).astype(dtype)
    logits = core.Add(a, core.Multiply(b, b))
    with np.errstate(invalid="ignore"):  # the masked row
        y64, log64 = softmax64((av + bv * bv).astype(np.float64))
    # the backprops read y (a given array here) and compute their dy as dy * b
    yv, logv = y64.astype(dtype), log64.astype(dtype)
    given = core.Parameter(et, shape, name="y")
    upstream = core.Multiply(dy, b)
    cases = [
        (core.Softmax(logits, (1,)), [av, bv], y64),
        (core.LogSoftmax(logits, (1,)), [av, bv], log64),
        (core.SoftmaxBackprop(upstream, given, (1,)), [dyv, bv, yv],
         yv * (dyv * bv - (dyv * bv * yv.astype(np.float64)).sum(1, keepdims=True))),
        (core.LogSoftmaxBackprop(upstream, given, (1,)), [dyv, bv, logv],
         dyv * bv - np.exp(logv.astype(np.float64)) * (dyv * bv).sum(1, keepdims=True)),
    ]
    tolerance = 2e-5 if dtype == np.float32 else 1e-12
    for row, arrays, want in cases:
        names = ("dy", "b", "y") if isinstance(row, core.SoftmaxBackprop) else ("a", "b")
        by_name = dict(zip(names, arrays))
        function_parameters = {"a": a, "b": b, "dy": dy, "y": given}
        function = core.Function([row], [function_parameters[n] for n in names])
        group = only_group(function)
        assert group.row is row
        _, got = run(group, [by_name[x.name] for x in group.inputs])
        assert got.dtype == dtype
        assert np.array_equal(np.isnan(got), np.isnan(want)), row.op
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=tolerance, atol=tolerance,
                                   err_msg=row.op)
        assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])


def test_sign_of_values_from_the_ops_that_fix_it():
    n = 8
    x, y = core.Parameter(core.f32, (n,), name="x"), core.Parameter(core.f32, (n,), name="y")
    half = core.Constant(core.f32, (n,), -0.5)
    square = core.Multiply(x, x)
    assert kernel_c.sign(square) == 1
    assert kernel_c.sign(core.Multiply(square, half)) == -1
    assert kernel_c.sign(core.Negative(core.Abs(x))) == -1
    assert kernel_c.sign(core.Multiply(core.Exp(x), core.Negative(core.Sqrt(y)))) == -1
    assert kernel_c.sign(core.Power(x, core.Constant(core.f32, (n,), 2.0))) == 1
    assert kernel_c.sign(core.Multiply(x, half)) == 0
    assert kernel_c.sign(core.Multiply(x, y)) == 0
    assert kernel_c.sign(core.Power(x, core.Constant(core.f32, (n,), 3.0))) == 0


def test_an_exp_of_a_never_positive_argument_takes_exp_nonpositive(has_c):
    if not has_c:
        pytest.skip("no working C compiler here")
    n = 4096
    x, y = core.Parameter(core.f32, (n,), name="x"), core.Parameter(core.f32, (n,), name="y")
    half = core.Constant(core.f32, (n,), -0.5)
    gaussian = core.Function([core.Add(core.Exp(core.Multiply(core.Multiply(x, x), half)), y)],
                             [x, y])
    free = core.Function([core.Add(core.Exp(core.Multiply(x, y)), y)], [x, y])
    rng = np.random.default_rng(6)
    xv = (rng.standard_normal(n) * 6).astype(np.float32)
    xv[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 15.0]  # 15: e^-112.5 is 0 in float
    yv = rng.standard_normal(n).astype(np.float32)
    y64 = yv.astype(np.float64)
    for function, call, want in (
            (gaussian, "axgraph_exp_nonpositivef(", np.exp(np.float32(-0.5) * (xv * xv)) + y64),
            (free, "axgraph_expf(", np.exp((xv * yv).astype(np.float64)) + y64)):
        group = only_group(function)
        kernel, got = run(group, [{"x": xv, "y": yv}[v.name] for v in group.inputs])
        assert call in kernel.source
        assert np.array_equal(np.isnan(got), np.isnan(want))
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=3e-7, atol=1e-7)
        assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)])


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or
                    shutil.which("gcc") is None, reason="checks gcc's x86-64 assembly")
def test_row_kernels_load_their_elements_without_gathers(tmp_path):
    """Read through a helper taking the pointer array, gcc reloaded the input pointers per
    element and, tuning for an AVX-512 server (Ice Lake, Zen 3 and 4; not x86-64-v4's
    generic tuning), gathered the elements: softmax over rows of 32 took twice as long."""
    shape = (16, 32)
    a, b, y = (core.Parameter(core.f32, shape, name=n) for n in "aby")
    logits = core.Add(a, core.Multiply(b, b))
    for row, parameters in ((core.Softmax(logits, (1,)), [a, b]),
                            (core.SoftmaxBackprop(logits, y, (1,)), [a, b, y])):
        group = only_group(core.Function([row], parameters))
        path = tmp_path / f"{row.op}.c"
        path.write_text(kernel_c.generate_source(group))
        flags = [f for f in kernel_c.BASE_FLAGS if f != "-shared"]
        run = subprocess.run(["gcc", *flags, "-march=icelake-server", "-fopenmp", "-S", str(path),
                              "-o", "-"], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "gather" not in run.stdout, row.op


def zeroed_softmax(x: core.Node, fill: float = 0.0) -> core.Node:
    """Softmax over the last dim with its rows of nothing but -inf set to `fill`, as the
    torch bridge decomposes `_safe_softmax`."""
    shape, et = tuple(x.shape), x.element_type
    rows = shape[:-1]
    last = len(shape) - 1
    other = core.Max(core.Convert(core.NotEqual(x, core.Constant(et, shape, -np.inf)),
                                  core.f32), (last,))
    empty = core.Broadcast(core.Equal(other, core.Constant(core.f32, rows, 0.0)), shape,
                           (last,))
    return core.Select(empty, core.Constant(et, shape, fill), core.Softmax(x, (last,)))


def zeroed_softmax64(x: np.ndarray, fill: float = 0.0) -> np.ndarray:
    """The same in float64 NumPy: NaN rows stay NaN, only all -inf rows get `fill`."""
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        y, _ = softmax64(x)
    return np.where(np.all(x == -np.inf, axis=-1, keepdims=True), fill, y)


def masked_rows(rng, shape, dtype) -> np.ndarray:
    """Scores with a row of nothing but -inf, a row of NaN and -inf, a row with one -inf,
    and (for rows of one) a -inf row among finite ones."""
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    x[..., 0, :] = -np.inf
    if shape[-2] > 1:
        x[..., 1, :] = -np.inf
        x[..., 1, -1] = np.nan
    if shape[-2] > 2:
        x[..., 2, 0] = -np.inf
    return x


@pytest.mark.parametrize("shape", [(1024, 32), (7, 13), (5, 1), (3, 100), (2, 3, 4, 9)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("engine", ["c", "numpy"])
def test_a_softmax_filling_rows_of_only_minus_inf_is_one_row_kernel(has_c, shape, dtype,
                                                                    engine):
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    et = core.element_type(dtype)
    a = core.Parameter(et, shape, name="a")
    scale = core.Constant(et, shape, 0.5)
    fill = 0.25 if len(shape) == 4 else 0.0  # any scalar fill is the guard's
    output = zeroed_softmax(core.Multiply(a, scale), fill)
    (found,) = find_fusion_groups(core.Function([output], [a]))
    assert found.output is output and isinstance(found.row, core.Softmax)
    # the kernel runs the Fused node's body, as the cpu backend compiles it
    group = FusedGroup.of(fusion.fused_node(found, {a: a}))
    assert group.inputs == group.output.inputs[2].inputs[0].inputs[:1]  # a's parameter
    assert [n.op for n in group.guard] == ["Select", "Broadcast", "Equal", "Max", "Convert",
                                           "NotEqual"]
    assert [n.op for n in group.elementwise_nodes if n.op != "Constant"] == ["Multiply"]
    kernel = compile_group(group, {n: tuple(n.shape) for n in group.nodes + group.inputs},
                           engine=engine)
    assert kernel.engine == engine
    av = masked_rows(np.random.default_rng(7), shape, dtype)
    out = np.empty(shape, dtype)
    kernel(av, out=out)
    want = zeroed_softmax64(av * dtype(0.5), fill)
    assert np.array_equal(np.isnan(out), np.isnan(want))
    tolerance = 2e-6 if dtype == np.float32 else 1e-12
    finite = ~np.isnan(want)
    np.testing.assert_allclose(out[finite], want[finite], rtol=tolerance, atol=tolerance)
    assert np.all(out[..., 0, :] == fill)


def test_a_zeroed_softmax_on_the_cpu_backend_reads_strided_scores_as_the_reference():
    shape = (6, 24)
    a = core.Parameter(core.f32, shape, name="a")
    function = core.Function([zeroed_softmax(a)], [a])
    rng = np.random.default_rng(8)
    wide = masked_rows(rng, (6, 48), np.float32)
    strided = wide[:, ::2]  # every other column: not contiguous
    assert not strided.flags.c_contiguous
    (got,) = core.compile(function, backend="cpu", fuse_min_elements=0)(strided)
    (reference,) = core.compile(function, backend="interpreter")(strided)
    want = zeroed_softmax64(strided)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isnan(reference), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(got[finite], reference[finite], rtol=2e-6, atol=2e-6)


def test_a_guard_read_elsewhere_leaves_the_softmax_and_its_guard_apart():
    shape = (4, 8)
    a = core.Parameter(core.f32, shape, name="a")
    output = zeroed_softmax(a)
    empty = output.inputs[0].inputs[0]  # the Equal: also a result of its own
    groups = find_fusion_groups(core.Function([output, empty], [a]))
    assert all(not g.guard for g in groups)


@pytest.mark.parametrize("engine", ["c", "numpy"])
def test_a_zeroed_softmax_over_empty_rows_fails_as_the_reference_max_does(has_c, engine):
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    a = core.Parameter(core.f32, (3, 0), name="a")
    function = core.Function([zeroed_softmax(a)], [a])
    empty = np.zeros((3, 0), np.float32)
    with pytest.raises(ExecutionError, match="Max .*empty dim"):
        core.compile(function, backend="interpreter")(empty)
    with pytest.raises(ExecutionError, match="Max .*empty dim"):
        core.compile(function, backend="cpu", fuse_min_elements=0, engine=engine)(empty)


def test_kernels_of_costly_math_and_row_kernels_split_over_threads_sooner(has_c):
    if not has_c:
        pytest.skip("no working C compiler here")
    n = 3 * kernel_c.HEAVY_PARALLEL_MIN + 5  # past the costly kernels' threshold only
    assert n < kernel_c.PARALLEL_MIN
    x, y = core.Parameter(core.f32, (n,), name="x"), core.Parameter(core.f32, (n,), name="y")
    half = core.Constant(core.f32, (n,), 0.5)
    rows = (n // 7, 7)
    r = core.Parameter(core.f32, rows, name="r")
    rng = np.random.default_rng(9)
    xv, yv = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    rv = rng.standard_normal(rows).astype(np.float32)
    x64, y64 = xv.astype(np.float64), yv.astype(np.float64)
    cases = [  # (output, its parameters and their values, float64 answer, whether costly)
        (core.Add(core.Multiply(x, y), half), {x: xv, y: yv}, x64 * y64 + 0.5, False),
        (core.Multiply(core.Abs(x), core.Sqrt(core.Abs(y))), {x: xv, y: yv},
         np.abs(x64) * np.sqrt(np.abs(y64)), False),
        (core.Multiply(core.Erf(x), y), {x: xv, y: yv},
         np.array([math.erf(v) for v in x64]) * y64, True),
        (core.Sum(core.Exp(core.Multiply(x, half)), (0,)), {x: xv},
         np.exp(x64 * 0.5).sum(), True),
        (core.Softmax(r, (1,)), {r: rv}, softmax64(rv.astype(np.float64))[0], True),
    ]
    for output, values, want, costly in cases:
        group = only_group(core.Function([output], list(values)))
        kernel, got = run(group, [values[p] for p in group.inputs])
        threshold = kernel_c.HEAVY_PARALLEL_MIN if costly else kernel_c.PARALLEL_MIN
        assert f">= {threshold})" in kernel.source, output.op
        np.testing.assert_allclose(got, want, rtol=3e-6, atol=3e-6 * n ** 0.5, err_msg=output.op)


def test_c_kernels_read_inputs_that_out_overlaps_as_they_were_before_the_call(has_c):
    if not has_c:
        pytest.skip("no working C compiler here")
    n = 1000
    x, y = core.Parameter(core.f32, (n,), name="x"), core.Parameter(core.f32, (n,), name="y")
    two = core.Constant(core.f32, (n,), 2.0)
    group = only_group(core.Function([core.Add(x, core.Multiply(y, two))], [x, y]))
    rows = core.Parameter(core.f32, (n // 10, 10), name="r")
    row_group = only_group(core.Function([core.Softmax(rows, (1,))], [rows]))
    rng = np.random.default_rng(12)
    memory = rng.standard_normal(n + 7).astype(np.float32)
    yv = rng.standard_normal(n).astype(np.float32)
    original = memory.astype(np.float64)

    def elementwise(xv, yv):
        return xv.astype(np.float64) + 2.0 * yv.astype(np.float64)

    kernel, _ = run(group, [memory[:n].copy(), yv])
    cases = [  # (x's view, y's view, out's view, the answer from the values before the call)
        (memory[:n], yv, memory[3:n + 3], elementwise(original[:n], yv)),     # shifted
        (memory[:n], yv, memory[:n], elementwise(original[:n], yv)),          # out is x
        (yv, np.broadcast_to(memory[5:6], (n,)), memory[:n],                  # y, one element
         elementwise(yv, np.full(n, original[5]))),                           # inside out
    ]
    for xv, y_view, out, want in cases:
        memory[:] = original
        arrays = {"x": xv, "y": y_view}
        kernel(*[arrays[p.name] for p in group.inputs], out=out)
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    row_kernel, _ = run(row_group, [memory[:n].reshape(n // 10, 10).copy()])
    memory[:] = original
    scores = memory[:n].reshape(n // 10, 10)
    row_kernel(scores, out=scores)  # a row op's out is its input: read from a copy
    np.testing.assert_allclose(scores, softmax64(original[:n].reshape(n // 10, 10))[0],
                               rtol=2e-6, atol=2e-6)
