"""ThresholdFromClamp: `x > c` reads `max(x, c)` where that max runs earlier; same values."""
import numpy as np
import pytest

from axgraph import core, passes

SPECIAL = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -1e-30, 1e-30, -2.5, 3.0, 0.0, 1.0, -1.0])


def _relu_and_mask(bound=0.0, threshold=0.0, mask_first=False, dtype=core.f32):
    z = core.Parameter(dtype, (3, 4), name="z")
    clamp = core.Maximum(z, core.Constant(dtype, (3, 4), bound))
    mask = core.Greater(z, core.Constant(dtype, (3, 4), threshold))
    results = [mask, clamp] if mask_first else [clamp, mask]
    return core.Function(results, [z])


def _run(function, values):
    return core.compile(function)(values)


@pytest.mark.parametrize("dtype", [core.f32, core.f64])
def test_the_mask_reads_the_clamp_and_means_the_same(dtype):
    function = _relu_and_mask(dtype=dtype)
    rewritten = passes.ThresholdFromClamp().run(function)
    assert rewritten is not function
    clamp, mask = rewritten.results
    assert mask.inputs[0] is clamp
    values = SPECIAL.reshape(3, 4).astype(dtype.dtype)
    for got, want in zip(_run(rewritten, values), _run(function, values)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(_run(rewritten, values)[1], values > 0)  # NaN: False


def test_equal_bounds_of_either_sign_of_zero_match():
    rewritten = passes.ThresholdFromClamp().run(_relu_and_mask(bound=-0.0, threshold=0.0))
    assert rewritten.results[1].inputs[0] is rewritten.results[0]


@pytest.mark.parametrize("case", ["other bound", "nan bound", "mask first"])
def test_nothing_changes_where_the_identity_or_the_order_does_not_hold(case):
    if case == "other bound":  # max(x, 1) > 0 is always true: not x > 0
        function = _relu_and_mask(bound=1.0)
    elif case == "nan bound":
        function = _relu_and_mask(bound=np.nan, threshold=np.nan)
    else:  # the max runs after the comparison: reading it would reorder the program
        function = _relu_and_mask(mask_first=True)
    assert passes.ThresholdFromClamp().run(function) is function


def test_the_cpu_backend_runs_the_relu_gradient_from_the_activation():
    """A ReLU and its gradient mask: the cpu program's mask reads the activation, and
    the values match the interpreter's."""
    from axgraph.transformers.cpu.backend import CpuFunction

    z = core.Parameter(core.f32, (64, 600), name="z")
    delta = core.Parameter(core.f32, (64, 600), name="delta")
    zero = core.Constant(core.f32, (64, 600), 0.0)
    activation = core.Maximum(z, zero)
    gradient = core.Multiply(delta, core.Convert(core.Greater(z, zero), core.f32))
    function = core.Function([core.Exp(activation), gradient], [z, delta])
    rng = np.random.default_rng(0)
    zv = rng.normal(size=(64, 600)).astype(np.float32)
    zv[0, :12] = SPECIAL
    dv = rng.normal(size=(64, 600)).astype(np.float32)
    compiled = CpuFunction(function)
    got = compiled(zv, dv)
    for g, w in zip(got, core.compile(function)(zv, dv)):
        np.testing.assert_array_equal(g, w)
    program = compiled.last_program
    greater = [n for n in program.function.nodes
               if isinstance(n, core.Greater)
               or (isinstance(n, core.Fused)
                   and any(isinstance(m, core.Greater) for m in n.function.nodes))]
    assert greater and all(any(isinstance(x, core.Maximum) for x in node.inputs)
                           for node in greater)
