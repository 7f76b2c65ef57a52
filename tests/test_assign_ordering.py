"""Assign ordering as Nervana Graph v0.4 defines it: per tensor, never a global stream.

An assign records itself in the user_deps of the tensor it writes; only ops
built afterwards that read that tensor follow it, and a computation runs the
user_deps of its results and what its results reach. Nothing else.
"""
import threading

import numpy as np
import pytest

import axgraph as ng


def _axis(length, name):
    return ng.make_axis(length=length, name=name)


def test_assign_records_itself_on_the_tensor_it_writes():
    w = ng.variable([_axis(2, "F")], initial_value=0.0)
    step = ng.assign(w, w + 1.0)
    assert list(w.user_deps) == [step]
    again = ng.assign(w, w * 2.0)
    assert list(w.user_deps) == [again]
    assert step in again.other_deps  # the second update reads w, so it follows the first


def test_only_ops_reading_the_tensor_follow_the_assign():
    F, K = _axis(2, "F"), _axis(2, "K")
    w = ng.variable([F], initial_value=0.0)
    step = ng.assign(w, w + 1.0)
    z = ng.placeholder([K])
    assert step not in (z * 2.0).other_deps
    assert step in (w * 2.0).other_deps


def test_unrelated_computation_never_trains_the_variable(transformer):
    F, K = _axis(2, "F"), _axis(2, "K")
    w = ng.variable([F], initial_value=0.0)
    x = ng.placeholder([F])
    step = ng.assign(w, w + x)
    transformer.computation(step, x)(np.ones(2, np.float32))
    z = ng.placeholder([K])
    doubled = transformer.computation(z * 2.0, z)
    for _ in range(3):
        np.testing.assert_array_equal(doubled(np.ones(2, np.float32)), [2.0, 2.0])
    # w was updated once, by the one call that ran the step.
    np.testing.assert_array_equal(transformer.computation(w)(feed_dict={x: np.zeros(2)}),
                                  [1.0, 1.0])


def test_building_a_model_twice_gives_independent_graphs(backend):
    def build():
        F = _axis(3, "F")
        w = ng.variable([F], initial_value=0.5)
        x = ng.placeholder([F])
        loss = ng.sum((w * x) ** 2, out_axes=())
        update = ng.assign(w, w - 0.1 * ng.deriv(loss, w))
        return x, loss, update

    x1, loss1, update1 = build()
    x2, loss2, update2 = build()
    data = np.arange(3, dtype=np.float32)
    with ng.make_transformer(backend) as t:
        first = t.computation([loss1, update1], x1)
        second = t.computation([loss2, update2], x2)
        values1 = [float(first(data)[0]) for _ in range(3)]
        values2 = [float(second(data)[0]) for _ in range(3)]
    # Computed by hand: w <- w - 0.1 * 2 * w * x**2, loss = sum((w x)^2).
    w = np.full(3, 0.5)
    expected = []
    for _ in range(3):
        expected.append(float(np.sum((w * data) ** 2)))
        w = w - 0.1 * 2 * w * data ** 2
    np.testing.assert_allclose(values1, expected, rtol=1e-6)
    np.testing.assert_allclose(values2, expected, rtol=1e-6)


def test_seed_001_reading_w_runs_its_main_stream_update(transformer):
    w = ng.variable((), initial_value=0)
    ng.assign(w, w + 1)
    w_comp = transformer.computation(w)
    assert [float(w_comp()) for _ in range(3)] == [1.0, 2.0, 3.0]


def test_seed_001_saved_user_deps_keeps_the_update_out(transformer):
    w = ng.variable((), initial_value=0)
    with ng.Op.saved_user_deps():
        update_op = ng.assign(w, w + 1)
    w_comp = transformer.computation(w)
    assert [float(w_comp()) for _ in range(3)] == [0.0, 0.0, 0.0]
    both = transformer.computation([w, update_op])
    assert [float(both()[0]) for _ in range(3)] == [1.0, 2.0, 3.0]


def test_saved_user_deps_yields_and_accepts_a_map():
    w = ng.variable((), initial_value=0)
    with ng.Op.saved_user_deps() as deps:
        update = ng.assign(w, w + 1)
        assert list(w.user_deps) == [update]
    assert list(deps[w]) == [update]
    assert not w.user_deps
    with ng.Op.saved_user_deps(deps):
        assert update in (w * 3).other_deps


def test_reading_w_whose_update_needs_an_unfed_placeholder_names_it(transformer):
    F = _axis(2, "F")
    w = ng.variable([F], initial_value=0.0)
    x = ng.placeholder([F], name="x")
    step = ng.assign(w, w + x)  # the line the error must name
    line = step.location[1]
    transformer.computation(step, x)(np.ones(2, np.float32))
    read = transformer.computation(w)
    with pytest.raises(ng.FeedError) as info:
        read()
    message = str(info.value)
    assert "x" in message and f"test_assign_ordering.py:{line}" in message
    # The failed call ran nothing: w still holds the one update.
    np.testing.assert_array_equal(read(feed_dict={x: np.zeros(2, np.float32)}), [1.0, 1.0])


def test_placeholder_values_live_for_one_call(transformer):
    F = _axis(2, "F")
    x = ng.placeholder([F], name="x")
    y = ng.placeholder([F], name="y")
    total = transformer.computation(x + y, x, y)
    np.testing.assert_array_equal(total(np.ones(2), np.ones(2)), [2.0, 2.0])
    only_x = transformer.computation(x * 2.0)
    with pytest.raises(ng.FeedError, match="x"):
        only_x()  # the value fed to the other computation is not kept
    assert x not in transformer.state and y not in transformer.state


def test_a_failed_call_leaves_no_feed_behind(transformer):
    F = _axis(2, "F")
    x = ng.placeholder([F], name="x")
    y = ng.placeholder([F], name="y")
    total = transformer.computation(x + y, x, y)
    with pytest.raises(ng.FeedError):
        total(np.ones(2), np.ones(3))
    assert x not in transformer.state
    with pytest.raises(ng.FeedError, match="x"):
        transformer.computation(x * 1.0)()


def test_sequential_still_orders_its_steps(transformer):
    w = ng.variable((), initial_value=1.0)
    result = ng.sequential([ng.assign(w, w * 3), ng.assign(w, w + 1), w * 10])
    f = transformer.computation(result)
    assert float(f()) == 40.0
    assert float(f()) == 130.0


def test_value_read_before_the_assign_keeps_the_old_value(transformer):
    w = ng.variable((), initial_value=2.0)
    before = w * 1.0
    update = ng.assign(w, w + 5)
    after = w * 1.0
    old, _, new = transformer.computation([before, update, after])()
    assert (float(old), float(new)) == (2.0, 7.0)


def test_assign_made_in_another_thread_orders_the_reads_there_too(transformer):
    w = ng.variable((), initial_value=0.0)
    built = {}

    def build():
        built["update"] = ng.assign(w, w + 1)

    thread = threading.Thread(target=build)
    thread.start()
    thread.join()
    assert built["update"] in (w * 1).other_deps
    assert float(transformer.computation(w)()) == 1.0
