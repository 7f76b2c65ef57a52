"""The cpu transformer: generated source, the memory plan, allocation-free steady state."""
import tracemalloc

import numpy as np
import pytest

import axgraph as ng


def _mlp_step(batch=16, features=32, hidden=24, classes=5):
    F, H, Y = ng.make_axis(features, "F"), ng.make_axis(hidden, "H"), ng.make_axis(classes, "Y")
    N = ng.make_axis(batch, "N")
    x = ng.placeholder([N, F], name="x")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    rng = np.random.default_rng(0)
    w1 = ng.variable([H, F - 1], initial_value=rng.normal(0, 0.1, (hidden, features)), name="w1")
    w2 = ng.variable([Y, H - 1], initial_value=rng.normal(0, 0.1, (classes, hidden)), name="w2")
    probabilities = ng.softmax(ng.dot(w2, ng.tanh(ng.dot(w1, x))))
    loss = ng.mean(ng.cross_entropy_multi(probabilities, ng.one_hot(labels, axis=Y)), out_axes=())
    with ng.Op.saved_user_deps():
        updates = [ng.assign(w, w - 0.1 * g)
                   for w, g in zip([w1, w2], ng.autodiff.deriv_many(loss, [w1, w2]))]
    return x, labels, ng.sequential([ng.doall(updates), loss])


def _data(batch=16, features=32, classes=5):
    rng = np.random.default_rng(1)
    return (rng.normal(size=(batch, features)).astype(np.float32),
            rng.integers(0, classes, batch).astype(np.int32))


def test_training_step_matches_the_reference():
    x, labels, step = _mlp_step()
    xv, lv = _data()
    with ng.make_transformer("numpy") as reference, ng.make_transformer("cpu") as cpu:
        expected = [reference.computation(step, x, labels)(xv, lv) for _ in range(3)]
        got = [cpu.computation(step, x, labels)(xv, lv) for _ in range(3)]
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert expected[2] < expected[0]


def test_source_is_readable_python_with_out_buffers():
    x, labels, step = _mlp_step()
    with ng.make_transformer("cpu") as cpu:
        computation = cpu.computation(step, x, labels)
        computation(*_data())
        source = computation.source
    assert source.startswith("def run(")
    assert "out=b" in source and "np.matmul" in source
    compile(source, "<generated>", "exec")  # it is valid Python


def test_memory_plan_reuses_space():
    x, labels, step = _mlp_step(batch=64, features=128, hidden=96)
    with ng.make_transformer("cpu") as cpu:
        computation = cpu.computation(step, x, labels)
        computation(*_data(batch=64, features=128))
        plan = computation.memory_plan()
    assert plan.arena_bytes <= 0.5 * plan.naive_bytes
    assert plan.arena_bytes >= plan.peak_live_bytes
    assert "arena" in plan.table()


def test_steady_state_calls_allocate_only_the_results():
    x, labels, step = _mlp_step(batch=64, features=256, hidden=128)
    xv, lv = _data(batch=64, features=256)
    with ng.make_transformer("cpu") as cpu:
        computation = cpu.computation(step, x, labels)
        for _ in range(3):
            computation(xv, lv)
        plan_bytes = computation.memory_plan().naive_bytes
        tracemalloc.start()
        try:
            computation(xv, lv)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # the fed arrays' copies, the updated states and a scalar loss: far below the intermediates
    assert peak < 0.5 * plan_bytes


def test_a_new_batch_size_gets_its_own_program():
    F, N = ng.make_axis(3, "F"), ng.make_axis(name="N")
    x = ng.placeholder([N, F])
    total = ng.sum(ng.tanh(x) * 2.0, reduction_axes=[F])
    with ng.make_transformer("cpu") as cpu:
        computation = cpu.computation(total, x)
        for batch in (2, 7, 2):
            value = np.linspace(-1, 1, batch * 3, dtype=np.float32).reshape(batch, 3)
            np.testing.assert_allclose(computation(value), (np.tanh(value) * 2).sum(axis=1),
                                       rtol=1e-6)


def test_memory_plan_can_be_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    from axgraph.visualize import draw_memory_plan

    x, labels, step = _mlp_step()
    with ng.make_transformer("cpu") as cpu:
        computation = cpu.computation(step, x, labels)
        computation(*_data())
        path = draw_memory_plan(computation.memory_plan(), tmp_path / "plan.png")
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def _transposed_chain(n=8):
    """exp(a).T + exp(b), then tanh: the add's first operand is a transposed view."""
    from axgraph import core

    a, b = core.Parameter(core.f64, (n, n), name="a"), core.Parameter(core.f64, (n, 2 * n),
                                                                         name="b")
    left = core.Transpose(core.Exp(a), (1, 0))
    right = core.Slice(core.Exp(b), (0, 0), (n, 2 * n), (1, 2))  # a strided view
    total = core.Add(left, core.Tanh(right))
    return core.Function([core.Sum(core.Multiply(total, total), (0,))], [a, b])


def test_elementwise_buffers_take_their_first_input_layout():
    from axgraph import core

    function = _transposed_chain()
    compiled = core.compile(function, backend="cpu")
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(8, 8)), rng.normal(size=(8, 16))
    (got,) = compiled(a, b)
    total = np.exp(a).T + np.tanh(np.exp(b)[:, ::2])
    np.testing.assert_allclose(got, np.sum(total * total, axis=0), rtol=1e-12)
    program = compiled.last_program
    add = next(n for n in function.nodes if isinstance(n, core.Add))
    # computed in exp(a)'s memory order: the add's buffer is the transpose of a row-major one
    assert program.layout[add].element_strides == (1, 8)
    # the square follows it and may overwrite it; the add may not overwrite tanh's
    # row-major buffer (that would make every ufunc call copy its operand first)
    square = next(n for n in function.nodes if isinstance(n, core.Multiply))
    assert program.layout[square].element_strides == (1, 8)
    assert program.plan.buffers[square].in_place_of is add
    assert program.plan.buffers[add].in_place_of is None


def test_sums_over_the_outermost_axes_run_as_one_blas_product():
    from axgraph import core

    x = core.Parameter(core.f32, (16, 12, 12, 20), name="x")
    feature_map = core.Tanh(core.Transpose(core.Exp(x), (3, 1, 2, 0)))  # (C, H, W, N) of NHWC
    bias_gradient = core.Sum(feature_map, (1, 2, 3))
    # the map is used twice, so the sum is not fused with the tanh
    function = core.Function([core.Negative(bias_gradient),
                              core.Multiply(feature_map, feature_map)], [x])
    compiled = core.compile(function, backend="cpu")
    values = np.random.default_rng(6).normal(size=(16, 12, 12, 20)).astype(np.float32)
    values[3, 4, 5, 6] = np.nan
    got, _ = compiled(values)
    assert "np.matmul(ONES" in compiled.source
    expected = -np.tanh(np.exp(values.astype(np.float64))).sum(axis=(0, 1, 2))
    assert np.isnan(got[6]) and np.isnan(expected[6])
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_a_donated_argument_is_overwritten_only_when_nothing_reads_it_later():
    from axgraph import core

    p = core.Parameter(core.f64, (4, 3), name="p")
    step = core.Subtract(p, core.Constant(core.f64, (4, 3), 0.5))
    alone = core.compile(core.Function([step], [p]), backend="cpu")
    value = np.arange(12.0).reshape(4, 3).copy()  # an array that owns its memory
    (got,) = alone(value, donate={0: 0})
    assert got is value and np.array_equal(value, np.arange(12.0).reshape(4, 3) - 0.5)
    value = np.arange(12.0).reshape(4, 3).copy()
    (got,) = alone(value, out=[None], donate={0: 0})  # out leaves the result free
    assert got is value
    mine = np.empty((4, 3))
    (got,) = alone(value, out=[mine], donate={0: 0})  # the caller's out= comes first
    assert got is mine and np.array_equal(mine, value - 0.5)
    # p is read again after the step: its array must survive
    later = core.Multiply(p, step)
    both = core.compile(core.Function([step, later], [p]), backend="cpu")
    value = np.arange(12.0).reshape(4, 3).copy()
    first, second = both(value, donate={0: 0})
    assert first is not value and np.array_equal(value, np.arange(12.0).reshape(4, 3))
    np.testing.assert_array_equal(second, value * (value - 0.5))
    # a view, a read-only or a non-contiguous array is never written
    for offered in (np.arange(24.0).reshape(4, 6)[:, ::2], np.arange(12.0).reshape(4, 3)[:]):
        kept = offered.copy()
        (got,) = alone(offered, donate={0: 0})
        assert got is not offered and np.array_equal(offered, kept)


def test_variable_updates_overwrite_the_old_values_without_touching_what_was_read():
    x, labels, step = _mlp_step()
    xv, lv = _data()
    with ng.make_transformer("cpu") as cpu, ng.make_transformer("numpy") as reference:
        train = cpu.computation(step, x, labels)
        expected = reference.computation(step, x, labels)
        for _ in range(2):
            train(xv, lv), expected(xv, lv)
        lowered = cpu.lowered(train)
        assert lowered.replaced_state  # both weights are replaced in place
        before = {t: cpu.state[t] for t in lowered.state_inputs if not t.input}
        copies = {t: a.copy() for t, a in before.items()}
        losses = [train(xv, lv) for _ in range(3)]
        assert all(cpu.state[t] is a for t, a in before.items())  # updated in place
        assert not all(np.array_equal(a, copies[t]) for t, a in before.items())
        np.testing.assert_allclose(losses, [expected(xv, lv) for _ in range(3)], rtol=1e-5)


def _small_convnet_step():
    from axgraph.frontends.neon import (Affine, Convolution, Pooling, Rectlin, Sequential,
                                        Softmax, ar)

    rng = np.random.default_rng(7)
    N = ng.make_axis(4, name="N")
    C = ng.make_axis(1, name="C", roles=[ar.Channel])
    H = ng.make_axis(10, name="H", roles=[ar.Height])
    W = ng.make_axis(10, name="W", roles=[ar.Width])
    Y = ng.make_axis(3, name="Y")
    images = ng.placeholder([N, C, H, W], name="images")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    model = Sequential([
        Convolution((3, 3, 4), filter_init=rng.normal(0, 0.3, (4, 1, 3, 3)),
                    bias_init=np.full(4, 0.1), activation=Rectlin()),
        Pooling(2),
        Affine(axes=Y, weight_init=rng.normal(0, 0.3, (3, 4, 4, 4)), bias_init=np.zeros(3),
               activation=Softmax())])
    loss = ng.mean(ng.cross_entropy_multi(model(images), ng.one_hot(labels, axis=Y)),
                   out_axes=())
    variables = model.variables()
    with ng.Op.saved_user_deps():
        grads = ng.autodiff.deriv_many(loss, variables)
        update = ng.doall([ng.assign(v, v - 0.1 * g) for v, g in zip(variables, grads)])
    data = (rng.random((4, 1, 10, 10)).astype(np.float32),
            rng.integers(0, 3, 4).astype(np.int32))
    return ng.sequential([update, loss]), images, labels, data


def test_without_a_c_compiler_the_cpu_backend_trains_a_convnet_like_the_reference(monkeypatch):
    from axgraph.transformers.cpu import kernel_c, windows

    monkeypatch.delenv("AXGRAPH_CC", raising=False)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(kernel_c.shutil, "which", lambda name: None)
    monkeypatch.setattr(windows, "_use_c", lambda: False)
    step, images, labels, data = _small_convnet_step()
    with ng.make_transformer("numpy") as reference, ng.make_transformer("cpu") as cpu:
        expected = [reference.computation(step, images, labels)(*data) for _ in range(3)]
        train = cpu.computation(step, images, labels)
        got = [train(*data) for _ in range(3)]
        assert "win.im2col" in train.source and "win.max_pool_backprop" in train.source
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert expected[2] < expected[0]


def test_dot_merges_contracted_dims_in_the_larger_operands_memory_order():
    from axgraph import core

    x = core.Parameter(core.f32, (64, 6, 6, 16), name="x")                   # NHWC
    w = core.Parameter(core.f32, (10, 16, 6, 6), name="w")                   # (Y, C, H, W)
    maps = core.Tanh(core.Transpose(core.Exp(x), (0, 3, 1, 2)))             # NCHW of NHWC
    scores = core.Dot(w, maps, (1, 2, 3), (1, 2, 3))                        # (Y, N)
    compiled = core.compile(core.Function([scores], [x, w]), backend="cpu")
    rng = np.random.default_rng(8)
    xv = rng.normal(size=(64, 6, 6, 16)).astype(np.float32) * 0.1
    wv = rng.normal(size=(10, 16, 6, 6)).astype(np.float32)
    compiled(xv, wv)
    tracemalloc.start()
    (got,) = compiled(xv, wv)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    expected = np.einsum("ychw,nhwc->yn", wv.astype(np.float64), np.tanh(np.exp(xv)))
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    # the 147 KB feature map reaches BLAS as a view; only the 23 KB weight is reordered
    assert peak < 64 * 1024


@pytest.mark.parametrize("shape, contract, copy_order, subscripts", [
    # (H, N, T, Dh): the copy reads runs of Dh, the contiguous dim
    ((4, 8, 16, 8), (2, 1), (2, 1, 0, 3), "hntd,etn->hde"),
    # (H, N, Dh, T): no order reads runs; the one that jumps least (Dh's stride) wins
    ((4, 8, 8, 16), (3, 1), (3, 1, 0, 2), "hndt,etn->hde")])
def test_a_dot_operand_copied_anyway_is_copied_in_its_memory_order(shape, contract,
                                                                   copy_order, subscripts):
    from axgraph import core

    # a weight gradient of attention: per-head activations against (D, T, N) inputs
    x = core.Parameter(core.f32, shape, name="x")
    y = core.Parameter(core.f32, (12, 16, 8), name="y")
    heads = core.Tanh(x)                                     # a row-major buffer
    grad = core.Dot(heads, y, contract, (1, 2))              # (H, Dh, D)
    compiled = core.compile(core.Function([grad], [x, y]), backend="cpu")
    rng = np.random.default_rng(10)
    xv = rng.normal(size=shape).astype(np.float32)
    yv = rng.normal(size=(12, 16, 8)).astype(np.float32)
    (got,) = compiled(xv, yv)
    program = compiled.last_program
    assert program.layout[heads].c_contiguous
    # (H, Dh) cannot merge into one dim of a view, so the operand is copied: as the
    # (T N, H Dh) matrix, read in memory order, that reaches BLAS transposed
    line = next(line for line in program.source.splitlines() if "np.matmul(" in line)
    assert f"{program.names[heads]}.transpose({copy_order}).reshape((128, 32)).T," in line
    expected = np.einsum(subscripts, np.tanh(xv.astype(np.float64)), yv)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_fused_reductions_input_stays_row_major():
    from axgraph import core

    x = core.Parameter(core.f32, (64, 48, 32), name="x")
    maps = core.Tanh(core.Transpose(core.Exp(x), (2, 1, 0)))   # could follow exp's order
    energy = core.Sum(core.Multiply(maps, maps), (1, 2))         # a fused row reduction
    function = core.Function([energy, core.Negative(maps)], [x])
    compiled = core.compile(function, backend="cpu")
    values = np.random.default_rng(9).normal(size=(64, 48, 32)).astype(np.float32) * 0.1
    compiled(values)
    program = compiled.last_program
    assert any(isinstance(n, core.Fused) and isinstance(n.output, core.Sum) and maps in n.inputs
               for n in program.function.nodes)
    assert program.layout[maps].c_contiguous
    tracemalloc.start()
    got, _ = compiled(values)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1.5 * 64 * 48 * 32 * 4  # the results only (one is the map's size): no copy
    t = np.tanh(np.exp(values.astype(np.float64))).transpose(2, 1, 0)
    np.testing.assert_allclose(got, (t * t).sum(axis=(1, 2)), rtol=1e-5)


def test_the_value_before_an_update_survives_the_in_place_update():
    H = ng.make_axis(4, "H")
    w = ng.variable([H], initial_value=np.arange(4.0), name="w")
    with ng.Op.saved_user_deps():
        old = ng.value_of(w)
        step = ng.sequential([old, ng.assign(w, w - 1.0), w * 2.0])
    with ng.make_transformer("cpu") as cpu:
        computation = cpu.computation([old, step])
        for k in range(3):
            before, after = computation()
            np.testing.assert_array_equal(before, np.arange(4.0) - k)
            np.testing.assert_array_equal(after, 2 * (np.arange(4.0) - k - 1))


def test_views_of_buffers_are_made_once_and_see_each_calls_values():
    from axgraph import core

    x = core.Parameter(core.f32, (6, 10), name="x")
    wave = core.Sin(x)                                        # a buffer of the arena
    turned = core.Transpose(wave, (1, 0))                     # its view: made once
    rows = core.Reshape(core.Slice(turned, (2, 0), (8, 6), (2, 1)), (18,))
    given = core.Transpose(x, (1, 0))                         # the argument's: every call
    out = core.Multiply(core.Tanh(turned), given)
    compiled = core.compile(core.Function([out, core.Exp(rows)], [x]), backend="cpu",
                            fuse=False)
    rng = np.random.default_rng(11)
    for _ in range(3):  # new values each call: the fixed views read the arena anew
        xv = rng.normal(size=(6, 10)).astype(np.float32)
        got, got_rows = compiled(xv)
        x64 = xv.astype(np.float64)
        np.testing.assert_allclose(got, np.tanh(np.sin(x64).T) * x64.T, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_rows, np.exp(np.sin(x64).T[2:8:2].reshape(18)),
                                   rtol=1e-5)
    program = compiled.last_program
    source = program.source
    for view in (turned, rows):
        assert f"{program.names[view]} = " not in source, view.op
        assert program.names[view] in program.fixed
    assert f"{program.names[given]} = np.transpose({program.names[x]}, (1, 0))" in source
