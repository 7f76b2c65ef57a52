"""Nervana Graph v0.4's axes API: name scopes, flattened and derived axes, axis helpers."""
import numpy as np
import pytest

import axgraph as ng


def test_name_scope_as_a_namespace_names_what_it_holds():
    ax = ng.name_scope("x")
    ax.N = ng.make_axis(length=4)
    ax.F = ng.make_axis(length=3)
    assert (ax.N.name, ax.F.name) == ("N", "F")
    assert ax.N.is_batch and not ax.F.is_batch


def test_name_scope_as_a_context_nests_and_is_current_inside():
    assert ng.get_current_name_scope() is None
    with ng.name_scope("layer") as layer:
        assert ng.get_current_name_scope() is layer
        inner = ng.name_scope("inner")
        with inner:
            assert ng.get_current_name_scope() is inner
        assert ng.get_current_name_scope() is layer
    assert ng.get_current_name_scope() is None
    assert layer.inner is inner


def test_with_name_scope_calls_in_a_fresh_scope():
    @ng.with_name_scope
    def build(scope, n):
        return scope, ng.get_current_name_scope(), n

    scope, current, n = build(3)
    assert scope is current and scope.name == "build" and n == 3
    assert build(1, name="other")[0].name == "other"


def test_flattened_axis_constructor_is_the_cached_axis():
    A, B = ng.make_axis(length=3, name="A"), ng.make_axis(length=2, name="B")
    flat = ng.FlattenedAxis([A, B])
    assert flat.length == 6 and flat is ng.FlattenedAxis.of([A, B])
    assert ng.FlattenedAxis([B, A]) is not flat


def test_make_axes_flattens_nested_groups(transformer):
    A, B, C = (ng.make_axis(length=n, name=name) for n, name in ((2, "A"), (3, "B"), (4, "C")))
    axes = ng.make_axes([A, (B, C)])
    assert axes[0] is A and axes[1] is ng.FlattenedAxis.of([B, C]) and axes.lengths == (2, 12)
    x = ng.placeholder([A, B, C])
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    flat = transformer.computation(ng.flatten(x, axes), x)(data)
    np.testing.assert_array_equal(flat, data.reshape(2, 12))


def test_an_op_where_axes_are_expected_is_a_type_error():
    A = ng.make_axis(length=3, name="A")
    x = ng.placeholder([A], name="inputs")
    with pytest.raises(ng.AxgraphTypeError, match="inputs.axes") as info:
        ng.placeholder(x)
    assert "test_axes_nervana.py" in str(info.value)
    with pytest.raises(TypeError):
        list(x)


def test_sliced_axes_keep_the_batch_flag_and_refuse_step_zero():
    N = ng.make_axis(length=8, name="N")
    sliced = ng.SlicedAxis(N, slice(2, 6))
    assert sliced.length == 4 and sliced.is_batch
    assert ng.SlicedAxis(N, slice(None, None, -2)).length == 4
    y = ng.placeholder([N])
    assert y[1:5].axes[0].is_batch and y[1:5].axes[0].length == 4
    with pytest.raises(ng.AxgraphError):
        ng.SlicedAxis(N, slice(0, 4, 0))
    assert ng.PaddedAxis(N, (1, 2)).length == 11


def test_axis_helpers():
    role = ng.make_axis_role("Channel")
    A = ng.make_axis(length=3, name="scope.A")
    assert A.add_role(role) is A and A.has_role(role)
    assert A.short_name == "A"
    assert A.T is A - 1 and A.T.T is A and (A - 1).primary_axis is A


def test_axes_helpers():
    role = ng.make_axis_role("Time")
    A, B = ng.make_axis(length=3, name="A"), ng.make_axis(length=None, name="B")
    R = ng.make_axis(length=5, name="REC", roles=[role])
    axes = ng.make_axes([A, B, R])
    assert axes.role_axes(role) == ng.make_axes([R])
    assert axes.recurrent_axes() == ng.make_axes([R])
    assert axes.get_dual() == ng.make_axes([A - 1, B - 1, R - 1])
    assert axes.intersect([B, A]) == ng.make_axes([A, B])
    assert axes.has_same_axes([R, A, B]) and not axes.has_same_axes([A, B])
    ng.make_axes([B]).set_shape((7,))
    assert B.length == 7 and axes.size == 3 * 7 * 5
    with pytest.raises(ng.AxisLengthError):
        axes.set_shape((1, 2))


def test_a_constant_without_axes_pairs_by_length_like_v04(transformer):
    H, W = ng.make_axis(length=2, name="H"), ng.make_axis(length=3, name="W")
    x = ng.placeholder([H, W])
    row = np.array([1.0, 2.0, 3.0])
    c = ng.constant(row)
    data = np.arange(6.0).reshape(2, 3)
    left, right = x + c, c * x
    assert left.axes == ng.make_axes([H, W]) and right.axes == ng.make_axes([W, H])
    got_left, got_right = transformer.computation([left, right], x)(data)
    np.testing.assert_allclose(got_left, data + row)
    np.testing.assert_allclose(got_right, (row * data).T)


def test_match_on_length_axes_pair_and_ambiguity_is_refused():
    A, B = ng.make_axis(length=3, name="A"), ng.make_axis(length=3, name="B")
    free = ng.make_axis(length=3, match_on_length=True)
    x = ng.placeholder([A])
    assert (x + ng.placeholder([free])).axes == ng.make_axes([A])
    with pytest.raises(ng.IncompatibleAxesError, match="ng.constant"):
        ng.placeholder([A, B]) + ng.constant(np.ones(3))
    plain = ng.make_axis(length=3, name="P")
    assert (x + ng.placeholder([plain])).axes == ng.make_axes([A, plain])  # identity otherwise


# -- Nervana Graph v0.4's axes API ------------------------------------------------------------

def test_make_axis_takes_v04_positional_order_and_keywords():
    B = ng.make_axis(4, "B", True)
    assert (B.length, B.name, B.is_batch, B.is_recurrent) == (4, "B", True, False)
    T = ng.make_axis(6, "T", False, True)
    assert not T.is_batch and T.is_recurrent
    role = ng.make_axis_role("Height")
    free = ng.make_axis(3, "F", None, None, True, [role], "doc")
    assert free.match_on_length and free.has_role(role) and free.docstring == "doc"
    assert not ng.make_axis(3, "N", False).is_batch  # the flag wins over the name
    keyword = ng.make_axis(length=2, name="K", roles=[role], recurrent=True)
    assert keyword.is_recurrent and keyword.has_role(role) and not keyword.is_batch
    assert ng.axis(4, "B2", True).is_batch
    with pytest.raises(ng.AxgraphTypeError, match="roles=") as info:
        ng.make_axis(3, "H", [role])  # roles where v0.4 put batch: refused, not a batch axis
    assert "test_axes_nervana.py" in str(info.value)


def test_append_and_insert_change_an_axes_in_place(transformer):
    A, B, C = (ng.make_axis(n, name) for n, name in ((2, "A"), (3, "B"), (4, "C")))
    axes = ng.make_axes([A])
    assert axes.append(B) is None and list(axes) == [A, B]
    axes.insert(0, C)
    assert list(axes) == [C, A, B] and axes.lengths == (4, 2, 3)
    axes.insert(-1, ng.make_axis(1, "D"))
    assert axes.names == ("C", "A", "D", "B")
    with pytest.raises(ng.DuplicateAxisError):
        axes.append(A)
    assert axes.names == ("C", "A", "D", "B")  # a refused change leaves it as it was
    # v0.4's idiom: build the axes up, then use them.
    out_axes = ng.make_axes([A])
    out_axes.append(B)
    x = ng.placeholder([A])
    data = np.array([1.0, -2.0], dtype=np.float32)
    got = transformer.computation(ng.broadcast(x, out_axes), x)(data)
    np.testing.assert_array_equal(got, np.broadcast_to(data[:, None], (2, 3)))


def test_axes_something_relies_on_refuse_to_change_and_say_how_to_copy():
    A, B = ng.make_axis(2, "A"), ng.make_axis(3, "B")
    x = ng.placeholder([A])
    with pytest.raises(ng.AxesError, match=r"axes of the AssignableTensorOp op made at .*"
                                           r"ng\.make_axes") as info:
        x.axes.append(B)
    assert "test_axes_nervana.py" in str(info.value)
    assert list(x.axes) == [A]
    copy = ng.make_axes(x.axes)
    copy.append(B)
    assert list(copy) == [A, B] and list(x.axes) == [A]
    total = ng.sum(ng.placeholder([A, B]), reduction_axes=[B])
    with pytest.raises(ng.AxesError, match="reduction_axes"):
        total.reduction_axes.insert(0, ng.make_axis(5, "E"))
    assert list(total.reduction_axes) == [B]
    with pytest.raises(ng.AxesError, match="flattened axis"):
        ng.make_axes([A, B]).flatten().axes.append(ng.make_axis(5, "E"))
    hashed = ng.make_axes([A])
    lookup = {hashed: "a"}
    with pytest.raises(ng.AxesError, match="hashed"):
        hashed.append(B)
    assert lookup[ng.make_axes([A])] == "a"
    with pytest.raises(ng.AxesError, match="tensor description"):
        ng.TensorDescription([A, B]).axes.append(ng.make_axis(5, "E"))
    user_axes = ng.make_axes([A, B])
    y = ng.placeholder(user_axes)
    user_axes.append(ng.make_axis(5, "E"))  # the op took a copy: the user's axes stay free
    assert list(y.axes) == [A, B] and len(user_axes) == 3


def test_find_gives_the_index_of_a_run_of_axes():
    A, B, C, D = (ng.make_axis(n, name) for n, name in ((2, "A"), (3, "B"), (4, "C"), (5, "D")))
    axes = ng.make_axes([A, B, C, D])
    assert axes.find([B, C]) == 1 and axes.find(D) == 3 and axes.find([A]) == 0
    assert ng.Axes.find(axes, [C, D]) == 2  # v0.4 called it on the class too
    assert axes.find_axis(C) == 2
    with pytest.raises(ng.IncompatibleAxesError, match="next to each other"):
        axes.find([A, C])
    with pytest.raises(ng.IncompatibleAxesError):
        axes.find([C, B])


def test_shape_dict_maps_short_names_to_lengths():
    A, B = ng.make_axis(2, "scope.A"), ng.make_axis(None, "B")
    assert ng.make_axes([A, B]).shape_dict() == {"A": 2, "B": None}
    assert ng.make_axes([]).shape_dict() == {}
    other = ng.make_axis(2, "A")
    with pytest.raises(ng.AxesError, match="two different axes are named A") as info:
        ng.make_axes([A, other]).shape_dict()
    assert str(info.value).count("test_axes_nervana.py") == 3  # both axes' lines, and this one


def test_flatten_of_one_axis_is_that_axis():
    A, B = ng.make_axis(2, "A"), ng.make_axis(3, "B")
    assert ng.make_axes([A]).flatten() is A
    forced = ng.make_axes([A]).flatten(force=True)
    assert isinstance(forced, ng.FlattenedAxis) and list(forced.axes) == [A]
    both = ng.make_axes([A, B]).flatten()
    assert both.length == 6 and both is ng.FlattenedAxis([A, B])


def test_axis_get_dual_defaults_to_minus_one_and_axis_axes():
    A = ng.make_axis(3, "A")
    assert A.get_dual() is A - 1 and (A - 1).get_dual() is A - 2 and A.get_dual(1) is A + 1
    assert A.get_dual(0) is A
    assert list(A.axes) == [A] and A.axes.lengths == (3,)
    B = ng.make_axis(2, "B")
    flat = ng.FlattenedAxis([A, B])
    assert list(flat.axes) == [A, B]  # a flattened axis gives its parts
