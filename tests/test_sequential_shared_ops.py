"""sequential: steps run in order, and ops that several sequentials share stay free.

`ng.sequential([a, b])` runs what b needs (and a did not) after a. An op whose
value is the same wherever it runs (a placeholder, a constant, a product of
them, a read of a variable nothing writes) is not pinned: two sequentials that
share it, one needing it before a print and the other after another print,
schedule without a false dependency cycle. Effects and reads of written
tensors keep their order.
"""
import numpy as np
import pytest

import axgraph as ng
from axgraph.op_graph.execution_order import reachable, schedule, timed_ops

C = ng.make_axis(length=3, name="C")
VALUES = np.array([1.0, 2.0, 3.0], np.float32)


def _note(text):
    """A print of text alone (what TF's ``tf.print("text")`` imports as)."""
    return ng.PrintOp(ng.constant(0.0), text, show_value=False)


def _printed(capsys):
    return capsys.readouterr().out.splitlines()


def test_two_sequentials_sharing_a_placeholder_and_a_constant(transformer, capsys):
    # the second sequential needs the first one after its print of x; the first
    # needs x (and the constant 3) after its note: no op must run both before and after
    x = ng.placeholder([C], name="x")
    shown = ng.PrintOp(x, "x")
    first = ng.sequential([_note("starting"), x * 3.0])
    second = ng.sequential([shown, first + 1.0])
    got = transformer.computation(second, x)(VALUES)
    np.testing.assert_array_equal(got, VALUES * 3 + 1)
    assert _printed(capsys) == ["x: [1. 2. 3.]", "starting"]


def test_two_sequentials_sharing_a_computed_value(transformer, capsys):
    x = ng.placeholder([C], name="x")
    doubled = x * 2.0  # needed before one print and after the other
    first = ng.sequential([_note("first"), doubled + 1.0])
    second = ng.sequential([ng.PrintOp(doubled, "doubled"), first * 10.0])
    got = transformer.computation(second, x)(VALUES)
    np.testing.assert_array_equal(got, (VALUES * 2 + 1) * 10)
    assert _printed(capsys) == ["doubled: [2. 4. 6.]", "first"]


def test_two_sequentials_sharing_a_read_of_an_unwritten_variable(transformer, capsys):
    w = ng.variable([C], initial_value=VALUES)
    scaled = w * 3.0
    first = ng.sequential([_note("first"), scaled - 1.0])
    second = ng.sequential([ng.PrintOp(scaled, "scaled"), first + scaled])
    got = transformer.computation(second)()
    np.testing.assert_array_equal(got, VALUES * 3 - 1 + VALUES * 3)
    assert _printed(capsys) == ["scaled: [3. 6. 9.]", "first"]


def test_steps_with_effects_keep_their_order_around_a_free_step(transformer, capsys):
    x = ng.placeholder([C], name="x")
    # built in the other order, so only the sequential puts "one" first
    two = _note("two")
    one = _note("one")
    steps = ng.sequential([one, x * 2.0, two, x + 1.0])
    np.testing.assert_array_equal(transformer.computation(steps, x)(VALUES), VALUES + 1)
    assert _printed(capsys) == ["one", "two"]


def test_reads_of_a_written_variable_still_follow_the_write(transformer):
    w = ng.variable([C], initial_value=VALUES)
    x = ng.placeholder([C], name="x")
    with ng.Op.saved_user_deps():
        steps = ng.sequential([ng.assign(w, w + x), x * 2.0, (w * 10.0) - x])
    run = transformer.computation(steps, x)
    np.testing.assert_array_equal(run(VALUES), (VALUES + VALUES) * 10 - VALUES)
    np.testing.assert_array_equal(run(VALUES), (VALUES * 3) * 10 - VALUES)


def test_contradictory_orders_of_effects_are_refused():
    x = ng.placeholder([C], name="x")
    left, right = ng.PrintOp(x, "left"), ng.PrintOp(x + 1.0, "right")
    both = [ng.sequential([left, right]), ng.sequential([right, left])]
    with pytest.raises(ng.GraphError, match="dependency cycle"):
        schedule(both)


def test_which_ops_are_pinned_by_a_sequential():
    x = ng.placeholder([C], name="x")
    w = ng.variable([C], initial_value=0.0)
    v = ng.variable([C], initial_value=0.0)
    free = [x, w, v, x * 2.0, v * x, ng.constant(1.0) + x]
    shown = ng.PrintOp(x * 2.0, "x")
    after_print = shown + 1.0
    with ng.Op.saved_user_deps():
        update = ng.assign(w, w + 1.0)
    reads_written, copied = w * 3.0, ng.value_of(w)
    timed = timed_ops(reachable(free + [after_print, update, reads_written, copied]))
    # w is written here (its update's w + 1 reads it too) and v is not; stored tensors
    # are read where used, never pinned
    assert timed == {shown, after_print, update, update.value, reads_written, copied}


def test_a_cycle_through_a_sequential_is_reported():
    x = ng.placeholder([C], name="x")
    first = ng.exp(x, name="looping_exp")
    shown = ng.PrintOp(first, "first")
    steps = ng.sequential([shown, first + 1.0])
    first.other_deps.add(steps)  # first waits for what needs it
    assert {first, shown, steps} <= timed_ops(reachable([steps]))  # (a dep on a cycle: timed)
    with pytest.raises(ng.GraphError, match="dependency cycle"):
        schedule([steps])
