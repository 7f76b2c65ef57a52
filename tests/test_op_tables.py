"""Every core op on every backend: the tables derived from the ops' traits leave no gap.

Each backend keeps its kernels in an OpTable whose elementwise entries are derived from
the traits the core ops declare (axgraph/core/traits.py); `OpTable.missing` names the
ops a backend has nothing for, so an op added without what a backend needs fails here,
by name. Then every elementwise op runs on every backend (the interpreter, the cpu
backend's generated code, its fused C and fused NumPy kernels) and is compared with its
declared NumPy reference; the axes-level elementwise ops each have a reference kernel, a
lowering and an adjoint.
"""
from __future__ import annotations

import inspect
import os
from typing import List, Tuple

import numpy as np
import pytest

import axgraph as ng
from axgraph import autodiff, core, passes
from axgraph.core import interpreter
from axgraph.core.traits import ELEMENTWISE_FAMILIES, is_elementwise, numpy_function
from axgraph.core.traits import ops_with, reduction_identity
from axgraph.errors import AxgraphError, GraphError
from axgraph.lowering.rules import RULES, register_elementwise
from axgraph.op_graph import elementwise as ew
from axgraph.op_graph import reductions as red
from axgraph.op_table import OpTable
from axgraph.transformers import reference_kernels
from axgraph.transformers.cpu import codegen, fusion, kernel_c, kernel_blocked_numpy
from axgraph.transformers.jax.kernels import KERNELS as jax_kernels
from axgraph.transformers.cpu.backend import CpuFunction
from axgraph.passes import algebraic, sinking
from axgraph.transformers.cpu import schedule
from axgraph.transformers.cpu.fusion import FusedGroup, compile_group, find_fusion_groups

ELEMENTWISE = [op for op in core.CORE_OPS if is_elementwise(op)]


# -- OpTable ------------------------------------------------------------------------------------

class Base:
    pass


class Child(Base):
    pass


class GrandChild(Child):
    pass


def test_lookup_finds_the_nearest_registered_base():
    table: OpTable[str] = OpTable("test entry")
    table.register(Base)("base")
    assert table.lookup(GrandChild) == "base"
    table.register(Child)("child")  # registering forgets what was found before
    assert table.lookup(GrandChild) == "child" and table.lookup(Base) == "base"
    assert table.missing([object, Child, int]) == [object, int]


def test_a_conditional_entry_covers_only_the_classes_it_accepts():
    table: OpTable[str] = OpTable("test entry")
    table.register(Base)("plain")
    table.register(Base, when=lambda cls: cls.__name__.startswith("Grand"))("grand")
    assert table.lookup(GrandChild) == "grand"
    assert table.missing([Child]) == [Child]  # the conditional entry replaced the plain one
    table.register(object)("fallback")
    assert table.lookup(Child) == "fallback"  # the search goes on to further bases


def test_a_class_without_an_entry_is_searched_again_later():
    table: OpTable[str] = OpTable("test entry")
    allowed = set()
    table.register(Base, when=lambda cls: cls in allowed)("entry")
    assert table.lookup(Child) is None
    allowed.add(Child)  # the condition reads something filled later
    assert table.lookup(Child) == "entry"


def test_as_a_mapping_it_holds_exact_registrations(monkeypatch):
    table: OpTable[str] = OpTable("test entry", {Base: "base"})
    assert Base in table and Child not in table and len(table) == 1
    assert table[Base] == "base" and list(table) == [Base]
    monkeypatch.setitem(table, Child, "patched")
    assert table.lookup(GrandChild) == "patched"
    monkeypatch.undo()
    assert Child not in table and table.lookup(GrandChild) == "base"
    del table[Base]
    assert table.lookup(GrandChild) is None and "0 entries" in repr(table)


# -- every op has an entry in every backend ---------------------------------------------------

def fused_c_missing(ops) -> List[type]:
    return kernel_c.EXPRESSIONS.missing(ops)


def fused_numpy_missing(ops) -> List[type]:
    return kernel_blocked_numpy.COMPOSITES.missing(ops)


#: backend -> (which core ops it must run, what it lacks of them). The interpreter binds
#: a Parameter to its argument instead of running a kernel.
BACKENDS = {
    "interpreter": (tuple(op for op in core.CORE_OPS if op is not core.Parameter),
                    interpreter.KERNELS.missing),
    "cpu": (core.CORE_OPS, codegen.CODE.missing),
    "cpu-fused-c": (ELEMENTWISE, fused_c_missing),
    "cpu-fused-numpy": (ELEMENTWISE, fused_numpy_missing),
    "jax": (tuple(op for op in core.CORE_OPS if op is not core.Parameter), jax_kernels.missing),
}
PAIRS = [(backend, op) for backend, (ops, _) in BACKENDS.items() for op in ops]


@pytest.mark.parametrize("backend,op", PAIRS, ids=[f"{b}-{op.__name__}" for b, op in PAIRS])
def test_every_core_op_runs_on_every_backend(backend, op):
    _, missing = BACKENDS[backend]
    assert missing([op]) == [], f"the {backend} backend has no entry for {op.__name__}"


def test_every_elementwise_op_declares_its_traits():
    for op in ELEMENTWISE:
        assert op.family in ELEMENTWISE_FAMILIES
        assert op.c is not None, op.__name__
        if op is not core.Convert:  # its kernels need the node's target type
            assert numpy_function(op) is not None, op.__name__


class Traitless(core.UnaryElementwise):
    """A made-up elementwise op that declares no reference and no C expression."""
    numpy = None
    c = None


def test_an_op_without_traits_is_reported_missing_by_every_backend():
    for backend, (_, missing) in BACKENDS.items():
        assert missing([Traitless]) == [Traitless], backend
    x = core.Parameter(core.f32, core.Shape(3))
    function = core.Function([Traitless(x)], [x])
    for backend in ("interpreter", "cpu"):  # refused when compiled, naming the op
        with pytest.raises(AxgraphError, match="cannot run the core op Traitless"):
            core.compile(function, backend=backend)


#: The elementwise ops of the axes graph (each ng.* elementwise function makes one).
AXES_ELEMENTWISE = sorted(
    (cls for _, cls in inspect.getmembers(ew, inspect.isclass)
     if issubclass(cls, ew.ElementWiseOp) and cls.__module__ == ew.__name__
     and cls not in (ew.ElementWiseOp, ew.UnaryElementWiseOp, ew.BinaryElementWiseOp)),
    key=lambda cls: cls.__name__)


@pytest.mark.parametrize("op", AXES_ELEMENTWISE, ids=lambda op: op.__name__)
def test_every_axes_elementwise_op_has_a_reference_kernel_a_lowering_and_an_adjoint(op):
    assert reference_kernels.KERNELS.missing([op]) == []
    assert RULES.missing([op]) == []
    assert autodiff.ADJOINTS.missing([op]) == []


# -- every elementwise op computes its reference's values on every backend ----------------------

SHAPE = (4000,)
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0]


def element_types(op: type) -> List[core.ElementType]:
    accepts = getattr(op, "accepts", "numeric")
    if accepts == "bool":
        return [core.boolean]
    return [core.f32, core.f64]


def values(rng: np.random.Generator, et: core.ElementType) -> np.ndarray:
    if et.is_boolean:
        return rng.random(SHAPE) < 0.5
    array = (rng.standard_normal(SHAPE) * 3).astype(et.dtype)
    pick = rng.random(SHAPE) < 0.05
    array[pick] = rng.choice(np.array(SPECIALS, et.dtype), int(pick.sum()))
    return array


def one_op(op: type, et: core.ElementType) -> Tuple[core.Function, core.Node]:
    """A Function of one node of `op` over parameters of type `et`."""
    shape = core.Shape(*SHAPE)
    if op is core.Select:
        condition = core.Parameter(core.boolean, shape)
        a, b = core.Parameter(et, shape), core.Parameter(et, shape)
        node: core.Node = core.Select(condition, a, b)
        return core.Function([node], [condition, a, b]), node
    if op is core.Convert:
        a = core.Parameter(et, shape)
        node = core.Convert(a, core.f64 if et == core.f32 else core.f32)
        return core.Function([node], [a]), node
    arity = len(inspect.signature(op.__init__).parameters) - 2  # self, name
    parameters = [core.Parameter(et, shape) for _ in range(arity)]
    node = op(*parameters)
    return core.Function([node], parameters), node


CASES = [(op, et) for op in ELEMENTWISE for et in element_types(op)]
IDS = [f"{op.__name__}-{et}" for op, et in CASES]


@pytest.fixture(scope="module", autouse=True)
def private_kernel_cache(tmp_path_factory):
    saved = os.environ.get("AXGRAPH_CACHE_DIR")
    os.environ["AXGRAPH_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernels"))
    yield
    if saved is None:
        os.environ.pop("AXGRAPH_CACHE_DIR", None)
    else:
        os.environ["AXGRAPH_CACHE_DIR"] = saved


def engines() -> List[str]:
    return ["interpreter", "cpu"] + [f"fused-{e}" for e in fusion.available_engines()]


def run(engine: str, function: core.Function, node: core.Node, arrays) -> np.ndarray:
    if engine == "interpreter":
        return core.compile(function, backend="interpreter")(*arrays)[0]
    if engine == "cpu":
        return CpuFunction(function, fuse=False)(*arrays)[0]
    group = FusedGroup((node,), tuple(function.parameters), node)
    kernel = compile_group(group, {n: tuple(n.shape) for n in (node,) + node.inputs},
                           engine=engine[len("fused-"):])
    out = np.empty(SHAPE, node.element_type.dtype)
    return kernel(*arrays, out=out)


def expected(op: type, node: core.Node, arrays) -> np.ndarray:
    """The op's declared reference, or NumPy's own cast for Convert."""
    if op is core.Convert:
        return arrays[0].astype(node.element_type.dtype)
    with np.errstate(all="ignore"):
        return np.asarray(op.numpy(*arrays))


@pytest.mark.parametrize("op,et", CASES, ids=IDS)
def test_every_elementwise_op_computes_its_reference_on_every_engine(op, et):
    rng = np.random.default_rng(11)
    function, node = one_op(op, et)
    arrays = [values(rng, p.element_type) for p in function.parameters]
    want = expected(op, node, arrays)
    for engine in engines():
        got = run(engine, function, node, arrays)
        assert got.dtype == node.element_type.dtype, engine
        if got.dtype == np.float32:  # libm (C) and NumPy may differ by a few ulp
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-37, equal_nan=True,
                                       err_msg=engine)
        elif got.dtype == np.float64:
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300, equal_nan=True,
                                       err_msg=engine)
        else:
            np.testing.assert_array_equal(got, want, err_msg=engine)


# -- reductions and movement ops: declared once, every table derived ---------------------------

CORE_REDUCTIONS = [op for op in core.CORE_OPS if issubclass(op, core.Reduction)]
MOVEMENT_OPS = ops_with("movement", core.CORE_OPS)
#: NumPy's own reduction for each core reduction, written here, not read from the traits.
NUMPY_REDUCTIONS = {core.Sum: np.sum, core.Prod: np.prod, core.Max: np.max, core.Min: np.min}
#: The reductions of the axes graph (each ng.sum, ng.argmax, ... makes one).
AXES_REDUCTIONS = sorted(
    (cls for _, cls in inspect.getmembers(red, inspect.isclass)
     if issubclass(cls, red.ReductionOp) and cls.__module__ == red.__name__
     and cls not in (red.ReductionOp, red.Accumulation, red.IndexReduction)),
    key=lambda cls: cls.__name__)


def test_every_core_reduction_declares_its_traits_and_they_agree_with_numpy():
    assert set(CORE_REDUCTIONS) == set(NUMPY_REDUCTIONS), "a new reduction: add NumPy's to the test"
    x = np.array([[3.0, -1.5, 2.0], [0.5, 4.0, -2.0]])
    for op in CORE_REDUCTIONS:
        ufunc, by_hand = op.reduce_ufunc, NUMPY_REDUCTIONS[op]
        assert isinstance(ufunc, np.ufunc) and ufunc.nin == 2, op.__name__
        assert op.c_accumulate is not None and op.c_start is not None, op.__name__
        assert op.order_free, op.__name__
        np.testing.assert_array_equal(ufunc.reduce(x, axis=1), by_hand(x, axis=1))
        empty = np.zeros((2, 0))
        if reduction_identity(op) is None:
            with pytest.raises(ValueError):
                by_hand(empty, axis=1)
        else:
            np.testing.assert_array_equal(by_hand(empty, axis=1), [reduction_identity(op)] * 2)
        assert (by_hand(np.full(5, 2.5)) == 2.5) == op.idempotent, op.__name__


def test_every_backend_and_pass_covers_every_core_reduction():
    x = core.Parameter(core.f32, core.Shape(4, 8))
    for op in CORE_REDUCTIONS:
        node = op(core.Exp(x), (1,))
        group = find_fusion_groups(core.Function([node], [x]))[0]
        assert interpreter.KERNELS.lookup(op) is not None, op.__name__
        assert codegen.CODE.lookup(op) is not None, op.__name__
        assert group.reduction is node and kernel_c.has_code(group), op.__name__
        moved = core.Function([op(core.Transpose(x, (1, 0)), (0,))], [x])
        assert passes.LayoutSinking().run(moved) is not moved, op.__name__  # absorbed
        nothing = core.Function([op(x, ())], [x])
        assert passes.AlgebraicSimplification().run(nothing).results == (x,), op.__name__


def test_every_axes_reduction_has_a_reference_kernel_a_lowering_and_an_adjoint():
    assert {op.__name__ for op in AXES_REDUCTIONS} >= {"Sum", "Prod", "Max", "Min", "ArgMax",
                                                         "ArgMin"}
    for op in AXES_REDUCTIONS:
        assert reference_kernels.KERNELS.missing([op]) == [], op.__name__
        assert RULES.missing([op]) == [], op.__name__
        if op.core_op is not None:
            assert op.core_op in core.CORE_OPS, op.__name__
        if op in (red.Sum, red.Prod, red.Max, red.Min):
            assert op.logical_core_op in CORE_REDUCTIONS, op.__name__
            assert autodiff.ADJOINTS.missing([op]) == [], op.__name__


REDUCTION_CASES = [(op, et) for op in CORE_REDUCTIONS for et in (core.f32, core.f64)]


@pytest.mark.parametrize("op,et", REDUCTION_CASES,
                         ids=[f"{op.__name__}-{et}" for op, et in REDUCTION_CASES])
def test_every_core_reduction_computes_numpys_values_on_every_engine(op, et):
    """Each reduction of a product, over the trailing dim, against NumPy's own reduction in
    float64: op by op, in the cpu program, and fused as a group on each engine (the C
    accumulation and the blocked-NumPy one derive from the traits); a NaN reaches its row."""
    rng = np.random.default_rng(5)
    shape = (6, 5000)
    a, b = (rng.uniform(0.9, 1.1, shape).astype(et.dtype) for _ in range(2))
    a[2, 1234] = np.nan
    pa, pb = core.Parameter(et, core.Shape(*shape)), core.Parameter(et, core.Shape(*shape))
    product = core.Multiply(pa, pb)
    node = op(product, (1,))
    function = core.Function([node], [pa, pb])
    want = NUMPY_REDUCTIONS[op](a.astype(np.float64) * b.astype(np.float64), axis=1)
    rtol = 1e-4 if et == core.f32 else 1e-11
    got = {"interpreter": core.compile(function, backend="interpreter")(a, b)[0],
           "cpu": CpuFunction(function, fuse=False)(a, b)[0]}
    group = FusedGroup((product, node), (pa, pb), node, node)
    shapes = {n: tuple(n.shape) for n in (pa, pb, product, node)}
    for engine in fusion.available_engines():
        kernel = compile_group(group, shapes, engine=engine)
        assert kernel.engine == engine
        got[f"fused-{engine}"] = kernel(a, b, out=np.empty(shape[:1], et.dtype))
    for engine, value in got.items():
        assert value.dtype == et.dtype, engine
        np.testing.assert_allclose(value, want, rtol=rtol, equal_nan=True, err_msg=engine)
        assert np.isnan(value[2]) and not np.isnan(np.delete(value, 2)).any(), engine


@pytest.mark.parametrize("op", CORE_REDUCTIONS, ids=lambda op: op.__name__)
def test_a_reduction_over_an_empty_dim_is_its_identity_or_an_error_on_every_engine(op):
    x = core.Parameter(core.f32, core.Shape(3, 0))
    exp = core.Exp(x)
    node = op(exp, (1,))
    function = core.Function([node], [x])
    empty = np.zeros((3, 0), np.float32)
    runs = {"interpreter": lambda: core.compile(function, backend="interpreter")(empty)[0],
            "cpu": lambda: CpuFunction(function, fuse=False)(empty)[0]}
    group = FusedGroup((exp, node), (x,), node, node)
    for engine in fusion.available_engines():
        kernel = compile_group(group, {n: tuple(n.shape) for n in (x, exp, node)},
                               engine=engine)
        runs[f"fused-{engine}"] = lambda k=kernel: k(empty, out=np.empty(3, np.float32))
    identity = {core.Sum: 0.0, core.Prod: 1.0}.get(op)  # NumPy's rule, written here
    for engine, compute in runs.items():
        if identity is None:
            with pytest.raises(AxgraphError, match="empty dim|zero-size array"):
                compute()  # (the cpu program's words are NumPy's)
        else:
            np.testing.assert_array_equal(compute(), [identity] * 3, err_msg=engine)


def test_every_movement_op_declares_its_traits_and_is_a_view_on_the_cpu_backend():
    assert set(MOVEMENT_OPS) == {core.Broadcast, core.Reshape, core.Transpose, core.Slice,
                             core.Reverse}
    assert set(ops_with("layout_change", core.CORE_OPS)) == {core.Reshape, core.Transpose}
    assert schedule.VIEW_LAYOUTS.missing(MOVEMENT_OPS) == []
    assert codegen.VIEW_CODE.missing(MOVEMENT_OPS) == []
    assert set(algebraic.MOVEMENT_OPS) == set(MOVEMENT_OPS)
    assert set(sinking.LAYOUT_OPS) == {core.Reshape, core.Transpose}
    x = core.Parameter(core.f64, core.Shape(3, 4))
    value = np.arange(12.0).reshape(3, 4)
    by_hand = {core.Broadcast: (lambda p: core.Broadcast(p, (2, 3, 4), (0,)),
                                np.broadcast_to(value, (2, 3, 4))),
               core.Reshape: (lambda p: core.Reshape(p, (2, 6)), value.reshape(2, 6)),
               core.Transpose: (lambda p: core.Transpose(p, (1, 0)), value.T),
               core.Slice: (lambda p: core.Slice(p, (1, 0), (3, 4), (1, 2)), value[1:3, ::2]),
               core.Reverse: (lambda p: core.Reverse(p, (1,)), value[:, ::-1])}
    for op in MOVEMENT_OPS:
        make, want = by_hand[op]
        node = make(x)
        compiled = CpuFunction(core.Function([core.Negative(node)], [x]), fuse=False)
        np.testing.assert_array_equal(compiled(value)[0], -want, err_msg=op.__name__)
        assert compiled.last_program.schedule.storage[node] == "view", op.__name__


def _inverse_square_denominator(x, out):
    np.square(x, out=out)
    return np.add(out, 1, out=out)


class InverseOnePlusSquare(core.UnaryElementwise):
    """1 / (1 + x**2): a made-up op declaring its value as 1 / a denominator."""
    accepts = "float"
    numpy = staticmethod(lambda x, out=None: np.divide(1, 1 + np.square(x), out=out))
    numpy_denominator = _inverse_square_denominator
    c = "({one} / ({one} + {0} * {0}))"


def test_a_declared_denominator_is_how_the_numpy_engines_compute_an_op():
    """Every op declaring `numpy_denominator` is 1 over it (checked against its reference);
    the cpu program and the blocked-NumPy kernels compute a made-up one from the
    declaration alone, a product by it as one division."""
    x = np.linspace(-30, 30, 1001)
    for op in [op for op in ELEMENTWISE if op.numpy_denominator is not None] + [
            InverseOnePlusSquare]:
        with np.errstate(over="ignore"):
            np.testing.assert_allclose(1 / op.numpy_denominator(x, out=np.empty_like(x)),
                                       op.numpy(x), rtol=1e-15, err_msg=op.__name__)
    assert core.Sigmoid.numpy_denominator is not None
    a, b = core.Parameter(core.f64, core.Shape(1001)), core.Parameter(core.f64, core.Shape(1001))
    function = core.Function([core.Multiply(a, InverseOnePlusSquare(b))], [a, b])
    av = np.cos(x)
    want = av / (1 + x * x)  # by hand
    program = CpuFunction(function, fuse=False)
    np.testing.assert_allclose(program(av, x)[0], want, rtol=1e-15)
    assert "reciprocal_of__inverse_square_denominator(" in program.source
    (group,) = find_fusion_groups(function)
    kernel = compile_group(group, {n: (1001,) for n in group.nodes + group.inputs},
                           engine="numpy")
    arrays = {a: av, b: x}
    np.testing.assert_allclose(kernel(*[arrays[i] for i in group.inputs], out=np.empty(1001)),
                               want, rtol=1e-15)
    assert kernel.source.count("np.divide(") == 1 and "np.multiply(" not in kernel.source


class Unlowered(ew.UnaryElementWiseOp):
    """An axes op nobody wrote a lowering for."""


def test_an_axes_op_without_a_lowering_is_an_error_at_its_line():
    A = ng.make_axis(2, name="A")
    x = ng.placeholder([A])
    op, line = Unlowered(x), inspect.currentframe().f_lineno
    with ng.make_transformer("interpreter") as transformer:
        with pytest.raises(GraphError,
                           match="cannot run Unlowered .*no lowering of it to core ops") as error:
            transformer.computation(op, x)(np.ones(2, np.float32))
    assert error.value.location == (__file__, line)


class Twice(ew.UnaryElementWiseOp):
    """An axes op written by hand that is one core op over its converted arg: x + x."""


class _Double(core.UnaryElementwise):
    numpy = staticmethod(lambda x, out=None: np.add(x, x, out=out))
    c = "({0} + {0})"


def test_a_hand_written_axes_op_lowers_to_the_core_op_it_registers(monkeypatch):
    monkeypatch.setattr(Twice, "core_op", None)  # taken out again afterwards
    register_elementwise(Twice, _Double)
    A = ng.make_axis(3, name="A")
    x = ng.placeholder([A], dtype=np.int32)
    with ng.make_transformer("interpreter") as transformer:
        got = transformer.computation(Twice(x), x)(np.array([1, -2, 30], np.int32))
    np.testing.assert_array_equal(got, [2, -4, 60])
    assert got.dtype == np.int32
