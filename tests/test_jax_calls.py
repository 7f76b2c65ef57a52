"""The jax transformer's repeated calls (axgraph/transformers/jax/call_plan.py): a call like
an earlier one runs on that call's plan, gives what the general route gives, and falls back
to it wherever the plan's decisions do not hold; a check that fails in a call kept on the
device is raised by the next call (or `wait()`), with the stored values as before it."""
import numpy as np
import pytest

import axgraph as ng
from axgraph.errors import ExecutionError

jax = pytest.importorskip("jax")

from axgraph.transformers.jax import call_plan  # noqa: E402  (needs jax)
from axgraph.transformers.jax.backend import FailedCheckError  # noqa: E402


@pytest.fixture
def planned_runs(monkeypatch):
    """Counts the calls the plans ran (not those they handed to the general route)."""
    counts = {"planned": 0}
    run = call_plan.CallPlan.run

    def counted(self, *arguments):
        returned = run(self, *arguments)
        if returned is not call_plan.MISS:
            counts["planned"] += 1
        return returned

    monkeypatch.setattr(call_plan.CallPlan, "run", counted)
    return counts


def tally_graph():
    """counts += one_hot(labels) summed over N: a one-hot check on the labels fed."""
    C = ng.make_axis(length=3, name="C")
    N = ng.make_axis(length=2, name="N")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    counts = ng.variable([C], initial_value=np.zeros(3), dtype=np.float64, name="counts")
    total = ng.sum(counts, out_axes=())  # made first: it reads counts, not the tally
    tally = ng.assign(counts, counts + ng.sum(ng.one_hot(labels, axis=C), out_axes=[C]))
    return labels, counts, tally, total


def test_repeated_steps_run_on_the_plan_and_match_numpy(rng, planned_runs):
    """Gradient steps on w fed NumPy and device batches, results kept or not: each loss and
    the final w as NumPy computes them, and all calls after the first of each kind of
    arguments planned."""
    F = ng.make_axis(length=3, name="F")
    N = ng.make_axis(length=5, name="N")
    x = ng.placeholder([F, N], name="x")
    w0 = np.array([0.5, -1.0, 2.0], np.float32)
    w = ng.variable([F], initial_value=w0, name="w")
    scale = ng.variable([F], initial_value=np.array([1.0, 2.0, 0.5], np.float32),
                        name="scale")  # read, never written: stays as the first call left it
    cost = ng.sum(ng.tanh(ng.dot(w * scale, x)) ** 2, out_axes=())
    update = ng.assign(w, w - 0.1 * ng.deriv(cost, w))
    batches = [rng.standard_normal((3, 5)).astype(np.float32) for _ in range(6)]
    with ng.make_transformer("jax") as t:
        step = t.computation([cost, update], x)
        losses = []
        for i, batch in enumerate(batches):
            fed = batch if i % 2 == 0 else jax.device_put(batch)
            loss, _ = step(fed, keep_on_device=i % 3 == 0)
            losses.append(float(np.asarray(loss)))
        assert isinstance(t.state[scale], jax.Array)  # put on the device once, not per call
        final = w.value.get()
        info = step.cache_info()
    assert planned_runs["planned"] == 4  # the first NumPy and the first device call are not
    assert (info.hits, info.misses) == (5, 1)
    wv, sv = w0.astype(np.float64), np.array([1.0, 2.0, 0.5])
    for batch, loss in zip(batches, losses):
        y = np.tanh((wv * sv) @ batch)
        np.testing.assert_allclose(loss, np.sum(y ** 2), rtol=1e-5)
        wv = wv - 0.1 * sv * (batch @ (2 * y * (1 - y ** 2)))
    np.testing.assert_allclose(final, wv, rtol=1e-5)


def test_stored_values_written_by_another_computation_or_set_are_taken(planned_runs):
    """Two computations sharing a variable, and values set from outside, between planned
    calls: each call reads the value stored now."""
    N = ng.make_axis(length=2, name="N")
    x = ng.placeholder([N], name="x")
    acc = ng.variable([N], initial_value=np.zeros(2), name="acc")
    with ng.Op.saved_user_deps():  # two updates, neither run by the other's computation
        add = ng.assign(acc, acc + x)
    with ng.Op.saved_user_deps():
        double = ng.assign(acc, acc * 2.0)
    one = np.ones(2, np.float32)
    with ng.make_transformer("jax") as t:
        adding = t.computation(add, x)
        doubling = t.computation(double)
        expected = np.zeros(2)
        for _ in range(3):
            adding(one)
            expected = expected + 1
            np.testing.assert_array_equal(acc.value.get(), expected)
            doubling()
            expected = expected * 2
            np.testing.assert_array_equal(acc.value.get(), expected)
        ng.serialization.set_values(t, {acc: np.array([5.0, -1.0], np.float32)})
        adding(one)
        np.testing.assert_array_equal(acc.value.get(), [6.0, 0.0])
        adding(one, keep_on_device=True)
        adding(one)
        np.testing.assert_array_equal(acc.value.get(), [8.0, 2.0])
    assert planned_runs["planned"] == 6  # all but the first of each, and the one after set_values


def test_a_stored_array_fed_as_a_value_is_never_donated():
    """Feeding the variable's own stored array to the step that replaces the variable: the
    fed array stays readable, whether the call is the first or a planned one, or repeats
    the last call's very arrays."""
    N = ng.make_axis(length=3, name="N")
    x = ng.placeholder([N], name="x")
    v = ng.variable([N], initial_value=np.array([1.0, 2.0, 3.0]), name="v")
    step = ng.assign(v, v + x)
    with ng.make_transformer("jax") as t:
        run = t.computation([step, v], x)
        run(np.zeros(3, np.float32))
        run(jax.numpy.ones(3, np.float32))  # planned: device arrays of this type and shape
        for _ in range(2):
            fed = t.state[v]
            _, got = run(fed)
            assert not fed.is_deleted()
            np.testing.assert_array_equal(got, 2 * np.asarray(fed))
        np.testing.assert_array_equal(v.value.get(), [8.0, 12.0, 16.0])
        same = jax.numpy.full(3, 2.0, np.float32)
        for _ in range(2):  # the very same array again: the plan's shortest route
            run(same)
        np.testing.assert_array_equal(v.value.get(), [12.0, 16.0, 20.0])
        t.state[v] = same  # then stored as well
        _, got = run(same)
        assert not same.is_deleted()
        np.testing.assert_array_equal(got, [4.0, 4.0, 4.0])


def test_a_feed_the_plan_cannot_take_as_it_is_takes_the_general_route(planned_runs):
    """A column of a matrix (not C-ordered) and a list, after planned calls: converted and
    computed as every transformer does."""
    N = ng.make_axis(length=3, name="N")
    x = ng.placeholder([N], name="x")
    with ng.make_transformer("jax") as t:
        square = t.computation(x * x, x)
        for _ in range(2):
            square(np.arange(3, dtype=np.float32))
        matrix = np.arange(9, dtype=np.float32).reshape(3, 3)
        np.testing.assert_array_equal(square(matrix[:, 1]), matrix[:, 1] ** 2)
        np.testing.assert_array_equal(square([1.0, 2.0, 3.0]), [1.0, 4.0, 9.0])
    assert planned_runs["planned"] == 1


def test_a_failed_check_on_the_planned_route_with_numpy_results_raises_at_once():
    labels, counts, tally, _ = tally_graph()
    with ng.make_transformer("jax") as t:
        step = t.computation([tally, counts], labels)
        for _ in range(2):
            step(np.array([0, 2], np.int32))
        with pytest.raises(FailedCheckError, match=r"one-hot values must lie in \[0, 3\)"):
            step(np.array([1, 3], np.int32))
        np.testing.assert_array_equal(counts.value.get(), [2.0, 0.0, 2.0])
        _, now = step(np.array([1, 1], np.int32))
    np.testing.assert_array_equal(now, [2.0, 2.0, 2.0])


def test_a_failed_check_kept_on_the_device_is_raised_by_the_next_call():
    """The call with a label out of range returns (its results stay on the device, not
    waited for); the next call of any computation raises its error without running, the
    stored values are those before the failed call, and calls after that run."""
    labels, counts, tally, total = tally_graph()
    good, bad = np.array([0, 2], np.int32), np.array([1, 3], np.int32)
    with ng.make_transformer("jax") as t:
        step = t.computation([tally, counts], labels)
        read = t.computation(total)
        for _ in range(2):
            step(good, keep_on_device=True)
        step(bad, keep_on_device=True)
        np.testing.assert_array_equal(counts.value.get(), [2.0, 0.0, 2.0])
        with pytest.raises(FailedCheckError, match=r"one-hot values must lie in \[0, 3\); "
                                                   r"got 1\.\.3 \(in a call, kept on the "
                                                   r"device, .*the next call, which did not run"):
            read()
        assert read() == 4.0  # the raising call did not run; this one does
        _, now = step(good)
    np.testing.assert_array_equal(now, [3.0, 0.0, 3.0])


@pytest.mark.parametrize("keep", [False, True])
def test_device_labels_that_passed_the_checks_are_not_checked_again(keep, planned_runs):
    """The checks read the fed labels alone: the very device array that passed them passes
    again (a jax.Array never changes), so no flag is read for it; any other array is
    checked, one out of range fails whenever it comes, and the tally is NumPy's."""
    labels, counts, tally, _ = tally_graph()
    good = jax.device_put(np.array([0, 2], np.int32))
    other = jax.device_put(np.array([1, 1], np.int32))
    bad = jax.device_put(np.array([1, 3], np.int32))
    reads = {"flags": 0}
    failure = call_plan.ProgramCall.failure
    failed = call_plan.PendingCheck.failed

    def counted_failure(self, *arguments, **options):
        reads["flags"] += 1
        return failure(self, *arguments, **options)

    def counted_failed(self):
        reads["flags"] += 1
        return failed(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(call_plan.ProgramCall, "failure", counted_failure)
        patch.setattr(call_plan.PendingCheck, "failed", counted_failed)
        with ng.make_transformer("jax") as t:
            step = t.computation([tally, counts], labels)
            for _ in range(2):  # the general route, then the plan: both read the flag
                step(good, keep_on_device=keep)
            t.wait()
            before = reads["flags"]
            for _ in range(3):
                step(good, keep_on_device=keep)
            t.wait()
            assert reads["flags"] == before  # verified: nothing read
            step(other, keep_on_device=keep)
            t.wait()
            assert reads["flags"] == before + 1
            with pytest.raises(FailedCheckError, match=r"got 1\.\.3"):
                step(bad, keep_on_device=keep)
                t.wait()
            step(good, keep_on_device=keep)  # checked again: `other` passed since
            t.wait()
            assert planned_runs["planned"] >= 6
            np.testing.assert_array_equal(np.asarray(t.state[counts]), [6.0, 2.0, 6.0])


def test_checks_that_read_stored_values_are_read_every_call():
    """A check on a computed index that reads a variable is read on every call even with the
    same fed array: the variable changes, and an out-of-range index from it fails."""
    C = ng.make_axis(length=3, name="C")
    N = ng.make_axis(length=2, name="N")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    shift = ng.variable([], initial_value=0, dtype=np.int32, name="shift")
    hits = ng.variable([C], initial_value=np.zeros(3), dtype=np.float64, name="hits")
    tally = ng.assign(hits, hits + ng.sum(ng.one_hot(labels + shift, axis=C), out_axes=[C]))
    bump = ng.assign(shift, shift + 1)
    fed = jax.device_put(np.array([0, 1], np.int32))
    with ng.make_transformer("jax") as t:
        step = t.computation([tally], labels)
        move = t.computation([bump])
        for _ in range(2):
            step(fed, keep_on_device=True)
        move()
        step(fed, keep_on_device=True)  # labels 1, 2: in range
        move()
        step(fed, keep_on_device=True)  # labels 2, 3: out of range
        with pytest.raises(FailedCheckError, match=r"got 2\.\.3"):
            t.wait()
        np.testing.assert_array_equal(np.asarray(t.state[hits]), [2.0, 3.0, 1.0])


def test_wait_raises_a_failed_check_kept_on_the_device_once():
    labels, counts, tally, _ = tally_graph()
    with ng.make_transformer("jax") as t:
        step = t.computation([tally, counts], labels)
        for _ in range(2):
            step(np.array([2, 2], np.int32), keep_on_device=True)
        t.wait()  # every check passed
        step(np.array([-1, 0], np.int32), keep_on_device=True)
        with pytest.raises(ExecutionError, match=r"got -1\.\.0 .*transformer\.wait\(\)"):
            t.wait()
        t.wait()  # read once
        np.testing.assert_array_equal(counts.value.get(), [0.0, 0.0, 4.0])


def test_close_raises_a_failed_check_no_call_read():
    labels, counts, tally, _ = tally_graph()
    t = ng.make_transformer("jax")
    step = t.computation([tally, counts], labels)
    for _ in range(2):  # the second call is a planned repeat: its check is not waited for
        step(np.array([2, 2], np.int32), keep_on_device=True)
    step(np.array([0, 7], np.int32), keep_on_device=True)
    with pytest.raises(ExecutionError, match=r"got 0\.\.7 .*transformer\.close\(\)"):
        t.close()


def test_a_with_block_ending_in_an_error_is_not_masked_by_a_pending_check():
    labels, counts, tally, _ = tally_graph()
    with pytest.raises(KeyError):
        with ng.make_transformer("jax") as t:
            step = t.computation([tally, counts], labels)
            for values in ([2, 2], [2, 2], [0, 7]):
                step(np.array(values, np.int32), keep_on_device=True)
            raise KeyError("the user's own error")
