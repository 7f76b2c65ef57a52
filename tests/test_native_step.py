"""A small program's whole step as one C function (cpu/native_step.py): the values of the
Python program, its errors, and the Python program wherever C declines a call."""
import ctypes

import numpy as np
import pytest

import axgraph as ng
from axgraph import core
from axgraph.errors import AxgraphTypeError, ExecutionError
from axgraph.transformers.cpu import kernel_c, native_step

pytestmark = pytest.mark.skipif(not kernel_c.c_available(), reason="no C compiler")


def _native(function, **options):
    return core.compile(function, "cpu", native=True, **options)


def _mlp_step(batch=16, features=12, hidden=8, classes=5):
    F, H, Y = ng.make_axis(features, "F"), ng.make_axis(hidden, "H"), ng.make_axis(classes, "Y")
    N = ng.make_axis(batch, "N")
    x = ng.placeholder([N, F], name="x")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    rng = np.random.default_rng(0)
    w1 = ng.variable([H, F - 1], initial_value=rng.normal(0, 0.3, (hidden, features)), name="w1")
    b1 = ng.variable([H], initial_value=rng.normal(0, 0.1, hidden), name="b1")
    w2 = ng.variable([Y, H - 1], initial_value=rng.normal(0, 0.3, (classes, hidden)), name="w2")
    hidden_values = ng.maximum(ng.dot(w1, x) + b1, 0.0)
    probabilities = ng.softmax(ng.dot(w2, hidden_values))
    loss = ng.mean(ng.cross_entropy_multi(probabilities, ng.one_hot(labels, axis=Y)), out_axes=())
    variables = [w1, b1, w2]
    with ng.Op.saved_user_deps():
        updates = [ng.assign(w, w - 0.5 * g)
                   for w, g in zip(variables, ng.autodiff.deriv_many(loss, variables))]
    rng = np.random.default_rng(1)
    data = (rng.normal(size=(batch, features)).astype(np.float32),
            rng.integers(0, classes, batch).astype(np.int32))
    return x, labels, ng.sequential([ng.doall(updates), loss]), variables, data


def test_the_struct_offsets_are_found_on_this_build():
    assert native_step.struct_offsets() is not None


def test_a_training_step_runs_natively_with_the_values_of_the_python_program():
    x, labels, step, variables, (xv, lv) = _mlp_step()
    with ng.make_transformer("cpu") as native, \
            ng.make_transformer("cpu", native=False) as python, \
            ng.make_transformer("numpy") as reference:
        runs = [t.computation(step, x, labels) for t in (native, python, reference)]
        losses = [[float(run(xv, lv))] for run in runs]
        # a step updating stored values runs natively from its first call
        assert runs[0].native_source is not None and "axgraph_step" in runs[0].native_source
        for loss, run in zip(losses, runs):
            loss += [float(run(xv, lv)) for _ in range(5)]
        assert runs[1].native_source is None
        weights = [[np.array(t.computation(v)()) for v in variables]
                   for t in (native, python, reference)]
    np.testing.assert_allclose(losses[0], losses[2], rtol=1e-5)
    np.testing.assert_allclose(losses[1], losses[2], rtol=1e-5)
    assert losses[2][-1] < losses[2][0]  # it trains
    for got, want in zip(weights[0], weights[2]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_products_of_transposed_operands(transpose_a, transpose_b):
    shape_a, shape_b = (6, 4) if transpose_a else (4, 6), (5, 6) if transpose_b else (6, 5)
    a, b = core.Parameter(core.f32, shape_a, name="a"), core.Parameter(core.f32, shape_b, name="b")
    left = core.Transpose(a, (1, 0)) if transpose_a else a
    right = core.Transpose(b, (1, 0)) if transpose_b else b
    run = _native(core.Function([core.Dot(left, right)], [a, b]))
    rng = np.random.default_rng(2)
    av = rng.standard_normal(shape_a).astype(np.float32)
    bv = rng.standard_normal(shape_b).astype(np.float32)
    want = (av.T if transpose_a else av).astype(np.float64) @ (bv.T if transpose_b else bv)
    for _ in range(2):
        (got,) = run(av, bv)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert run.native_source is not None


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_sums_and_extremes_over_either_axis(axes):
    x = core.Parameter(core.f32, (7, 9), name="x")
    results = [core.Sum(x, axes), core.Max(x, axes), core.Min(x, axes)]
    run = _native(core.Function(results, [x]))
    xv = np.random.default_rng(3).standard_normal((7, 9)).astype(np.float32)
    xv[2, 3] = np.nan  # extremes propagate NaN, as np.maximum does
    for _ in range(2):
        got = run(xv)
        np.testing.assert_allclose(got[0], xv.astype(np.float64).sum(axis=axes), rtol=1e-5)
        np.testing.assert_array_equal(got[1], np.max(xv, axis=axes))
        np.testing.assert_array_equal(got[2], np.min(xv, axis=axes))
    assert run.native_source is not None


def test_comparisons_selects_and_converts():
    x = core.Parameter(core.f64, (3, 4), name="x")
    n = core.Parameter(core.i32, (3, 4), name="n")
    positive = core.Greater(x, core.Constant(core.f64, (3, 4), 0.0))
    counted = core.Convert(n, core.f64)
    chosen = core.Select(positive, core.Exp(x), counted)
    run = _native(core.Function([chosen, core.Convert(positive, core.f32)], [x, n]))
    rng = np.random.default_rng(4)
    xv, nv = rng.standard_normal((3, 4)), rng.integers(-5, 5, (3, 4)).astype(np.int32)
    for _ in range(2):
        got, mask = run(xv, nv)
        np.testing.assert_allclose(got, np.where(xv > 0, np.exp(xv), nv), rtol=1e-15)
        np.testing.assert_array_equal(mask, (xv > 0).astype(np.float32))
    assert run.native_source is not None


def test_constant_arrays_and_views_of_them():
    x = core.Parameter(core.f32, (3, 4), name="x")
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    constant = core.Constant(core.f32, (4, 3), table)
    run = _native(core.Function([core.Add(x, core.Transpose(constant, (1, 0)))], [x]))
    xv = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    for _ in range(2):
        (got,) = run(xv)
        np.testing.assert_array_equal(got, xv + table.T)
    assert run.native_source is not None and "F[2]" in run.native_source


def test_arguments_c_does_not_take_run_in_the_python_program():
    x = core.Parameter(core.f32, (4, 6), name="x")
    run = _native(core.Function([core.Multiply(x, core.Constant(core.f32, (4, 6), 3.0))], [x]))
    contiguous = np.arange(24, dtype=np.float32).reshape(4, 6)
    run(contiguous)
    assert run.native_source is not None

    class Marked(np.ndarray):
        pass

    for offered in (np.arange(24, dtype=np.float32).reshape(6, 4).T,  # not C-contiguous
                    contiguous.view(Marked)):  # not exactly an ndarray
        (got,) = run(offered)
        np.testing.assert_array_equal(got, np.asarray(offered) * 3)


def test_arguments_not_c_contiguous_are_copied_for_the_native_call(monkeypatch):
    """A strided view (another framework's transposed tensor) is copied, which costs a
    small program less than its Python program: C still runs it."""
    x = core.Parameter(core.f32, (4, 6), name="x")
    run = _native(core.Function([core.Multiply(x, core.Constant(core.f32, (4, 6), 3.0))], [x]))
    run(np.zeros((4, 6), np.float32))
    program = run.last_program
    assert program.native is not None

    def python_program(*arrays):
        raise AssertionError("the Python program ran")

    monkeypatch.setattr(program, "run", python_program)
    native, calls = program.native, []

    def counted(arrays, outs):
        calls.append([a.flags.c_contiguous for a in arrays])
        return native(arrays, outs)

    monkeypatch.setattr(program, "native", counted)
    offered = np.arange(24, dtype=np.float32).reshape(6, 4).T
    (got,) = run(offered)
    np.testing.assert_array_equal(got, offered * 3)
    assert calls == [[True]]  # copied before C is asked, not after it declined


def test_a_bad_label_raises_the_python_programs_error_and_leaves_the_weights():
    x, labels, step, variables, (xv, lv) = _mlp_step()
    with ng.make_transformer("cpu") as cpu:
        train = cpu.computation(step, x, labels)
        train(xv, lv)
        assert train.native_source is not None
        read = cpu.computation(variables)
        before = [np.array(v) for v in read()]
        bad = lv.copy()
        bad[3] = 5  # one past the last class
        with pytest.raises(ExecutionError, match=r"one-hot values must lie in \[0, 5\)"):
            train(xv, bad)
        for got, want in zip(read(), before):
            np.testing.assert_array_equal(got, want)
        train(xv, lv)  # and the next good call runs natively again
        assert train.native_source is not None


def test_large_programs_stay_python():
    x = core.Parameter(core.f32, (256, 256), name="x")
    run = _native(core.Function([core.Add(x, x)], [x]))
    for _ in range(2):
        (got,) = run(np.ones((256, 256), np.float32))
    np.testing.assert_array_equal(got, 2.0)
    assert run.native_source is None
    assert "elements" in run.last_program.native_declined


def test_native_must_be_a_bool_or_none():
    for wrong in (1, "yes"):
        with pytest.raises(AxgraphTypeError, match="native"):
            ng.make_transformer("cpu", native=wrong)
    with ng.make_transformer("cpu", native=None), ng.make_transformer("cpu", native=False):
        pass


def test_a_computation_gives_the_same_bits_at_every_call():
    """The choice of C or Python is made before a program first runs, never after some
    calls: the two round differently in the last bits."""
    X = ng.make_axis(7, name="X")
    x = ng.placeholder([X], dtype=np.float64)
    xv = np.array([-0.9, -0.3, -1e-3, 0.0, 0.4, 2.0, 30.0])
    for options in ({}, {"native": True}):
        with ng.make_transformer("cpu", **options) as cpu:
            f = cpu.computation(ng.log1p(x) * ng.exp(-x), x)
            first = f(xv).copy()
            for _ in range(12):
                np.testing.assert_array_equal(f(xv), first)
            # a computation updating nothing stays Python unless asked
            assert (f.native_source is not None) == bool(options)


def test_a_product_with_a_filled_constant_stays_python():
    x = core.Parameter(core.f32, (4, 6), name="x")
    run = _native(core.Function([core.Dot(x, core.Constant(core.f32, (6, 5), 0.5))], [x]))
    xv = np.random.default_rng(6).standard_normal((4, 6)).astype(np.float32)
    for _ in range(2):
        (got,) = run(xv)
        np.testing.assert_allclose(got, np.repeat(xv.sum(axis=1, keepdims=True) * 0.5, 5, 1),
                                   rtol=1e-5)
    assert run.native_source is None and "filled constant" in run.last_program.native_declined


def test_by_default_only_programs_first_called_with_donations_run_natively():
    p = core.Parameter(core.f32, (4, 3), name="p")
    function = core.Function([core.Subtract(p, core.Constant(core.f32, (4, 3), 0.5))], [p])
    first_plain = core.compile(function, "cpu")
    first_plain(np.ones((4, 3), np.float32))
    (got,) = first_plain(np.ones((4, 3), np.float32), donate={0: 0})  # too late to switch
    assert first_plain.native_source is None and np.array_equal(got, np.full((4, 3), 0.5))
    first_donating = core.compile(function, "cpu")
    value = np.ones((4, 3), np.float32)
    (got,) = first_donating(value, donate={0: 0})
    assert first_donating.native_source is not None
    assert got is value and np.array_equal(value, np.full((4, 3), 0.5))  # written in place


def _softmax64(x, axes):
    shifted = x - x.max(axis=axes, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axes, keepdims=True), shifted - np.log(e.sum(axis=axes, keepdims=True))


@pytest.mark.parametrize("axes", [(2,), (0,), (0, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_rows_and_their_backprops_natively(axes, dtype):
    shape = (3, 4, 5)
    et = core.element_type(dtype)
    x, dy = core.Parameter(et, shape, name="x"), core.Parameter(et, shape, name="dy")
    y, log_y = core.Softmax(x, axes), core.LogSoftmax(x, axes)
    function = core.Function([y, log_y, core.SoftmaxBackprop(dy, y, axes),
                              core.LogSoftmaxBackprop(dy, log_y, axes)], [x, dy])
    run = _native(function)
    rng = np.random.default_rng(3)
    xv = (rng.standard_normal(shape) * 4).astype(dtype)
    xv[0, 1, 2] = -np.inf  # a masked entry: exp gives 0 there
    dyv = rng.standard_normal(shape).astype(dtype)
    x64, dy64 = xv.astype(np.float64), dyv.astype(np.float64)
    want_y, want_log = _softmax64(x64, axes)
    want_grad = want_y * (dy64 - (dy64 * want_y).sum(axis=axes, keepdims=True))
    want_log_grad = dy64 - want_y * dy64.sum(axis=axes, keepdims=True)
    got = run(xv, dyv)
    assert run.native_source is not None and "INFINITY" in run.native_source
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for value, want in zip(got, (want_y, want_log, want_grad, want_log_grad)):
        assert value.dtype == dtype
        finite = np.isfinite(want)
        np.testing.assert_allclose(value[finite], want[finite], rtol=tolerance, atol=tolerance)
    assert got[1][0, 1, 2] == -np.inf  # log(0)


def test_the_c_step_checks_every_array_itself_and_declines_untouched():
    """The C function refuses (returns nonzero, writing nothing) any array other than the
    program's: a wrong dtype, rank, length or layout, not an array, a read-only result;
    so a caller may hand it arrays unchecked (the torch bridge's direct call) and run
    the Python program where it declines."""
    x = core.Parameter(core.f32, (4, 6), name="x")
    w = core.Parameter(core.f32, (6, 3), name="w")
    run = _native(core.Function([core.Tanh(core.Dot(x, w))], [x, w]))
    rng = np.random.default_rng(6)
    xv = rng.standard_normal((4, 6)).astype(np.float32)
    wv = rng.standard_normal((6, 3)).astype(np.float32)
    run(xv, wv)
    native = run.last_program.native
    assert native is not None
    (result_type,) = native.result_types
    out = np.full(result_type[0], 7, result_type[1])

    def call(*arrays):
        return native.entry(native.fixed, arrays)

    for bad in ([xv.astype(np.float64), wv],          # a dtype
                [xv[:3], wv],                         # a length
                [xv.reshape(1, 4, 6), wv],            # the rank
                [np.asfortranarray(xv), wv],          # the layout
                [xv.tolist(), wv]):                   # not an array
        assert call(*bad, out) != 0
        assert (out == 7).all()
    readonly = out.copy()
    readonly.flags.writeable = False
    assert call(xv, wv, readonly) != 0
    assert call(xv, wv, out) == 0
    np.testing.assert_allclose(out, np.tanh(xv.astype(np.float64) @ wv), rtol=1e-5, atol=1e-6)


# -- matrix products: register tiles of every shape and operand layout ------------------------

#: (m, k, n) from 1 to 70, most not multiples of a vector (4, 8 or 16 lanes) nor of the
#: tiles' 4 rows or 8 x 8 transposed blocks; the largest near the native step's limit.
PRODUCT_SHAPES = [(1, 1, 1), (1, 70, 1), (70, 1, 1), (1, 1, 70), (2, 3, 5), (5, 17, 9),
                  (7, 8, 16), (16, 16, 16), (17, 33, 31), (31, 64, 70), (33, 65, 17),
                  (64, 63, 65), (70, 9, 33), (3, 70, 48), (9, 2, 64), (65, 70, 57)]
#: How an operand reaches the product: as passed, transposed, a strided slice with an
#: offset, reversed along both dims (negative strides).
LAYOUTS = ("plain", "transposed", "sliced", "reversed")


def _operand(dtype, shape, layout, name, rng):
    """A parameter, the node a product reads of it as a (rows, cols) matrix, the value to
    pass, and that matrix computed by NumPy from the value."""
    rows, cols = shape
    et = core.element_type(dtype)
    if layout == "transposed":
        value = rng.standard_normal((cols, rows)).astype(dtype)
        parameter = core.Parameter(et, value.shape, name=name)
        return parameter, core.Transpose(parameter, (1, 0)), value, value.T
    if layout == "sliced":  # every second row from row 1, columns 2 .. cols + 1
        value = rng.standard_normal((2 * rows + 1, cols + 3)).astype(dtype)
        parameter = core.Parameter(et, value.shape, name=name)
        node = core.Slice(parameter, (1, 2), (2 * rows + 1, cols + 2), (2, 1))
        return parameter, node, value, value[1::2, 2:cols + 2]
    value = rng.standard_normal(shape).astype(dtype)
    parameter = core.Parameter(et, value.shape, name=name)
    if layout == "reversed":
        return parameter, core.Reverse(parameter, (0, 1)), value, value[::-1, ::-1]
    return parameter, parameter, value, value


def _product_cases(dtype, rng):
    """One Function computing a product per shape, the operands' layouts cycling through
    every pair, plus a product of a column-strided right operand (its every second
    column) and one contracting two dims; the arguments and each product's operands
    as NumPy computed them."""
    parameters, products, values, operands = [], [], [], []
    pairs = [(x, y) for x in LAYOUTS for y in LAYOUTS]
    for c, (m, k, n) in enumerate(PRODUCT_SHAPES):
        left_layout, right_layout = pairs[(5 * c) % len(pairs)]
        pa, a, va, ma = _operand(dtype, (m, k), left_layout, f"a{c}", rng)
        pb, b, vb, mb = _operand(dtype, (k, n), right_layout, f"b{c}", rng)
        parameters += [pa, pb]
        products.append(core.Dot(a, b))
        values += [va, vb]
        operands.append((ma, mb))
    et = core.element_type(dtype)
    pa, a, va, ma = _operand(dtype, (23, 19), "plain", "a_strided", rng)
    vb = rng.standard_normal((19, 2 * 37)).astype(dtype)
    pb = core.Parameter(et, vb.shape, name="b_strided")
    products.append(core.Dot(a, core.Slice(pb, (0, 1), (19, 2 * 37), (1, 2))))
    parameters += [pa, pb]
    values += [va, vb]
    operands.append((ma, vb[:, 1::2]))
    va, vb = rng.standard_normal((2, 3, 4, 5)).astype(dtype), \
        rng.standard_normal((4, 5, 11)).astype(dtype)
    pa = core.Parameter(et, va.shape, name="a_deep")
    pb = core.Parameter(et, vb.shape, name="b_deep")
    products.append(core.Dot(pa, pb, contract_a=(2, 3), contract_b=(0, 1)))
    parameters += [pa, pb]
    values += [va, vb]
    operands.append((va.reshape(6, 20), vb.reshape(20, 11)))
    return core.Function(products, parameters), values, operands


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_of_every_shape_and_layout_natively(dtype):
    rng = np.random.default_rng(7)
    function, values, operands = _product_cases(dtype, rng)
    run, python = _native(function), core.compile(function, "cpu", native=False)
    got = run(*values)
    engine = python(*values)
    assert run.native_source is not None and "axgraph_tile_" in run.native_source
    assert python.native_source is None
    tolerance = 1e-5 if dtype == np.float32 else 1e-13
    for value, from_engine, (a, b) in zip(got, engine, operands):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        want = (a64[:, :, None] * b64[None, :, :]).sum(axis=1)  # sums over k by hand
        # each sum's rounding error is bounded by (terms x epsilon) times its terms' size
        bound = tolerance * (np.abs(a64) @ np.abs(b64)) + np.finfo(dtype).tiny
        assert value.dtype == dtype
        flat = value.reshape(want.shape)
        assert np.all(np.abs(flat - want) <= bound), np.max(np.abs(flat - want) / bound)
        assert np.all(np.abs(flat - from_engine.reshape(want.shape)) <= 2 * bound)
    for again, first in zip(run(*values), got):  # the same bits at every call
        np.testing.assert_array_equal(again, first)


def test_the_products_cover_the_operand_layouts_the_tiles_handle():
    """The cases above reach each path of the tiles' C: a left operand of either stride
    order and negative strides, a right operand read in place (with columns that do not
    fill a vector), packed with its transposed blocks, and packed element by element."""
    function, values, _ = _product_cases(np.float32, np.random.default_rng(7))
    run = _native(function)
    run(*values)
    program = run.last_program
    seen = set()
    for node in program.schedule.nodes:
        if isinstance(node, core.Dot):
            (m, k, n), a, b, _ = native_step._dot_matrices(program, node)
            rows, cols = a.element_strides
            seen.add("a rows" if cols == 1 else "a columns" if rows == 1 else "a other")
            seen.add("a reversed" if rows < 0 else "a forward")
            if not native_step._packs(b, n):
                seen.add("b in place")
            elif b.element_strides[0] == 1 and min(k, n) >= 8:
                seen.add("b transposed")
            else:
                seen.add("b packed")
    assert seen >= {"a rows", "a columns", "a reversed", "a forward", "b in place",
                    "b transposed", "b packed"}, seen


def test_a_product_whose_packed_operand_would_not_fit_the_stack_stays_python():
    """A transposed right operand is packed into rows padded to whole vectors (of up to
    64 bytes) on the C stack: 64 x 130 doubles pad to 64 x 136, 69632 bytes, above
    STACK_BYTES; 64 x 120 (61440 bytes) fit."""
    for n, fits in ((130, False), (120, True)):
        a = core.Parameter(core.f64, (3, 64), name="a")
        b = core.Parameter(core.f64, (n, 64), name="b")
        run = _native(core.Function([core.Dot(a, core.Transpose(b, (1, 0)))], [a, b]))
        rng = np.random.default_rng(n)
        av, bv = rng.standard_normal((3, 64)), rng.standard_normal((n, 64))
        (got,) = run(av, bv)
        want = (av[:, :, None] * bv.T[None, :, :]).sum(axis=1)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        assert (run.native_source is not None) == fits
        if not fits:
            assert "stack" in run.last_program.native_declined


def test_the_step_by_data_pointers_computes_what_the_checking_entry_does():
    """The entry a caller that checks the arrays itself uses (a C++ autograd node reading
    tensors): the same results from the arrays' addresses."""
    x = core.Parameter(core.f32, (5, 7), name="x")
    w = core.Parameter(core.f32, (3, 7), name="w")
    product = core.Dot(x, core.Transpose(w, (1, 0)))
    run = _native(core.Function([core.Tanh(product), core.Exp(x)], [x, w]))
    rng = np.random.default_rng(7)
    xv = rng.standard_normal((5, 7)).astype(np.float32)
    wv = rng.standard_normal((3, 7)).astype(np.float32)
    expected = run(xv, wv)
    native = run.last_program.native
    assert native is not None
    results = [np.zeros(shape, dtype) for shape, dtype in native.result_types]
    addresses = (ctypes.c_void_p * 4)(*[a.ctypes.data for a in (xv, wv, *results)])
    assert native.pointers_entry(native.fixed, addresses) == 0
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(results[0], np.tanh(xv.astype(np.float64) @ wv.T), rtol=1e-5,
                               atol=1e-6)
