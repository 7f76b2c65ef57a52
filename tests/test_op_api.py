"""Nervana Graph v0.4's op helpers, assign sugar and transformer API, as its users wrote them."""
import math
import operator

import numpy as np
import pytest

import axgraph as ng
import axgraph.transformers as ngt
from axgraph.testing import executor


def _axis(length, name):
    return ng.make_axis(length=length, name=name)


# -- collecting and ordering ops ----------------------------------------------------------

def test_all_ops_collects_every_op_and_nested_blocks_see_them():
    F = _axis(2, "F")
    with ng.Op.all_ops() as outer:
        x = ng.placeholder([F])
        with ng.Op.all_ops() as inner:
            y = x * 2.0
    assert x in outer and y in outer
    assert y in inner and x not in inner


def test_captured_ops_hides_ops_from_enclosing_captures():
    F = _axis(2, "F")
    with ng.Op.captured_ops() as outer:
        x = ng.placeholder([F])
        with ng.Op.captured_ops() as inner:
            y = ng.tanh(x)
    assert x in outer and y not in outer
    assert y in inner


def test_ordered_ops_puts_each_op_after_its_args():
    F = _axis(2, "F")
    x = ng.placeholder([F])
    a = x * 2.0
    b = ng.exp(a) + a
    order = ng.Op.ordered_ops([b])
    assert order[-1] is b
    for op in order:
        for arg in op.args:
            assert order.index(arg) < order.index(op)
    assert len(order) == len(set(order))


# -- small properties ---------------------------------------------------------------------

def test_op_description_helpers():
    F, N = _axis(3, "F"), _axis(2, "N")
    x = ng.placeholder([F, N], name="scope/inputs")
    assert not x.is_scalar and ng.sum(x, out_axes=()).is_scalar
    assert x.has_axes and x.shape is x.axes and x.axes.lengths == (3, 2)
    assert not ng.assign(ng.variable([F], initial_value=0), 1.0).has_axes  # no value
    assert x.shape_dict() == {"F": 3, "N": 2}
    assert x.short_name == "inputs"
    assert "inputs" in x.graph_label
    e = ng.exp(x).named("e")
    assert e.name == "e" and isinstance(e, ng.Op)


def test_mean_method_and_insert_axis(transformer):
    F, N, K = _axis(3, "F"), _axis(2, "N"), _axis(4, "K")
    x = ng.placeholder([F, N])
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    means = transformer.computation(x.mean(out_axes=[N]), x)(data)
    np.testing.assert_allclose(means, data.mean(axis=0))
    widened = x.insert_axis(1, K)
    assert widened.axes == ng.make_axes([F, K, N])
    got = transformer.computation(widened, x)(data)
    np.testing.assert_array_equal(got, np.broadcast_to(data[:, None, :], (3, 4, 2)))


# -- assign sugar -------------------------------------------------------------------------

def test_setitem_on_a_stored_tensor_is_an_assign(transformer):
    F = _axis(4, "F")
    w = ng.variable([F], initial_value=np.arange(4.0))
    w[1:3] = 10.0
    np.testing.assert_array_equal(transformer.computation(w)(), [0.0, 10.0, 10.0, 3.0])


@pytest.mark.parametrize("in_place, numpy_operator", [
    (operator.iadd, np.add), (operator.isub, np.subtract), (operator.imul, np.multiply),
    (operator.itruediv, np.true_divide)])
def test_inplace_operator_on_a_stored_tensor_is_an_assign(transformer, in_place,
                                                          numpy_operator):
    """v0.4: ``w += v`` is ``SetItem(w, :, w + v)``, and w then names that assign op
    (`operator.iadd(w, v)` is what ``w += v`` calls)."""
    F = _axis(3, "F")
    start, step = np.array([2.0, -4.0, 8.0]), np.array([0.5, 2.0, -1.0])
    tensor = ng.variable([F], initial_value=start)
    update = in_place(tensor, ng.constant(step, axes=[F]))
    assert isinstance(update, ng.AssignOp) and not update.is_tensor_op
    assert update.tensor is tensor and update in tensor.user_deps
    run = transformer.computation(update)
    read = transformer.computation(tensor)
    assert run() is None
    expected = numpy_operator(start, step)
    np.testing.assert_allclose(read(), numpy_operator(expected, step), rtol=1e-6)  # reads run it
    np.testing.assert_allclose(read(), numpy_operator(numpy_operator(expected, step), step),
                               rtol=1e-6)


def test_inplace_update_runs_after_the_reads_built_before_it(transformer):
    """Assign ordering: a read built before ``w += 1`` sees the old value, one built after
    it the new one, and both in the same call."""
    F = _axis(2, "F")
    w = ng.variable([F], initial_value=np.array([1.0, 2.0]))
    tensor = w
    before = tensor * 10.0
    w += 1.0
    after = tensor * 10.0
    step = transformer.computation([before, w, after])
    old, none, new = step()
    assert none is None
    np.testing.assert_array_equal(old, [10.0, 20.0])
    np.testing.assert_array_equal(new, [20.0, 30.0])
    old, _, new = step()
    np.testing.assert_array_equal(old, [20.0, 30.0])
    np.testing.assert_array_equal(new, [30.0, 40.0])


def test_inplace_update_kept_aside_runs_only_when_named(transformer):
    F = _axis(2, "F")
    w = ng.variable([F], initial_value=0.0)
    tensor = w
    with ng.Op.saved_user_deps():
        w += 1.0
    peek, train = transformer.computation(tensor), transformer.computation([tensor, w])
    np.testing.assert_array_equal(peek(), [0.0, 0.0])
    np.testing.assert_array_equal(train()[0], [1.0, 1.0])
    np.testing.assert_array_equal(peek(), [1.0, 1.0])


def test_inplace_operators_refuse_what_cannot_be_assigned():
    F = _axis(2, "F")
    x = ng.placeholder([F])
    y = x * 1.0
    with pytest.raises(ng.GraphError, match=r"Multiply\S* \*= .*not a stored tensor.*"
                                            r"`x = x \* \.\.\.`") as caught:
        y *= 3.0
    assert caught.value.location[0] == __file__
    c = ng.constant(np.ones(2), axes=[F])
    with pytest.raises(ng.GraphError, match="is a constant"):
        c -= 1.0
    w = ng.variable([F], initial_value=0.0)
    w += 1.0
    with pytest.raises(ng.GraphError, match="the assign to variable"):
        w += 1.0


# -- numerics helpers ---------------------------------------------------------------------

def test_cross_entropies_take_usebits(transformer):
    Y, N = _axis(3, "Y"), _axis(2, "N")
    p = np.array([[0.2, 0.5], [0.3, 0.25], [0.5, 0.25]])
    t = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    y_op, t_op = ng.placeholder([Y, N]), ng.placeholder([Y, N])
    multi = transformer.computation(ng.cross_entropy_multi(y_op, t_op, usebits=True),
                                    y_op, t_op)(p, t)
    np.testing.assert_allclose(multi, -(t * np.log2(p)).sum(axis=0), rtol=1e-5)
    binary = transformer.computation(ng.cross_entropy_binary(y_op, t_op, usebits=True),
                                     y_op, t_op)(p, t)
    expected = -(t * np.log(p) + (1 - t) * np.log(1 - p)).sum(axis=0) / math.log(2)
    np.testing.assert_allclose(binary, expected, rtol=1e-5)


def test_safelog_takes_a_limit(transformer):
    F = _axis(3, "F")
    x = ng.placeholder([F])
    data = np.array([0.0, 1e-5, 2.0], np.float32)
    got = transformer.computation(ng.safelog(x, limit=1e-3), x)(data)
    np.testing.assert_allclose(got, np.log(np.maximum(data, 1e-3)), rtol=1e-6)
    default = transformer.computation(ng.safelog(x), x)(data)
    np.testing.assert_allclose(default, np.log(np.maximum(data, np.exp(-50.0))), rtol=1e-5)


def test_types_module_names_the_classes():
    import axgraph.types as types

    F = _axis(2, "F")
    x = ng.placeholder([F])
    assert isinstance(x, types.AssignableTensorOp) and isinstance(x * 2, types.TensorOp)
    assert isinstance(x * 2, types.ElementWiseOp) and isinstance(F, types.Axis)
    assert isinstance(ng.sum(x, out_axes=()), types.ReductionOp)


# -- the transformer API ------------------------------------------------------------------

def test_transformer_factories():
    with ngt.make_transformer() as default:
        assert default.transformer_name == "numpy"
    factory = ngt.make_transformer_factory("interpreter")
    assert factory.name == "interpreter"
    previous = ngt.get_transformer_factory()
    ngt.set_transformer_factory(factory)
    try:
        with ngt.make_transformer() as made:
            assert made.transformer_name == "interpreter"
    finally:
        ngt.set_transformer_factory(previous)
    with ngt.allocate_transformer("cpu") as cpu:
        assert cpu.transformer_name == "cpu"
    with pytest.raises(ValueError, match="no-such-backend"):
        ngt.make_transformer_factory("no-such-backend")


def test_transformer_lists_its_computations_and_executor_runs(transformer):
    F = _axis(2, "F")
    x = ng.placeholder([F])
    first = transformer.computation(x + 1.0, x)
    second = transformer.computation(x * 3.0, x)
    assert transformer.computations == [first, second]
    np.testing.assert_array_equal(second.executor(np.ones(2)), [3.0, 3.0])


def test_testing_executor_is_callable_directly_and_as_a_context(backend):
    F = _axis(3, "F")
    x = ng.placeholder([F])
    square = executor(x * x, x, backend=backend)
    np.testing.assert_array_equal(square(np.arange(3.0)), [0.0, 1.0, 4.0])
    with executor(x + 1.0, x, backend=backend) as plus_one:
        np.testing.assert_array_equal(plus_one(np.arange(3.0)), [1.0, 2.0, 3.0])
    with pytest.raises(ng.TransformerClosedError):
        plus_one(np.arange(3.0))
