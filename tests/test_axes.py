"""Unit tests of Axis / Axes (seed 000): identity, duals, set algebra, flags, names."""
import numpy as np
import pytest

import axgraph as ng
from axgraph.axes import DualAxis, FlattenedAxis



# -- identity -----------------------------------------------------------------

def test_axes_with_equal_names_and_lengths_are_different_axes():
    a = ng.make_axis(length=3, name="H")
    b = ng.make_axis(length=3, name="H")
    assert a is not b
    assert a != b
    assert a in ng.make_axes([a])
    assert b not in ng.make_axes([a])
    assert ng.make_axes([a]) != ng.make_axes([b])
    assert not ng.make_axes([a]).is_equal_set([b])
    # Both can live in one Axes: they are different axes.
    both = ng.make_axes([a, b])
    assert len(both) == 2 and both[0] is a and both[1] is b


def test_same_named_axes_never_pair_in_elementwise(transformer, rng):
    a = ng.make_axis(length=2, name="H")
    b = ng.make_axis(length=2, name="H")
    xv, yv = rng.standard_normal(2), rng.standard_normal(2)
    z = ng.constant(xv, [a]) + ng.constant(yv, [b])
    assert z.axes == ng.make_axes([a, b])
    np.testing.assert_allclose(transformer.computation(z)(), xv[:, None] + yv[None, :],
                               rtol=1e-6)


def test_same_named_axes_never_pair_in_dot(transformer, rng):
    a = ng.make_axis(length=3, name="K")
    b = ng.make_axis(length=3, name="K")
    xv, yv = rng.standard_normal(3), rng.standard_normal(3)
    d = ng.dot(ng.constant(xv, [a]), ng.constant(yv, [b]))
    # No pairing by name: an outer product, not an inner product.
    assert d.axes == ng.make_axes([a, b])
    np.testing.assert_allclose(transformer.computation(d)(), np.outer(xv, yv), rtol=1e-6)


def test_same_named_axis_is_not_accepted_by_reduction():
    a = ng.make_axis(length=3, name="H")
    b = ng.make_axis(length=3, name="H")
    x = ng.placeholder([a])
    with pytest.raises(ng.UnmatchedAxesError):
        ng.sum(x, reduction_axes=[b])


# -- dual axes ----------------------------------------------------------------

def test_dual_of_dual_returns_the_base_axis():
    C = ng.make_axis(length=4, name="C")
    assert (C - 1) + 1 is C
    assert (C + 1) - 1 is C
    assert C + 0 is C
    assert C - 0 is C


def test_duals_are_cached_objects():
    C = ng.make_axis(length=4, name="C")
    assert C - 1 is C - 1
    assert C + 1 is C + 1
    assert (C - 1) - 1 is C - 2
    assert (C + 2) - 3 is C - 1
    assert C - 1 is not C + 1
    assert C - 1 is not C


def test_dual_properties():
    role = ng.make_axis_role(name="Channel")
    C = ng.make_axis(length=4, name="C", roles=[role], docstring="channels")
    d = C - 1
    assert isinstance(d, DualAxis)
    assert d.base is C
    assert d.dual_level == -1
    assert (C + 2).dual_level == 2
    assert C.dual_level == 0 and C.base is C
    assert d.name == "C-1"
    assert (C + 1).name == "C+1"
    assert d.has_role(role)
    assert d.docstring == "channels"


def test_duals_share_and_follow_the_base_length():
    C = ng.make_axis(name="C")
    minus, plus = C - 1, C + 1
    assert minus.length is None and plus.length is None
    C.length = 5
    assert minus.length == 5 and plus.length == 5
    plus.length = 7  # setting a dual's length sets the base's
    assert C.length == 7 and minus.length == 7


def test_dual_of_batch_axis_is_batch():
    N = ng.make_axis(length=2, name="N")
    assert (N - 1).is_batch
    REC = ng.make_axis(length=2, name="REC")
    assert (REC + 1).is_recurrent


def test_dual_offset_must_be_an_int():
    C = ng.make_axis(length=4)
    with pytest.raises(TypeError):
        C - 1.5
    with pytest.raises(TypeError):
        C + "1"


# -- names ----------------------------------------------------------------------

def test_unnamed_axes_get_unique_names():
    axes = [ng.make_axis(length=2) for _ in range(5)]
    names = [a.name for a in axes]
    assert all(isinstance(n, str) and n for n in names)
    assert len(set(names)) == 5


def test_explicit_name_is_kept():
    assert ng.make_axis(length=3, name="height").name == "height"


def test_batch_default_for_N_and_recurrent_for_REC():
    N = ng.make_axis(length=2, name="N")
    REC = ng.make_axis(length=2, name="REC")
    H = ng.make_axis(length=2, name="H")
    assert N.is_batch and N.batch and not N.is_recurrent
    assert REC.is_recurrent and REC.recurrent and not REC.is_batch
    assert not H.is_batch and not H.is_recurrent
    # explicit flags win over the naming convention
    assert not ng.make_axis(name="N", batch=False).is_batch
    assert ng.make_axis(name="B", batch=True).is_batch
    assert not ng.make_axis(name="REC", recurrent=False).is_recurrent
    assert ng.make_axis(name="T", recurrent=True).is_recurrent


def test_name_scope_names_auto_named_axes_and_roles():
    scope = ng.make_name_scope(name="s")
    assert scope.name == "s"
    assert isinstance(scope, ng.NameScope)
    scope.Q = ng.make_axis(length=4)
    scope.Role = ng.make_axis_role()
    scope.N = ng.make_axis()
    assert scope.Q.name == "Q"
    assert scope.Q.length == 4
    assert scope.Role.name == "Role"
    assert scope.N.name == "N" and scope.N.is_batch
    assert (scope.Q - 1).name == "Q-1"


# -- lengths --------------------------------------------------------------------

@pytest.mark.parametrize("bad", [-1, -10, 2.5, "3", True, [3]])
def test_invalid_length_raises(bad):
    with pytest.raises(ng.AxisLengthError):
        ng.make_axis(length=bad)


@pytest.mark.parametrize("bad", [-1, 1.5, "4", False])
def test_invalid_length_setter_raises(bad):
    H = ng.make_axis(length=2)
    with pytest.raises(ng.AxisLengthError):
        H.length = bad
    assert H.length == 2


def test_invalid_length_error_is_a_value_error():
    with pytest.raises(ValueError):
        ng.make_axis(length=-1)


def test_valid_lengths():
    assert ng.make_axis(length=0).length == 0
    n = ng.make_axis(length=np.int64(7)).length
    assert n == 7 and type(n) is int
    assert ng.make_axis().length is None
    H = ng.make_axis()
    H.length = 3
    assert H.length == 3


def test_axes_lengths_names_size():
    H = ng.make_axis(length=2, name="H")
    W = ng.make_axis(length=3, name="W")
    U = ng.make_axis(name="U")
    axes = ng.make_axes([H, W])
    assert axes.lengths == (2, 3)
    assert axes.names == ("H", "W")
    assert axes.size == 6
    assert ng.make_axes([H, U]).lengths == (2, None)
    assert ng.make_axes([H, U]).size is None
    assert ng.make_axes([]).size == 1
    assert len(axes) == 2 and list(axes) == [H, W]


# -- Axes construction and set algebra ---------------------------------------

@pytest.fixture
def hwn():
    return (ng.make_axis(length=2, name="H"), ng.make_axis(length=3, name="W"),
            ng.make_axis(length=4, name="N"))


def test_axes_from_axis_list_and_axes(hwn):
    H, W, N = hwn
    axes = ng.make_axes([H, W])
    assert isinstance(axes, ng.Axes)
    assert ng.make_axes(axes) == axes
    assert ng.make_axes(H) == ng.make_axes([H])
    assert axes == [H, W] and axes == (H, W)
    assert axes != [W, H]
    assert axes[0] is H and axes[1] is W
    assert axes[1:] == ng.make_axes([W])
    assert not ng.make_axes([])


def test_axes_duplicate_raises(hwn):
    H, W, N = hwn
    with pytest.raises(ng.DuplicateAxisError):
        ng.make_axes([H, W, H])


def test_axes_rejects_non_axis(hwn):
    H, W, N = hwn
    with pytest.raises(TypeError):
        ng.make_axes([H, 3])


def test_axes_concat(hwn):
    H, W, N = hwn
    assert ng.make_axes([H]) + ng.make_axes([W, N]) == ng.make_axes([H, W, N])
    assert ng.make_axes([W]) + H == ng.make_axes([W, H])
    assert [N] + ng.make_axes([H]) == ng.make_axes([N, H])


def test_axes_concat_raises_on_duplicates(hwn):
    H, W, N = hwn
    with pytest.raises(ng.DuplicateAxisError):
        ng.make_axes([H, W]) + ng.make_axes([W, N])
    with pytest.raises(ng.DuplicateAxisError):
        [H] + ng.make_axes([H])


def test_axes_difference(hwn):
    H, W, N = hwn
    assert ng.make_axes([H, W, N]) - ng.make_axes([W]) == ng.make_axes([H, N])
    assert ng.make_axes([H, W, N]) - [N, H] == ng.make_axes([W])
    assert ng.make_axes([H, W]) - ng.make_axes([N]) == ng.make_axes([H, W])
    assert ng.make_axes([H]) - ng.make_axes([H]) == ng.make_axes([])


def test_axes_intersection_keeps_left_order(hwn):
    H, W, N = hwn
    assert ng.make_axes([H, W, N]) & ng.make_axes([N, H]) == ng.make_axes([H, N])
    assert ng.make_axes([N, H]) & ng.make_axes([H, W, N]) == ng.make_axes([N, H])
    assert ng.make_axes([H]) & ng.make_axes([W]) == ng.make_axes([])


def test_axes_union_keeps_left_then_new(hwn):
    H, W, N = hwn
    assert ng.make_axes([H, W]) | ng.make_axes([N, H]) == ng.make_axes([H, W, N])
    assert ng.make_axes([N, H]) | ng.make_axes([H, W]) == ng.make_axes([N, H, W])
    assert ng.make_axes([H]) | ng.make_axes([H]) == ng.make_axes([H])


def test_set_operations_do_not_match_by_name(hwn):
    H, W, N = hwn
    H2 = ng.make_axis(length=2, name="H")
    assert ng.make_axes([H, W]) - ng.make_axes([H2]) == ng.make_axes([H, W])
    assert ng.make_axes([H, W]) & ng.make_axes([H2]) == ng.make_axes([])
    assert ng.make_axes([H]) | ng.make_axes([H2]) == ng.make_axes([H, H2])


def test_is_equal_set(hwn):
    H, W, N = hwn
    assert ng.make_axes([H, W]).is_equal_set(ng.make_axes([W, H]))
    assert ng.make_axes([H, W]).is_equal_set([H, W])
    assert not ng.make_axes([H, W]).is_equal_set([H])
    assert not ng.make_axes([H]).is_equal_set([H, W])
    assert not ng.make_axes([H, W]).is_equal_set([H, N])


def test_index(hwn):
    H, W, N = hwn
    axes = ng.make_axes([H, W, N])
    assert axes.index(H) == 0
    assert axes.index(W) == 1
    assert axes.index(N) == 2
    with pytest.raises(ValueError):
        axes.index(ng.make_axis(length=3, name="W"))


def test_find_by_name(hwn):
    H, W, N = hwn
    W2 = ng.make_axis(length=5, name="W")
    axes = ng.make_axes([H, W, N, W2])
    found = axes.find_by_name("W")
    assert isinstance(found, ng.Axes)
    assert found == ng.make_axes([W, W2])
    assert axes.find_by_name("H") == ng.make_axes([H])
    assert axes.find_by_name("nope") == ng.make_axes([])


def test_batch_sample_recurrent_axes():
    N = ng.make_axis(length=8, name="N")
    REC = ng.make_axis(length=5, name="REC")
    C = ng.make_axis(length=3, name="C")
    axes = ng.make_axes([C, REC, N])
    assert axes.batch_axes() == ng.make_axes([N])
    assert axes.batch_axis() is N
    assert axes.sample_axes() == ng.make_axes([C, REC])
    assert axes.recurrent_axis() is REC
    plain = ng.make_axes([C])
    assert plain.batch_axes() == ng.make_axes([])
    assert plain.batch_axis() is None
    assert plain.sample_axes() == plain
    assert plain.recurrent_axis() is None


def test_axes_contains_by_identity(hwn):
    H, W, N = hwn
    axes = ng.make_axes([H, W])
    assert H in axes and W in axes
    assert N not in axes
    assert (H - 1) not in axes


# -- FlattenedAxis ----------------------------------------------------------------

def test_flattened_axis_length_is_product(hwn):
    H, W, N = hwn
    f = FlattenedAxis.of([H, W, N])
    assert f.length == 2 * 3 * 4
    assert f.axes == ng.make_axes([H, W, N])
    assert isinstance(f, ng.Axis)


def test_flattened_axis_of_returns_same_object(hwn):
    H, W, N = hwn
    f1 = FlattenedAxis.of([H, W])
    f2 = FlattenedAxis.of(ng.make_axes([H, W]))
    assert f1 is f2
    assert ng.make_axes([H, W]).flatten() is f1
    assert FlattenedAxis.of([W, H]) is not f1


def test_flattened_axis_follows_unknown_lengths():
    A = ng.make_axis(name="A")
    B = ng.make_axis(length=3, name="B")
    f = FlattenedAxis.of([A, B])
    assert f.length is None
    A.length = 5
    assert f.length == 15


def test_flattened_axis_length_cannot_be_set(hwn):
    H, W, N = hwn
    f = FlattenedAxis.of([H, W])
    with pytest.raises(ng.AxisLengthError):
        f.length = 6


def test_flattened_axis_is_batch_if_a_part_is(hwn):
    H, W, N = hwn
    assert FlattenedAxis.of([H, N]).is_batch
    assert not FlattenedAxis.of([H, W]).is_batch


# -- roles ----------------------------------------------------------------------

def test_roles():
    height = ng.make_axis_role(name="Height")
    width = ng.make_axis_role(name="Width")
    assert isinstance(height, ng.AxisRole)
    H = ng.make_axis(length=2, roles=[height])
    W = ng.make_axis(length=3, roles=[width])
    assert H.has_role(height) and not H.has_role(width)
    axes = ng.make_axes([H, W])
    assert axes.find_by_role(width) == ng.make_axes([W])
    with pytest.raises(TypeError):
        ng.make_axis(roles=["Height"])
