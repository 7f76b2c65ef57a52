"""Adding an op without editing the library: softsign, x / (1 + |x|), defined here alone.

docs/architecture.md ("Adding an op") walks through this file. The core op states its
traits: its family by its base class, the float types it accepts, its NumPy function,
its C expression, and (`ng`) the function the axes graph offers with NumPy's typing of
it. Its axes op, lowering and documented function are made from that declaration. What
is left is registered through the public tables: the adjoint, and the reference
transformer's own NumPy expression (written apart from the core op's, so that the
reference checks it). Then it runs on every transformer: the NumPy reference, the
interpreter, the cpu backend's generated code, and inside fused kernels of both engines
(generated C and blocked NumPy), with deriv's gradient checked against finite differences.
"""
from __future__ import annotations

import numpy as np
import pytest

import axgraph as ng
from axgraph import autodiff, core
from axgraph.core import interpreter
from axgraph.lowering.rules import RULES
from axgraph.op_graph import elementwise as ew
from axgraph.testing import ExecutorFactory, check_derivative
from axgraph.transformers import reference_kernels
from axgraph.transformers.cpu import codegen, fusion, kernel_c, kernel_blocked_numpy
from conftest import ENGINES


# -- the op: what a new elementwise op declares ---------------------------------------------------

def softsign_reference(x: np.ndarray, out=None) -> np.ndarray:
    """x / (1 + |x|); the denominator is made first, so `out` may be x itself."""
    return np.divide(x, 1 + np.abs(x), out=out)


class Softsign(core.UnaryElementwise):
    """x / (1 + |x|) on floats: a core op declared by its traits alone."""

    accepts = "float"
    numpy = softsign_reference                  # interpreter, generated code, folding
    c = "({0} / ({one} + {fabs}({0})))"         # fused C kernels (fabsf for f32)
    ng = core.NgFunction("softsign", ew.FLOAT, """x / (1 + |x|) at every element of x.

        A sign that is smooth: values lie in (-1, 1); bools and integers give float32.""")


SoftsignOp = ew.axes_op(Softsign)               # the axes op, lowered to Softsign
softsign = ew.function_of(Softsign)             # softsign(x, name=None, dtype=None)


def _softsign_adjoint(op, delta):
    return [delta / ng.square(1.0 + ng.absolute(op.args[0]))]


@pytest.fixture(scope="module", autouse=True)
def registered():
    """The adjoint and the reference transformer's own expression (not the core op's
    `numpy`: the reference is what the other transformers are checked against); both
    are taken out again afterwards, so the tables stay as the library made them."""
    autodiff.ADJOINTS.register(SoftsignOp)(_softsign_adjoint)
    reference_kernels.ELEMENTWISE[SoftsignOp] = lambda x: x / (1 + np.abs(x))
    yield
    for table in (autodiff.ADJOINTS, reference_kernels.ELEMENTWISE):
        del table[SoftsignOp]


@pytest.fixture(autouse=True)
def private_kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(tmp_path))


# -- every backend has it, with nothing added to any backend ---------------------------------------

def test_every_table_covers_the_new_op():
    assert interpreter.KERNELS.missing([Softsign]) == []
    assert codegen.CODE.missing([Softsign]) == []
    assert kernel_c.EXPRESSIONS.missing([Softsign]) == []
    assert kernel_blocked_numpy.COMPOSITES.missing([Softsign]) == []
    for table in (reference_kernels.KERNELS, RULES, autodiff.ADJOINTS):
        assert table.missing([SoftsignOp]) == []


TRANSFORMERS = ENGINES


@pytest.mark.parametrize("name", list(TRANSFORMERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_values_on_every_transformer(name, dtype):
    A, B = ng.make_axis(50, name="A"), ng.make_axis(40, name="B")
    x, y = ng.placeholder([A, B], dtype=dtype), ng.placeholder([B], dtype=dtype)
    rng = np.random.default_rng(8)
    xv = (rng.standard_normal((50, 40)) * 4).astype(dtype)
    yv = (rng.standard_normal(40) * 2).astype(dtype)
    xv[0, :5] = [0, 1, -1, 1000, -1000]
    result = softsign(x + y) * 2.0  # between two other ops: fused transformers fuse it
    kind, options = TRANSFORMERS[name]
    with ng.make_transformer(kind, **options) as transformer:
        computation = transformer.computation(result, x, y)
        value = computation(xv, yv)
        source = computation.source if kind == "cpu" else ""
    if name.startswith("cpu-fused"):
        assert "# Softsign " not in source and "F" in source, source
    elif name == "cpu":
        assert "softsign_reference(" in source, source
    summed = (xv + yv).astype(np.float64)  # the sum as the graph rounds it, made exact
    out_dtype = np.float32 if dtype == np.int32 else dtype
    assert value.dtype == out_dtype
    np.testing.assert_allclose(value, summed / (1 + np.abs(summed)) * 2,
                               rtol=1e-6 if out_dtype == np.float32 else 1e-15, atol=0)


def test_the_c_kernel_computes_the_declared_expression():
    if "c" not in fusion.available_engines():
        pytest.skip("no working C compiler")
    x = core.Parameter(core.f32, core.Shape(1000))
    node = Softsign(x)
    kernel = fusion.compile_group(fusion.FusedGroup((node,), (x,), node),
                                  {node: (1000,), x: (1000,)}, "c")
    assert "(x0 / (((float)1) + fabsf(x0)))" in kernel.source
    xv = np.linspace(-50, 50, 1000, dtype=np.float32)
    got = kernel(xv, out=np.empty(1000, np.float32))
    np.testing.assert_array_equal(got, softsign_reference(xv))  # the same two roundings


@pytest.mark.parametrize("backend", ["numpy", "interpreter", "cpu"])
def test_gradient_matches_finite_differences(backend):
    A = ng.make_axis(6, name="A")
    x = ng.placeholder([A], dtype=np.float64)
    xv = np.array([-3.0, -0.7, -0.1, 0.2, 1.5, 4.0])
    with ExecutorFactory(backend):
        check_derivative(softsign(x), x, 1e-6, xv, rtol=1e-7, atol=1e-10)
    with ExecutorFactory(backend) as factory:
        gradient = factory.executor(ng.deriv(ng.sum(softsign(x), out_axes=()), x), x)(xv)
    np.testing.assert_allclose(gradient, 1 / (1 + np.abs(xv)) ** 2, rtol=1e-14)


def test_the_axes_op_and_its_function_come_from_the_declaration():
    A = ng.make_axis(3, name="A")
    op = softsign(ng.placeholder([A], dtype=np.int32), name="s")
    assert type(op) is SoftsignOp and SoftsignOp.__name__ == "Softsign"
    assert op.dtype == np.float32 and op.name == "s"  # FLOAT: integers give float32
    assert softsign.__name__ == "softsign" and softsign.__module__ == __name__
    doc = softsign.__doc__
    assert doc.startswith("x / (1 + |x|) at every element of x.")
    for section in ("Parameters", "Returns", "Raises"):
        assert f"\n{section}\n" in doc
    assert "If `dtype` is not a float type." in doc  # the FLOAT rule's refusal
    with pytest.raises(ng.DTypeError, match="Softsign of int32: the result is a float"):
        softsign(ng.placeholder([A], dtype=np.int32), dtype=np.int32)


def test_the_core_op_checks_its_element_type():
    with pytest.raises(ng.DTypeError, match="Softsign: input .* i32; a floating-point"):
        Softsign(core.Parameter(core.i32, core.Shape(2)))
