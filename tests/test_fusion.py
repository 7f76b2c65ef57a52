"""Fusion in the cpu backend: finding groups, and both kernel engines against the interpreter.

C compiles are the slow part (~0.1 s each), so every C kernel of the op-by-op
comparison is built once per session, concurrently, into a cache directory
under the session's tmp dir.
"""
from __future__ import annotations

import concurrent.futures
import os
import platform
import shutil
import subprocess
import sys
import tracemalloc
from typing import Dict, List, Sequence, Tuple

import numpy as np
import pytest

from axgraph import core
from axgraph.errors import ExecutionError
from axgraph.transformers.cpu import fusion, kernel_c, kernel_cache, kernel_blocked_numpy
from axgraph.transformers.cpu.fusion import FusedGroup, compile_group, find_fusion_groups

FLOATS = [core.f32, core.f64]
UNARY = [core.Negative, core.Abs, core.Sign, core.Sqrt, core.Exp, core.Log, core.Tanh,
         core.Sigmoid, core.Sin, core.Cos, core.Floor]
BINARY = [core.Add, core.Subtract, core.Multiply, core.Divide, core.Power, core.Maximum,
          core.Minimum, core.Equal, core.NotEqual, core.Less, core.LessEq, core.Greater,
          core.GreaterEq]
# ops whose results are correctly rounded in both NumPy and C: compared exactly
EXACT = {core.Negative, core.Abs, core.Sign, core.Sqrt, core.Floor, core.Add, core.Subtract,
         core.Multiply, core.Divide, core.Maximum, core.Minimum, core.Equal, core.NotEqual,
         core.Less, core.LessEq, core.Greater, core.GreaterEq}
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, 3.0, 0.5]
SIZE = 5000


# -- helpers ------------------------------------------------------------------------------------

def group_of(function: core.Function) -> FusedGroup:
    """Every non-parameter node of `function` as one group (to test engines op by op)."""
    members = tuple(n for n in function.nodes if not isinstance(n, core.Parameter))
    inputs: List[core.Node] = []
    for member in members:
        for x in member.inputs:
            if x not in members and x not in inputs:
                inputs.append(x)
    output = function.results[0]
    reduction = output if isinstance(output, (core.Sum, core.Max, core.Min)) else None
    return FusedGroup(members, tuple(inputs), output, reduction)


def data(rng: np.random.Generator, shape: Tuple[int, ...], et: core.ElementType) -> np.ndarray:
    """Random values with NaN, infinities, signed zeros and small integers sprinkled in."""
    if et.is_boolean:
        return rng.random(shape) < 0.5
    if et.is_integral:
        return rng.integers(-50, 50, shape).astype(et.dtype)
    values = (rng.standard_normal(shape) * 3).astype(et.dtype)
    flat = values.reshape(-1)
    where = rng.random(flat.size) < 0.08
    flat[where] = rng.choice(np.array(SPECIALS, dtype=et.dtype), where.sum())
    return values


def reference(function: core.Function, arrays: Sequence[np.ndarray]) -> np.ndarray:
    (result,) = core.compile(function, backend="interpreter")(*arrays)
    return result


def run_kernel(kernel, group: FusedGroup, function: core.Function,
               arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Run `kernel` given the arrays of `function`'s parameters (mapped onto group.inputs)."""
    by_node = dict(zip(function.parameters, arrays))
    out = np.empty(tuple(group.output.shape), group.output.element_type.dtype)
    kernel(*[by_node[x] for x in group.inputs], out=out)
    return out


def compare(op: type, actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if op is core.Sum:  # float64 accumulation vs the reference's own float32 rounding
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-3, equal_nan=True)
    elif op in EXACT or actual.dtype == np.bool_:
        np.testing.assert_array_equal(actual, expected)
    else:
        rtol = 2e-6 if actual.dtype == np.float32 else 1e-13
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=0, equal_nan=True)


def case(name: str, et: core.ElementType) -> core.Function:
    """A small Function exercising one op (or one fusible construct) on `et`."""
    shape = core.Shape(SIZE)
    a, b = core.Parameter(et, shape), core.Parameter(et, shape)
    ops = {op.__name__: op for op in UNARY + BINARY}
    if name in ops and ops[name] in UNARY:
        return core.Function([ops[name](a)], [a])
    if name in ops:
        return core.Function([ops[name](a, b)], [a, b])
    condition = core.Parameter(core.boolean, shape)
    other = core.f64 if et == core.f32 else core.f32
    if name == "Select":
        return core.Function([core.Select(condition, a, b)], [condition, a, b])
    if name == "ConvertFloat":
        return core.Function([core.Convert(a, other)], [a])
    if name == "ConvertToBool":
        return core.Function([core.Convert(a, core.boolean)], [a])
    if name == "ConvertFromBool":
        return core.Function([core.Convert(condition, et)], [condition])
    if name == "Logic":  # Not, And, Or feeding a Select
        c2 = core.Parameter(core.boolean, shape)
        mixed = core.Or(core.And(condition, core.Not(c2)), core.Less(a, b))
        return core.Function([core.Select(mixed, a, b)], [condition, c2, a, b])
    if name == "BroadcastScalar":
        s = core.Parameter(et, core.Shape(()))
        wide = core.Broadcast(s, shape, (0,))
        return core.Function([core.Maximum(core.Multiply(a, wide), wide)], [a, s])
    if name == "ConstantFill":
        three = core.Constant(et, shape, 3.0)
        scalar_nan = core.Broadcast(core.Constant(et, (), np.nan), shape, (0,))
        return core.Function([core.Minimum(core.Add(a, three), core.Select(
            core.Greater(a, three), scalar_nan, a))], [a])
    if name == "Square":  # Power by a Constant 2 becomes x*x
        return core.Function([core.Power(a, core.Constant(et, shape, 2.0))], [a])
    if name in ("Sum", "Max", "Min"):
        reduce = getattr(core, name)
        return core.Function([reduce(core.Multiply(a, b), (0,))], [a, b])
    if name in ("SumRows", "MaxRows", "MinRows"):
        grid = core.Shape(100, 50)
        x, y = core.Parameter(et, grid), core.Parameter(et, grid)
        return core.Function([getattr(core, name[:-4])(core.Subtract(x, y), (1,))], [x, y])
    if name in ("SumLongRows", "MaxLongRows"):
        grid = core.Shape(3, 70000)  # rows longer than both engines' blocks
        x, y = core.Parameter(et, grid), core.Parameter(et, grid)
        return core.Function([getattr(core, name[:-8])(core.Subtract(x, y), (1,))], [x, y])
    raise KeyError(name)


CASES = ([op.__name__ for op in UNARY + BINARY]
         + ["Select", "ConvertFloat", "ConvertToBool", "ConvertFromBool", "Logic",
            "BroadcastScalar", "ConstantFill", "Square", "Sum", "Max", "Min", "SumRows",
            "MaxRows", "MinRows", "SumLongRows", "MaxLongRows"])


def case_arrays(function: core.Function, rng: np.random.Generator) -> List[np.ndarray]:
    return [data(rng, tuple(p.shape), p.element_type) for p in function.parameters]


def kernel_shapes(group: FusedGroup) -> Dict[core.Node, Tuple[int, ...]]:
    return {n: tuple(n.shape) for n in group.nodes + group.inputs}


# -- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> str:
    """A kernel cache for this session only (so the tests never touch ~/.cache)."""
    path = str(tmp_path_factory.mktemp("kernels"))
    saved = os.environ.get("AXGRAPH_CACHE_DIR")
    os.environ["AXGRAPH_CACHE_DIR"] = path
    yield path
    if saved is None:
        os.environ.pop("AXGRAPH_CACHE_DIR", None)
    else:
        os.environ["AXGRAPH_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def has_c(cache_dir) -> bool:
    return "c" in fusion.available_engines()


@pytest.fixture(scope="session")
def c_cases(cache_dir, has_c) -> Dict[Tuple[str, str], Tuple[core.Function, FusedGroup, object]]:
    """Every (case, dtype) compiled with the C engine, concurrently (compiles release the GIL)."""
    if not has_c:
        return {}
    jobs = {}
    for et in FLOATS:
        for name in CASES:
            function = case(name, et)
            jobs[(name, et.name)] = (function, group_of(function))
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(compile_group, group, kernel_shapes(group), "c")
                   for key, (function, group) in jobs.items()}
        return {key: jobs[key] + (future.result(),) for key, future in futures.items()}


@pytest.fixture
def rng():
    return np.random.default_rng(7)


# -- finding groups ---------------------------------------------------------------------------

def chain_function(n=64):
    shape = core.Shape(*n) if isinstance(n, tuple) else core.Shape(n)
    a, b, c, d, e = (core.Parameter(core.f32, shape, name=x) for x in "abcde")
    result = core.Subtract(core.Multiply(core.Tanh(core.Add(core.Multiply(a, b), c)),
                                         core.Sigmoid(d)), e)
    return core.Function([result], [a, b, c, d, e])


def l2_function(n: int = 64, square_by_power: bool = False):
    shape = core.Shape(n)
    x, y = core.Parameter(core.f32, shape, name="x"), core.Parameter(core.f32, shape, name="y")
    difference = core.Subtract(x, y)
    squared = (core.Power(difference, core.Constant(core.f32, shape, 2.0)) if square_by_power
               else core.Multiply(difference, difference))
    return core.Function([core.Sum(squared, (0,))], [x, y])


def test_chain_becomes_one_group():
    function = chain_function()
    (group,) = find_fusion_groups(function)
    assert [n.op for n in group.nodes] == ["Multiply", "Add", "Tanh", "Sigmoid", "Multiply",
                                           "Subtract"]
    assert [n.name for n in group.inputs] == ["a", "b", "c", "d", "e"]
    assert group.output is function.results[0] and group.reduction is None


@pytest.mark.parametrize("square_by_power", [False, True])
def test_l2_pattern_is_a_group_with_its_reduction(square_by_power):
    function = l2_function(square_by_power=square_by_power)
    (group,) = find_fusion_groups(function)
    assert group.reduction is function.results[0] and group.output is group.reduction
    assert group.nodes[-1] is group.reduction
    assert [n.name for n in group.inputs] == ["x", "y"]
    assert {n.op for n in group.nodes} >= {"Subtract", "Sum"}


def test_a_node_used_outside_ends_the_group():
    shape = core.Shape(8)
    a, b, c, d = (core.Parameter(core.f32, shape) for _ in range(4))
    shared = core.Multiply(a, b)
    first = core.Add(core.Tanh(shared), c)
    second = core.Multiply(shared, d)
    function = core.Function([first, second], [a, b, c, d])
    groups = find_fusion_groups(function)
    assert len(groups) == 1
    (group,) = groups
    assert [n.op for n in group.nodes] == ["Tanh", "Add"]
    assert group.inputs == (shared, c)
    assert all(shared not in g.nodes and second not in g.nodes for g in groups)


def test_results_are_not_swallowed():
    shape = core.Shape(8)
    a, b, c = (core.Parameter(core.f32, shape) for _ in range(3))
    inner = core.Exp(core.Add(a, b))            # a result, and used by `outer`
    outer = core.Negative(core.Multiply(inner, c))
    function = core.Function([outer, inner], [a, b, c])
    groups = find_fusion_groups(function)
    assert len(groups) == 2
    results = set(function.results)
    for group in groups:
        assert all(n not in results for n in group.nodes if n is not group.output)
    assert {g.output for g in groups} == {outer, inner}
    users = function.users()
    for group in groups:  # only the output is seen outside the group
        for node in group.nodes:
            if node is not group.output:
                assert all(u in group.nodes for u in users[node])


def test_diamond_fuses_whole():
    shape = core.Shape(8)
    a, b = core.Parameter(core.f32, shape), core.Parameter(core.f32, shape)
    t = core.Add(a, b)
    result = core.Multiply(t, core.Exp(t))
    (group,) = find_fusion_groups(core.Function([result], [a, b]))
    assert len(group.nodes) == 3 and group.inputs == (a, b)


def test_scalar_broadcasts_and_constant_fills_join():
    shape = core.Shape(8)
    a, s = core.Parameter(core.f32, shape), core.Parameter(core.f32, ())
    wide = core.Broadcast(s, shape, (0,))
    zero = core.Constant(core.f32, shape, 0.0)
    result = core.Maximum(core.Add(a, wide), zero)
    (group,) = find_fusion_groups(core.Function([result], [a, s]))
    assert wide in group.nodes and zero in group.nodes and set(group.inputs) == {a, s}


def test_reading_a_bias_broadcast_keeps_a_node_out():
    x, bias = core.Parameter(core.f32, (6, 4)), core.Parameter(core.f32, (4,))
    spread = core.Transpose(core.Broadcast(bias, (4, 6), (1,)), (1, 0))  # a view of it, too
    shifted = core.Add(core.Exp(x), spread)
    result = core.Multiply(core.Tanh(shifted), core.Sigmoid(x))
    (group,) = find_fusion_groups(core.Function([result], [x, bias]))
    assert shifted not in group.nodes and shifted in group.inputs  # computed by one ufunc
    assert {node.op for node in group.nodes} == {"Tanh", "Sigmoid", "Multiply"}


@pytest.mark.parametrize("engine", ["numpy", "c"])
def test_a_select_reading_a_broadcast_mask_joins_a_group(engine, rng, has_c):
    """A boolean mask broadcast over leading dims (an attention mask over every batch
    and head) is taken in: copying it out costs a byte an element, less than the two
    passes a lone Select takes. Values are checked against NumPy, NaN included."""
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    shape = core.Shape(3, 5, 7)
    g, mask = core.Parameter(core.f32, shape), core.Parameter(core.boolean, (5, 7))
    spread = core.Broadcast(mask, shape, (0,))
    kept = core.Select(spread, g, core.Constant(core.f32, shape, 0.0))
    result = core.Multiply(kept, core.Constant(core.f32, shape, 0.25))
    (group,) = find_fusion_groups(core.Function([result], [g, mask]))
    assert kept in group.nodes and result in group.nodes and spread in group.inputs
    kernel = compile_group(group, kernel_shapes(group), engine=engine)
    gv = rng.standard_normal((3, 5, 7)).astype(np.float32)
    gv[0, 0, 0] = np.nan
    mv = rng.random((5, 7)) < 0.5
    mv[0, 0] = False  # a NaN where the mask drops it becomes 0
    given = {g: gv, spread: np.broadcast_to(mv, (3, 5, 7))}
    out = np.empty((3, 5, 7), np.float32)
    kernel(*[given[x] for x in group.inputs], out=out)
    want = np.where(mv, gv, np.float32(0)) * np.float32(0.25)
    np.testing.assert_array_equal(out, want)


def test_single_ops_are_not_groups_but_lone_reductions_are():
    shape = core.Shape(2, 8)
    a, b = core.Parameter(core.f32, shape), core.Parameter(core.f32, shape)
    assert find_fusion_groups(core.Function([core.Add(a, b)], [a, b])) == []
    (group,) = find_fusion_groups(core.Function([core.Max(a, (1,))], [a]))
    assert group.nodes == (group.reduction,) and group.inputs == (a,)


def test_reductions_over_leading_axes_stay_out():
    shape = core.Shape(4, 8)
    a, b = core.Parameter(core.f32, shape), core.Parameter(core.f32, shape)
    total = core.Sum(core.Exp(core.Add(a, b)), (0,))
    groups = find_fusion_groups(core.Function([total], [a, b]))
    assert len(groups) == 1 and groups[0].reduction is None
    assert total not in groups[0].nodes


def test_groups_are_disjoint_on_a_larger_graph():
    shape = core.Shape(16)
    ps = [core.Parameter(core.f32, shape) for _ in range(4)]
    x = core.Add(ps[0], ps[1])
    y = core.Tanh(x)
    z = core.Sum(core.Multiply(y, ps[2]), (0,))
    w = core.Subtract(core.Exp(x), ps[3])
    function = core.Function([z, w, y], ps)
    groups = find_fusion_groups(function)
    seen = set()
    for group in groups:
        assert not (seen & set(group.nodes))
        seen |= set(group.nodes)
        assert group.output in group.nodes
        position = {n: i for i, n in enumerate(function.nodes)}
        assert list(group.nodes) == sorted(group.nodes, key=position.__getitem__)


# -- both engines against the interpreter ---------------------------------------------------------

@pytest.mark.parametrize("et", FLOATS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", CASES)
def test_numpy_engine_matches_interpreter(name, et, rng):
    function = case(name, et)
    group = group_of(function)
    kernel = compile_group(group, kernel_shapes(group), engine="numpy")
    assert kernel.engine == "numpy"
    arrays = case_arrays(function, rng)
    op = type(function.results[0])
    compare(op, run_kernel(kernel, group, function, arrays), reference(function, arrays))


@pytest.mark.parametrize("et", FLOATS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", CASES)
def test_c_engine_matches_interpreter(name, et, rng, c_cases, has_c):
    if not has_c:
        pytest.skip("no working C compiler here")
    function, group, kernel = c_cases[(name, et.name)]
    assert kernel.engine == "c"
    arrays = case_arrays(function, rng)
    op = type(function.results[0])
    compare(op, run_kernel(kernel, group, function, arrays), reference(function, arrays))


def test_numpy_engine_integers_match_interpreter(rng):
    shape = core.Shape(3000)
    a, b = core.Parameter(core.i32, shape), core.Parameter(core.i32, shape)
    quotient = core.Divide(core.Multiply(a, a), b)
    function = core.Function([core.Sum(core.Add(quotient, a), (0,))], [a, b])
    group = group_of(function)
    kernel = compile_group(group, kernel_shapes(group))  # auto: integers go to NumPy
    assert kernel.engine == "numpy"
    x = rng.integers(-2 ** 15, 2 ** 15, 3000).astype(np.int32)  # squares wrap
    y = rng.integers(1, 9, 3000).astype(np.int32) * rng.choice([-1, 1], 3000).astype(np.int32)
    np.testing.assert_array_equal(run_kernel(kernel, group, function, [x, y]),
                                  reference(function, [x, y]))
    with pytest.raises(ExecutionError, match="division by zero"):
        run_kernel(kernel, group, function, [x, np.zeros(3000, np.int32)])


@pytest.mark.parametrize("engine", ["numpy", "c"])
def test_chain_and_l2_on_larger_arrays(engine, rng, has_c):
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    for function in (chain_function(100_000), l2_function(100_000, square_by_power=True)):
        (group,) = find_fusion_groups(function)
        kernel = compile_group(group, kernel_shapes(group), engine=engine)
        arrays = case_arrays(function, rng)
        actual = run_kernel(kernel, group, function, arrays)
        expected = reference(function, arrays)
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("engine", ["numpy", "c"])
def test_layouts_broadcast_inputs_and_aliasing(engine, rng, has_c):
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    function = chain_function(4096)
    (group,) = find_fusion_groups(function)
    kernel = compile_group(group, kernel_shapes(group), engine=engine)
    arrays = case_arrays(function, rng)
    expected = reference(function, arrays)
    strided = np.repeat(arrays[0], 2)[::2]                    # not contiguous
    constant = np.broadcast_to(np.float32(0.25), (4096,))     # zero strides
    mixed = [strided, arrays[1], constant, arrays[3], arrays[4]]
    np.testing.assert_allclose(run_kernel(kernel, group, function, mixed),
                               reference(function, [np.ascontiguousarray(m) for m in mixed]),
                               rtol=1e-5, atol=1e-6)
    size_one = [arrays[0], arrays[1], np.full(1, 0.25, np.float32), arrays[3], arrays[4]]
    np.testing.assert_allclose(run_kernel(kernel, group, function, size_one),  # broadcasts
                               reference(function, [np.broadcast_to(m, (4096,))
                                                    for m in size_one]), rtol=1e-5, atol=1e-6)
    in_place = [a.copy() for a in arrays]
    kernel(*in_place, out=in_place[4])                         # out is the input `e`
    np.testing.assert_allclose(in_place[4], expected, rtol=1e-5, atol=1e-6)


def test_streamed_outputs_equal_cached_ones(rng, has_c, monkeypatch):
    """A call whose traffic exceeds the last-level cache computes tiles and streams them past
    the caches (x86): the values of the plain loop, whatever the output's alignment, with a
    short first and last tile, and with out one of the inputs. The cache is made to look tiny
    so that a small call streams. Bit for bit but at the few elements a vector loop leaves to
    its scalar remainder (the misaligned first tile, the end), where scalar libm's exp may be
    an ulp from libmvec's."""
    if not has_c:
        pytest.skip("no working C compiler here")
    n = 2 * kernel_c.PARALLEL_MIN + 37
    x, y = (core.Parameter(core.f64, core.Shape(n)) for _ in range(2))
    functions = [chain_function(n),
                 core.Function([core.Subtract(core.Exp(x), core.Multiply(x, y))], [x, y]),
                 core.Function([core.Less(core.Exp(x), y)], [x, y])]  # a boolean output
    for function in functions:
        (group,) = find_fusion_groups(function)
        plain = compile_group(group, kernel_shapes(group), engine="c")
        with monkeypatch.context() as patch:
            patch.setattr(kernel_c, "last_level_cache_bytes", lambda: 1)
            streaming = compile_group(group, kernel_shapes(group), engine="c")
        assert f"stream = n >= {kernel_c.PARALLEL_MIN} && " in streaming.source
        assert f"stream = n >= {kernel_c.PARALLEL_MIN} && " not in plain.source
        arrays = case_arrays(function, rng)
        by_node = dict(zip(function.parameters, arrays))
        inputs = [by_node[p] for p in group.inputs]
        expected = np.empty(n, arrays[0].dtype if group.output.element_type != core.boolean
                            else bool)
        plain(*inputs, out=expected)
        np.testing.assert_allclose(expected, reference(function, arrays), rtol=1e-5, atol=1e-6)
        results = []
        for shift in (0, 1):  # out aligned to 64 bytes, and one element past that
            out = np.empty(n + shift, expected.dtype)[shift:]
            streaming(*inputs, out=out)
            results.append(out)
        if expected.dtype == inputs[-1].dtype:
            in_place = [a.copy() for a in inputs]
            streaming(*in_place, out=in_place[-1])
            results.append(in_place[-1])
        for out in results:
            differ = (out != expected) & ~(np.isnan(out) & np.isnan(expected))
            assert np.count_nonzero(differ) <= 16
            if expected.dtype != np.bool_:
                np.testing.assert_allclose(out, expected, rtol=4 * np.finfo(out.dtype).eps)
    objdump = shutil.which("objdump")
    if objdump and platform.machine().lower() in ("x86_64", "amd64"):
        listing = subprocess.run([objdump, "-d", str(streaming.path)], capture_output=True,
                                 text=True).stdout
        assert "movntdq" in listing  # the stores do skip the caches


THREADS_SCRIPT = """
import sys
import numpy as np
from axgraph import core
from axgraph.transformers.cpu import kernel_c
from axgraph.transformers.cpu.fusion import compile_group, find_fusion_groups
n = 2 * kernel_c.PARALLEL_MIN + 37
if sys.argv[2] == "stream":
    kernel_c.last_level_cache_bytes = lambda: 1
x, y = core.Parameter(core.f32, core.Shape(n)), core.Parameter(core.f32, core.Shape(n))
(group,) = find_fusion_groups(core.Function([core.Add(core.Sigmoid(x), core.Tanh(y))], [x, y]))
kernel = compile_group(group, {node: (n,) for node in group.nodes + group.inputs}, engine="c")
rng = np.random.default_rng(3)
arrays = [rng.standard_normal(n).astype(np.float32) for _ in group.inputs]
buffer = np.empty(n + 32, np.float32)
first = (-buffer.ctypes.data % 64) // 4 + 1  # one element past a 64-byte boundary
out = buffer[first:first + n]
kernel(*arrays, out=out)
np.save(sys.argv[1], out)
"""


@pytest.mark.parametrize("mode", ["plain", "stream"])
def test_c_results_do_not_depend_on_the_thread_count(has_c, mode, tmp_path, cache_dir):
    """Each thread's run starts on a whole cache line (a whole tile when streaming), so the
    elements a vector loop leaves to its scalar remainder are the same for any count."""
    if not has_c:
        pytest.skip("no working C compiler here")
    results = []
    for threads in ("1", "3"):
        path = tmp_path / f"{threads}.npy"
        run = subprocess.run([sys.executable, "-c", THREADS_SCRIPT, str(path), mode],
                             env=dict(os.environ, OMP_NUM_THREADS=threads,
                                      AXGRAPH_CACHE_DIR=cache_dir),
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        results.append(np.load(path))
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("engine", ["numpy", "c"])
def test_elementwise_out_may_be_a_transposed_dense_array(engine, rng, has_c):
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    function = chain_function((64, 48))
    (group,) = find_fusion_groups(function)
    kernel = compile_group(group, kernel_shapes(group), engine=engine)
    arrays = case_arrays(function, rng)
    expected = reference(function, arrays)
    transposed = lambda x: np.ascontiguousarray(x.T).T  # same values, column-major
    by_node = dict(zip(function.parameters, [transposed(arrays[0]), arrays[1],
                                             transposed(arrays[2]), arrays[3][:, ::-1][:, ::-1],
                                             transposed(arrays[4])]))
    out = np.empty((48, 64), np.float32).T
    assert kernel(*[by_node[x] for x in group.inputs], out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    x = core.Parameter(core.f32, (4, 16))
    rows = core.Function([core.Sum(core.Multiply(core.Exp(x), x), (1,))], [x])
    (reduction,) = find_fusion_groups(rows)
    kernel = compile_group(reduction, kernel_shapes(reduction), engine=engine)
    with pytest.raises(ExecutionError, match="C-contiguous"):  # a reduction's out may not
        kernel(np.ones((4, 16), np.float32), out=np.empty(8, np.float32)[::2])


@pytest.mark.parametrize("engine", ["numpy", "c"])
def test_out_may_be_an_input_of_a_multi_step_op(engine, rng, has_c, c_cases):
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    function = case("Select", core.f32)
    group = group_of(function)
    kernel = (c_cases[("Select", "f32")][2] if engine == "c"
              else compile_group(group, kernel_shapes(group), engine="numpy"))
    condition, then, otherwise = case_arrays(function, rng)
    expected = reference(function, [condition, then, otherwise])
    by_node = dict(zip(function.parameters, [condition, then, otherwise]))
    kernel(*[by_node[x] for x in group.inputs], out=then)   # writes over `then` as it reads
    np.testing.assert_array_equal(then, expected)


@pytest.mark.parametrize("engine", ["numpy", "c"])
def test_reduction_of_a_broadcast_input(engine, has_c):
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    a = core.Parameter(core.f32, core.Shape(4, 30000))
    function = core.Function([core.Sum(a, (1,))], [a])
    (group,) = find_fusion_groups(function)
    kernel = compile_group(group, kernel_shapes(group), engine=engine)
    out = np.empty(4, np.float32)
    kernel(np.broadcast_to(np.float32(0.5), (4, 30000)), out=out)
    np.testing.assert_array_equal(out, np.full(4, 15000, np.float32))


@pytest.mark.parametrize("engine", ["numpy", "c"])
def test_empty_reductions(engine, has_c):
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    shape = core.Shape(3, 0)
    a = core.Parameter(core.f32, shape)
    for reduce, expected in ((core.Sum, np.zeros(3, np.float32)), (core.Max, None)):
        function = core.Function([reduce(core.Exp(a), (1,))], [a])
        group = group_of(function)
        kernel = compile_group(group, kernel_shapes(group), engine=engine)
        x = np.empty((3, 0), np.float32)
        if expected is None:
            with pytest.raises(ExecutionError, match="empty"):
                run_kernel(kernel, group, function, [x])
        else:
            np.testing.assert_array_equal(run_kernel(kernel, group, function, [x]), expected)


@pytest.mark.parametrize("engine", ["numpy", "c"])
def test_l2_sum_is_accurate(engine, rng, has_c):
    if engine == "c" and not has_c:
        pytest.skip("no working C compiler here")
    n = 1_000_000
    function = l2_function(n)
    (group,) = find_fusion_groups(function)
    kernel = compile_group(group, kernel_shapes(group), engine=engine)
    x = rng.standard_normal(n).astype(np.float32) + 3.0
    y = rng.standard_normal(n).astype(np.float32)
    exact = np.sum((x.astype(np.float64) - y.astype(np.float64)) ** 2)
    out = np.empty((), np.float32)
    kernel(x, y, out=out)
    assert abs(float(out) - exact) / exact <= 1e-5


def test_numpy_engine_divides_by_a_sigmoid_denominator_it_uses_once():
    x, y = core.Parameter(core.f32, (6,), name="x"), core.Parameter(core.f32, (6,), name="y")
    once = core.Function([core.Subtract(core.Multiply(core.Tanh(x), core.Sigmoid(y)), x)],
                         [x, y])
    shared = core.Sigmoid(y)
    twice = core.Function([core.Add(core.Multiply(core.Tanh(x), shared), shared)], [x, y])
    xv = np.array([np.inf, 0.0, -2.5, 1.0, np.nan, 3.0], np.float32)
    yv = np.array([-np.inf, -100.0, 90.0, -30.0, 0.5, np.inf], np.float32)
    for function, divides in ((once, 1), (twice, 1)):
        (group,) = find_fusion_groups(function)
        kernel = compile_group(group, kernel_shapes(group), engine="numpy")
        assert "reciprocal" not in kernel.source
        assert kernel.source.count("np.divide(") == divides
        expected = reference(function, [xv, yv])
        # exact to rounding, except that sigmoid(-100) (subnormal in f32) may flush to 0
        np.testing.assert_allclose(run_kernel(kernel, group, function, [xv, yv]), expected,
                                   rtol=2e-7, atol=np.finfo(np.float32).tiny, equal_nan=True)


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_numpy_engine_threads_split_blocks_not_results(threads, monkeypatch, rng):
    from axgraph.transformers.cpu import parallel

    monkeypatch.setenv("AXGRAPH_NUM_THREADS", threads)
    n = 300_001  # several blocks, the last one short
    spans = parallel.spans(n, 4096, 1)
    assert spans == [] if threads == "1" else (
        spans[0][0] == 0 and spans[-1][1] == n and len(spans) == int(threads)
        and all(hi == next_lo for (_, hi), (next_lo, _) in zip(spans, spans[1:])))
    function = chain_function(n)
    (group,) = find_fusion_groups(function)
    blocked = kernel_blocked_numpy.NumpyKernel(group, kernel_shapes(group), block_size=4096)
    whole = kernel_blocked_numpy.NumpyKernel(group, kernel_shapes(group), block_size=n)
    arrays = case_arrays(function, rng)
    np.testing.assert_array_equal(run_kernel(blocked, group, function, arrays),
                                  run_kernel(whole, group, function, arrays))


def test_numpy_engine_errors_in_a_worker_reach_the_caller(monkeypatch):
    monkeypatch.setenv("AXGRAPH_NUM_THREADS", "2")
    n = 1 << 19
    x, y = core.Parameter(core.i32, (n,)), core.Parameter(core.i32, (n,))
    function = core.Function([core.Add(core.Divide(x, y), x)], [x, y])
    (group,) = find_fusion_groups(function)
    kernel = compile_group(group, kernel_shapes(group), engine="numpy")
    divisors = np.ones(n, np.int32)
    divisors[-1] = 0  # in the second worker's span
    with pytest.raises(ExecutionError, match="division by zero"):
        run_kernel(kernel, group, function, [np.ones(n, np.int32), divisors])


@pytest.mark.parametrize("threads", ["2", "16"])
def test_numpy_engine_makes_no_full_size_temporaries(rng, monkeypatch, threads):
    """Each worker computes blocks in buffers of its own; with many workers the blocks
    shrink so that all buffers together stay within a quarter of the output (16 workers
    with full blocks took 3.2x the output of the 1M-element chain)."""
    monkeypatch.setenv("AXGRAPH_NUM_THREADS", threads)
    n = 1_000_000
    output = 4 * n
    for function in (l2_function(n), chain_function(n)):
        (group,) = find_fusion_groups(function)
        kernel = kernel_blocked_numpy.NumpyKernel(group, kernel_shapes(group))
        arrays = case_arrays(function, rng)
        out = np.empty(tuple(group.output.shape), np.float32)
        tracemalloc.start()
        kernel(*arrays, out=out)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        np.testing.assert_allclose(out, reference(function, arrays), rtol=1e-5, atol=1e-6)
        assert peak < (1 << 20 if group.reduction is not None else 0.3 * output), (
            function, peak)


# -- the C engine's machinery --------------------------------------------------------------------

def test_disk_cache_is_reused_without_the_compiler(cache_dir, has_c, monkeypatch, rng):
    if not has_c:
        pytest.skip("no working C compiler here")
    shape = core.Shape(100)
    a, b = core.Parameter(core.f64, shape), core.Parameter(core.f64, shape)
    function = core.Function([core.Cos(core.Divide(core.Sin(a), b))], [a, b])
    (group,) = find_fusion_groups(function)
    first = compile_group(group, kernel_shapes(group), engine="c")
    assert first.path.exists() and first.path.parent == kernel_cache.cache_dir()
    assert first.path.with_suffix(".c").read_text() == first.source
    assert not [f for f in os.listdir(cache_dir) if f.startswith(".")]  # no temp files left

    kernel_c.clear_memory_cache()

    def no_compiler(*args, **kwargs):
        raise AssertionError(f"the compiler ran: {args}")

    monkeypatch.setattr(kernel_c.subprocess, "run", no_compiler)
    second = compile_group(group, kernel_shapes(group), engine="c")
    assert second.path == first.path and second.engine == "c"
    arrays = case_arrays(function, rng)
    np.testing.assert_allclose(run_kernel(second, group, function, arrays),
                               reference(function, arrays), rtol=1e-13)


def test_cache_name_depends_on_flags(has_c):
    if not has_c:
        pytest.skip("no working C compiler here")
    chain = kernel_c.toolchain()
    source = kernel_c.generate_source(group_of(case("Exp", core.f32)))
    assert kernel_c.kernel_key(source, chain) != kernel_c.kernel_key(source, chain, True)
    assert kernel_c.kernel_key(source, chain) == kernel_c.kernel_key(source, chain)


def test_source_is_independent_of_node_names():
    one, two = group_of(case("Sigmoid", core.f32)), group_of(case("Sigmoid", core.f32))
    assert one.output.name != two.output.name
    assert kernel_c.generate_source(one) == kernel_c.generate_source(two)


def test_without_a_compiler_the_c_engine_is_skipped(monkeypatch, rng):
    monkeypatch.delenv("AXGRAPH_CC", raising=False)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(kernel_c.shutil, "which", lambda name: None)
    assert fusion.available_engines() == ["numpy"]
    function = chain_function()
    (group,) = find_fusion_groups(function)
    kernel = compile_group(group, kernel_shapes(group))
    assert kernel.engine == "numpy"
    arrays = case_arrays(function, rng)
    np.testing.assert_allclose(run_kernel(kernel, group, function, arrays),
                               reference(function, arrays), rtol=1e-6)
    with pytest.raises(kernel_c.KernelCompileError, match="no working C compiler"):
        compile_group(group, kernel_shapes(group), engine="c")


def test_c_kernels_use_vector_math_without_losing_nan(has_c, c_cases, rng):
    if not has_c:
        pytest.skip("no working C compiler here")
    chain = kernel_c.toolchain()
    assert "-ffast-math" not in kernel_c.compile_flags(chain)  # NaN semantics by default
    _, _, kernel = c_cases[("Log", "f32")]  # (float exp and tanh are the kernels' own)
    if "logf" in chain.vector_math and kernel_c.shutil.which("objdump"):
        assert any("logf" in name for name in kernel.vector_math_calls())
    # the threshold that keeps small calls on one thread must not switch off the simd
    # part (on a combined `parallel for simd` a bare `if` clause applies to it too and made
    # them ~100x slower)
    pragmas = [line for line in kernel.source.splitlines() if "#pragma omp" in line]
    assert any("parallel" in line and "if(" in line for line in pragmas)
    assert all("if(parallel:" in line for line in pragmas if "simd" in line and "if(" in line)


def test_fast_math_is_an_option(has_c, rng):
    if not has_c:
        pytest.skip("no working C compiler here")
    function = chain_function(1000)
    (group,) = find_fusion_groups(function)
    kernel = compile_group(group, kernel_shapes(group), engine="c", fast_math=True)
    arrays = [rng.standard_normal(1000).astype(np.float32) for _ in range(5)]
    np.testing.assert_allclose(run_kernel(kernel, group, function, arrays),
                               reference(function, arrays), rtol=1e-4, atol=1e-5)


def test_auto_prefers_c_for_floats(has_c):
    group = group_of(case("Tanh", core.f32))
    kernel = compile_group(group, kernel_shapes(group))
    assert kernel.engine == ("c" if has_c else "numpy")
    with pytest.raises(ValueError):
        compile_group(group, kernel_shapes(group), engine="cuda")


# -- integers converted to floats in C -------------------------------------------------------------

INTEGER_TYPES = [core.i8, core.i16, core.i32, core.i64, core.u8, core.u16, core.u32, core.u64]


def _integer_values(et: core.ElementType, rng) -> np.ndarray:
    """Random values over the whole range, the extremes, and 64-bit values where one
    rounding to float and two (through a double) differ."""
    info = np.iinfo(et.dtype)
    values = [rng.integers(info.min, info.max, 20000, dtype=et.dtype, endpoint=True),
              np.array([info.min, info.max, 0, 1, info.max - 1], et.dtype)]
    if info.bits == 64:
        # 2^62 + 2^38 (+-1): a tie for float that a double rounding breaks the wrong way
        awkward = [2 ** 62 + 2 ** 38 + d for d in (-1, 0, 1)] + [2 ** 53 + 1, 2 ** 53 + 3,
                                                                   (2 ** 23 + 1) * 2 ** 39 + 1]
        signs = (1, -1) if info.min < 0 else (1,)
        values.append(np.array([s * a for a in awkward for s in signs], et.dtype))
        shifted = rng.integers(0, 2 ** 30, 20000, dtype=np.int64) << rng.integers(0, 33, 20000)
        values.append((shifted | rng.integers(0, 2, 20000)).astype(et.dtype))
    return np.concatenate(values)


TARGETS = ["native"] + (["x86-64-v3", "x86-64-v2"] if platform.machine() in ("x86_64", "AMD64")
                        else [])


@pytest.mark.parametrize("march", TARGETS)
def test_c_converts_every_integer_type_to_floats_as_numpy_does(has_c, rng, monkeypatch, march):
    """engine="c" compiles an integer input converted to f32 or f64 (a C cast, or for 64-bit
    integers the kernels' own vectorizing conversion, which x86 before AVX-512DQ lacks), and
    rounds exactly as NumPy's astype; built for x86-64-v2 and v3 too on an x86 machine."""
    if not has_c:
        pytest.skip("no working C compiler here")
    monkeypatch.setenv(kernel_c.MARCH_VARIABLE, march)
    try:
        kernel_c.toolchain()
    except kernel_c.KernelCompileError as error:
        pytest.skip(str(error))
    for et in INTEGER_TYPES:
        x = _integer_values(et, rng)
        for target in (core.f32, core.f64):
            a = core.Parameter(et, core.Shape(x.size))
            b = core.Parameter(target, core.Shape(x.size))
            function = core.Function([core.Multiply(core.Convert(a, target), b)], [a, b])
            group = group_of(function)
            kernel = compile_group(group, kernel_shapes(group), engine="c")
            assert kernel.engine == "c"
            ones = np.ones(x.size, target.dtype)
            out = np.empty(x.size, target.dtype)
            kernel(x, ones, out=out)
            np.testing.assert_array_equal(out, x.astype(target.dtype), err_msg=f"{et} {target}")


def test_an_integer_literal_converted_in_c(has_c):
    """An integer constant read by a Convert is a C literal, the extremes included."""
    if not has_c:
        pytest.skip("no working C compiler here")
    for et, value in [(core.i64, -2 ** 63), (core.i64, 2 ** 63 - 1), (core.u64, 2 ** 64 - 1),
                      (core.i32, -7), (core.u8, 200)]:
        y = core.Parameter(core.f64, core.Shape(8))
        constant = core.Constant(et, y.shape, value)
        group = group_of(core.Function([core.Multiply(core.Convert(constant, core.f64), y)],
                                       [y]))
        kernel = compile_group(group, kernel_shapes(group), engine="c")
        out = np.empty(8)
        kernel(np.ones(8), out=out)
        assert np.all(out == np.float64(np.asarray(value, et.dtype))), (et, value, out)


def test_auto_compiles_converted_integers_in_c_but_leaves_integer_arithmetic(has_c):
    shape = core.Shape(100)
    a, y = core.Parameter(core.i32, shape), core.Parameter(core.f32, shape)
    converted = group_of(core.Function([core.Multiply(core.Convert(a, core.f32), y)], [a, y]))
    assert compile_group(converted, kernel_shapes(converted)).engine == (
        "c" if has_c else "numpy")
    summed = group_of(core.Function([core.Convert(core.Add(a, a), core.f32)], [a]))
    assert compile_group(summed, kernel_shapes(summed)).engine == "numpy"  # wrapping adds


def test_64_bit_integer_conversion_vectorizes_on_x86(tmp_path):
    """Without AVX-512DQ a C cast of an int64 to a float is scalar, and keeps the whole loop
    scalar: the kernels' own conversion vectorizes on x86-64-v2, v3 and v4."""
    gcc = shutil.which("gcc")
    if gcc is None or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("needs gcc on x86-64")
    for et in (core.i64, core.u64):
        for target in (core.f32, core.f64):
            a, b = core.Parameter(et, core.Shape(4096)), core.Parameter(target, core.Shape(4096))
            group = group_of(core.Function([core.Multiply(core.Convert(a, target), b)], [a, b]))
            source = tmp_path / f"{et.name}-{target.name}.c"
            source.write_text(kernel_c.generate_source(group))
            assert f"axgraph_from_{et.name}" in source.read_text()
            for march in ("x86-64-v2", "x86-64-v3", "x86-64-v4"):
                flags = [f for f in kernel_c.BASE_FLAGS if f != "-shared"]
                run = subprocess.run([gcc, *flags, f"-march={march}", "-fopenmp",
                                      "-fopt-info-vec-optimized", "-S", str(source), "-o",
                                      os.devnull], capture_output=True, text=True)
                assert run.returncode == 0, run.stderr
                assert "loop vectorized" in run.stderr, (et, target, march)
