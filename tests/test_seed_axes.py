"""Every code example of seed 000 ("Axes"), with the outputs the seed states.

Values are checked against NumPy computed independently: broadcasting and
transposes are written out by hand, contractions with np.einsum.
"""
import numpy as np
import pytest

import axgraph as ng
import axgraph.frontends.neon
import axgraph.frontends.neon.axis

RTOL = 1e-5



def run(transformer, results, *params, **kwargs):
    return transformer.computation(results, *params)(**kwargs)


def names(axes):
    return tuple(a.name for a in axes)


# -- Axis and Axes ---------------------------------------------------------------

def test_make_axis_and_make_axes():
    H = ng.make_axis(length=3, name='height')
    W = ng.make_axis(length=4, name='width')
    assert isinstance(H, ng.Axis)
    assert (H.name, H.length) == ('height', 3)
    assert (W.name, W.length) == ('width', 4)
    axes = ng.make_axes([H, W])
    assert isinstance(axes, ng.Axes)
    assert list(axes) == [H, W]
    assert axes.lengths == (3, 4)


def test_placeholder_with_axes(transformer, rng):
    H = ng.make_axis(length=3, name='height')
    W = ng.make_axis(length=4, name='width')
    axes = ng.make_axes([H, W])
    image = ng.placeholder(axes)
    assert image.axes == axes
    assert image.axes.lengths == (3, 4)
    value = rng.standard_normal((3, 4))
    np.testing.assert_allclose(transformer.computation(image * 2, image)(value),
                               value * 2, rtol=RTOL)


def test_delayed_length_as_written_in_seed():
    H = ng.make_axis(length=3, name='height')
    W = ng.make_axis(length=4, name='width')
    image = ng.placeholder([H, W])
    H.length = 3
    W.length = 4
    assert image.axes.lengths == (3, 4)


def test_delayed_length_set_after_the_placeholder(transformer, rng):
    H = ng.make_axis(name='height')
    W = ng.make_axis(name='width')
    image = ng.placeholder([H, W])
    assert image.axes.lengths == (None, None)
    H.length = 3
    W.length = 4
    assert image.axes.lengths == (3, 4)
    value = rng.standard_normal((3, 4))
    comp = transformer.computation(image + 1, image)
    np.testing.assert_allclose(comp(value), value + 1, rtol=RTOL)
    with pytest.raises(ng.FeedError):
        comp(rng.standard_normal((4, 3)))


def test_axis_roles():
    role_channel = ng.make_axis_role(name="Channel")
    axis_channel = ng.axis(length=3, roles=[role_channel], name="my_axis")
    assert isinstance(role_channel, ng.AxisRole)
    assert role_channel.name == "Channel"
    assert isinstance(axis_channel, ng.Axis)
    assert axis_channel.name == "my_axis"
    assert axis_channel.length == 3
    assert role_channel in axis_channel.roles
    assert axis_channel.has_role(role_channel)
    assert not axis_channel.has_role(ng.make_axis_role(name="Channel"))


def test_neon_frontend_roles_by_name():
    ar = axgraph.frontends.neon.ar
    for role_name in ["Height", "Width", "Depth", "Channel", "Channelout", "Time"]:
        role = getattr(ar, role_name)
        assert isinstance(role, ng.AxisRole)
        assert role.name == role_name


# -- dual offsets: the A/B example -------------------------------------------------

def test_dual_offset_placeholders_dot(transformer, rng):
    ax = axgraph.frontends.neon.ax
    A = ng.placeholder([ax.C, ax.H, ax.W, ax.N])
    B = ng.placeholder([ax.K, ax.C - 1, ax.H - 1, ax.W - 1])
    result = ng.dot(B, A)
    assert list(result.axes) == [ax.K, ax.N]
    a = rng.standard_normal((2, 3, 4, 5))  # C, H, W, N
    b = rng.standard_normal((6, 2, 3, 4))  # K, C, H, W
    value = transformer.computation(result, A, B)(a, b)
    assert value.shape == (6, 5)
    np.testing.assert_allclose(value, np.einsum('kchw,chwn->kn', b, a), rtol=RTOL)


def test_dual_offset_direction_A_dot_B_pairs_nothing():
    # Direction rule: a left axis X+k pairs with the right axis X+k+1 (or X+k itself).
    # In dot(A, B), A's C would need C+1 (or C) in B, which has only C-1.
    ax = axgraph.frontends.neon.ax
    A = ng.placeholder([ax.C, ax.H, ax.W, ax.N])
    B = ng.placeholder([ax.K, ax.C - 1, ax.H - 1, ax.W - 1])
    result = ng.dot(A, B)
    assert list(result.axes) == list(A.axes) + list(B.axes)


# -- the order of axes does not matter: ng.equal on transposed constants -------------

def test_equal_on_transposed_constants(transformer, rng):
    H = ng.make_axis(length=2)
    W = ng.make_axis(length=3)
    np_val = rng.random((2, 3))
    x = ng.constant(np_val, [H, W])
    y = ng.constant(np_val.T, [W, H])
    z = ng.equal(x, y)
    comp = transformer.computation([z])
    z_val = comp()[0]
    assert z_val.shape == (2, 3)
    assert z_val.dtype == np.bool_
    np.testing.assert_array_equal(z_val, np.ones((2, 3), dtype=bool))


def test_equal_on_transposed_constants_detects_difference(transformer, rng):
    H = ng.make_axis(length=2)
    W = ng.make_axis(length=3)
    np_val = rng.random((2, 3))
    other = np_val.T.copy()
    other[2, 1] += 1.0  # the element at (H=1, W=2)
    z = ng.equal(ng.constant(np_val, [H, W]), ng.constant(other, [W, H]))
    expected = np.ones((2, 3), dtype=bool)
    expected[1, 2] = False
    np.testing.assert_array_equal(transformer.computation([z])()[0], expected)


# -- an axis can occur at most once ------------------------------------------------

def test_repeated_axis_raises():
    H = ng.make_axis(length=2)
    with pytest.raises(ng.DuplicateAxisError):
        ng.constant(np.ones((2, 2)), [H, H])


def test_distinct_axes_are_fine(transformer):
    H = ng.make_axis(length=2)
    W = ng.make_axis(length=2)
    x = ng.constant(np.ones((2, 2)), [H, W])
    assert list(x.axes) == [H, W]
    np.testing.assert_array_equal(run(transformer, x), np.ones((2, 2)))


# -- axes have context: the name scopes ar / ax ------------------------------------

NEON_AXES = {
    # name: (role name or None, docstring)
    "N": (None, "minibatch size"),
    "C": ("Channel", "number of input feature maps"),
    "D": ("Depth", "input image depth"),
    "H": ("Height", "input image height"),
    "W": ("Width", "input image width"),
    "R": ("Height", "filter height"),
    "S": ("Width", "filter width"),
    "T": ("Depth", "filter depth"),
    "J": ("Channel", "filter channel size (for crossmap pooling)"),
    "K": ("Channelout", "number of output feature maps"),
    "M": ("Depth", "output image depth"),
    "P": ("Height", "output image height"),
    "Q": ("Width", "output image width"),
    "REC": ("Time", "recurrent axis"),
    "Y": (None, "target"),
}


def test_neon_ax_is_the_same_object_in_both_modules():
    assert axgraph.frontends.neon.ax is axgraph.frontends.neon.axis.ax
    assert axgraph.frontends.neon.ar is axgraph.frontends.neon.axis.ar
    assert axgraph.frontends.neon.ax.name == "ax"
    assert axgraph.frontends.neon.ar.name == "ar"


@pytest.mark.parametrize("module", [axgraph.frontends.neon, axgraph.frontends.neon.axis],
                         ids=["neon", "neon.axis"])
@pytest.mark.parametrize("axis_name", sorted(NEON_AXES))
def test_neon_standard_axes(module, axis_name):
    ax, ar = module.ax, module.ar
    role_name, docstring = NEON_AXES[axis_name]
    axis = getattr(ax, axis_name)
    assert isinstance(axis, ng.Axis)
    assert axis.name == axis_name
    assert axis.docstring == docstring
    if role_name is None:
        assert axis.roles == frozenset()
    else:
        assert axis.roles == frozenset([getattr(ar, role_name)])
    assert axis.is_batch == (axis_name == "N")
    assert axis.is_recurrent == (axis_name == "REC")


def test_name_scopes_as_written_in_seed():
    ar = ng.make_name_scope(name="ar")
    ar.Height = ng.make_axis_role()
    ar.Width = ng.make_axis_role()
    ar.Depth = ng.make_axis_role()
    ar.Channel = ng.make_axis_role()
    ar.Channelout = ng.make_axis_role()
    ar.Time = ng.make_axis_role()
    for role_name in ["Height", "Width", "Depth", "Channel", "Channelout", "Time"]:
        assert getattr(ar, role_name).name == role_name

    ax = ng.make_name_scope(name="ax")
    ax.N = ng.make_axis(batch=True, docstring="minibatch size")
    ax.C = ng.make_axis(roles=[ar.Channel], docstring="number of input feature maps")
    ax.H = ng.make_axis(roles=[ar.Height], docstring="input image height")
    ax.K = ng.make_axis(roles=[ar.Channelout], docstring="number of output feature maps")
    ax.REC = ng.make_axis(roles=[ar.Time], recurrent=True, docstring="recurrent axis")
    ax.Y = ng.make_axis(docstring="target")
    assert [ax.N.name, ax.C.name, ax.H.name, ax.K.name, ax.REC.name, ax.Y.name] == \
        ["N", "C", "H", "K", "REC", "Y"]
    assert ax.N.is_batch and not ax.C.is_batch
    assert ax.REC.is_recurrent and not ax.Y.is_recurrent
    assert ax.C.has_role(ar.Channel) and ax.REC.has_role(ar.Time)
    assert ax.C.docstring == "number of input feature maps"
    assert ax.N.length is None
    # These are new axes, not the library's standard ones.
    assert ax.C is not axgraph.frontends.neon.ax.C


# -- elementwise binary ops ---------------------------------------------------------

@pytest.fixture
def axes4():
    """H, W, N, C with distinct lengths, so a wrong order shows as a wrong shape."""
    return {
        "H": ng.make_axis(length=2, name="H"),
        "W": ng.make_axis(length=3, name="W"),
        "N": ng.make_axis(length=4, name="N"),
        "C": ng.make_axis(length=5, name="C"),
    }


def const(axes4, rng, spec):
    axes = [axes4[c] for c in spec]
    value = rng.standard_normal(tuple(a.length for a in axes))
    return value, ng.constant(value, axes)


ELEMENTWISE_LINES = [
    # (left, right, result, NumPy reference written by hand)
    # when matches, output the same axis
    ("H", "H", "H", lambda a, b: a + b),
    ("HW", "HW", "HW", lambda a, b: a + b),
    # automatic broadcasting / dim shuffle
    ("HW", "H", "HW", lambda a, b: a + b[:, None]),
    ("HW", "W", "HW", lambda a, b: a + b[None, :]),
    ("HW", "WN", "HWN", lambda a, b: a[:, :, None] + b[None, :, :]),
    ("HW", "NW", "HWN", lambda a, b: a[:, :, None] + b.T[None, :, :]),
    ("CH", "WHN", "CHWN",
     lambda a, b: a[:, :, None, None] + np.transpose(b, (1, 0, 2))[None, :, :, :]),
    # commutative property
    ("H", "W", "HW", lambda a, b: a[:, None] + b[None, :]),
    ("W", "H", "WH", lambda a, b: a[:, None] + b[None, :]),
    ("C", "HW", "CHW", lambda a, b: a[:, None, None] + b[None, :, :]),
    ("HW", "C", "HWC", lambda a, b: a[:, :, None] + b[None, None, :]),
]


@pytest.mark.parametrize("left, right, out, reference", ELEMENTWISE_LINES,
                         ids=[f"{l}+{r}->{o}" for l, r, o, _ in ELEMENTWISE_LINES])
def test_elementwise_broadcasting(transformer, rng, axes4, left, right, out, reference):
    a, x = const(axes4, rng, left)
    b, y = const(axes4, rng, right)
    z = x + y
    assert list(z.axes) == [axes4[c] for c in out]
    value = run(transformer, z)
    expected = reference(a, b)
    assert value.shape == tuple(axes4[c].length for c in out)
    np.testing.assert_allclose(value, expected, rtol=RTOL)


def test_elementwise_ng_add_matches_operator(transformer, rng, axes4):
    a, x = const(axes4, rng, "CH")
    b, y = const(axes4, rng, "WHN")
    z = ng.add(x, y)
    assert names(z.axes) == ("C", "H", "W", "N")
    np.testing.assert_allclose(
        run(transformer, z),
        a[:, :, None, None] + np.transpose(b, (1, 0, 2))[None], rtol=RTOL)


def test_commutative_example_ones(transformer, axes4):
    H, W = axes4["H"], axes4["W"]
    x = ng.constant(np.ones((2, 3)), [H, W])
    y = ng.constant(np.ones((3, 2)), [W, H])
    z_left = x + y
    z_right = y + x  # <== changed order
    left_val = transformer.computation([z_left])()[0]
    right_val = transformer.computation([z_right])()[0]
    assert left_val.shape == (2, 3)
    assert right_val.shape == (3, 2)
    np.testing.assert_array_equal(left_val, np.full((2, 3), 2.0))
    np.testing.assert_array_equal(right_val, np.full((3, 2), 2.0))


def test_commutative_example_equivalent_up_to_transpose(transformer, rng, axes4):
    H, W = axes4["H"], axes4["W"]
    xv, yv = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    x = ng.constant(xv, [H, W])
    y = ng.constant(yv, [W, H])
    left_val, right_val = transformer.computation([x + y, y + x])()
    assert list((x + y).axes) == [H, W]
    assert list((y + x).axes) == [W, H]
    np.testing.assert_allclose(left_val, xv + yv.T, rtol=RTOL)
    np.testing.assert_allclose(right_val, yv + xv.T, rtol=RTOL)
    np.testing.assert_allclose(left_val, right_val.T, rtol=RTOL)


def test_associative(transformer, rng, axes4):
    h, H = const(axes4, rng, "H")
    w, W = const(axes4, rng, "W")
    n, N = const(axes4, rng, "N")
    inner_left = H + W
    assert names(inner_left.axes) == ("H", "W")
    left = inner_left + N
    inner_right = W + N
    assert names(inner_right.axes) == ("W", "N")
    right = H + inner_right
    assert names(left.axes) == ("H", "W", "N")
    assert names(right.axes) == ("H", "W", "N")
    expected = h[:, None, None] + w[None, :, None] + n[None, None, :]
    left_val, right_val = transformer.computation([left, right])()
    np.testing.assert_allclose(left_val, expected, rtol=RTOL)
    np.testing.assert_allclose(right_val, expected, rtol=RTOL)


def test_distributive(transformer, rng, axes4):
    h, H = const(axes4, rng, "H")
    w, W = const(axes4, rng, "W")
    n, N = const(axes4, rng, "N")
    wn = W + N
    assert names(wn.axes) == ("W", "N")
    factored = H * wn
    hw, hn = H * W, H * N
    assert names(hw.axes) == ("H", "W")
    assert names(hn.axes) == ("H", "N")
    expanded = hw + hn
    assert names(factored.axes) == ("H", "W", "N")
    assert names(expanded.axes) == ("H", "W", "N")
    expected = h[:, None, None] * (w[None, :, None] + n[None, None, :])
    f_val, e_val = transformer.computation([factored, expanded])()
    np.testing.assert_allclose(f_val, expected, rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(e_val, expected, rtol=RTOL, atol=1e-6)


# -- dot with dual axes --------------------------------------------------------------

@pytest.fixture
def dot_axes():
    return {
        "H": ng.make_axis(length=2, name="H"),
        "W": ng.make_axis(length=3, name="W"),
        "N": ng.make_axis(length=4, name="N"),
        "C": ng.make_axis(length=5, name="C"),
        "M": ng.make_axis(length=6, name="M"),
    }


def resolve(dot_axes, token):
    if token.endswith("-1"):
        return dot_axes[token[:-2]] - 1
    if token.endswith("+1"):
        return dot_axes[token[:-2]] + 1
    return dot_axes[token]


DOT_LINES = [
    # 2d dot
    (("H", "W-1"), ("W", "N"), ("H", "N"), "hw,wn->hn"),
    (("H", "W"), ("W+1", "N"), ("H", "N"), "hw,wn->hn"),
    # 4d dot
    (("M", "C-1", "H-1", "W-1"), ("C", "H", "W", "N"), ("M", "N"), "mchw,chwn->mn"),
    (("M", "C", "H", "W"), ("C+1", "H+1", "W+1", "N"), ("M", "N"), "mchw,chwn->mn"),
    # swapping the order of the axes is allowed
    (("M", "W-1", "H-1", "C-1"), ("C", "H", "W", "N"), ("M", "N"), "mwhc,chwn->mn"),
    (("M", "C-1", "H-1", "W-1"), ("W", "C", "N", "H"), ("M", "N"), "mchw,wcnh->mn"),
    # identical axes on both sides also pair
    (("H", "W"), ("W", "N"), ("H", "N"), "hw,wn->hn"),
    (("M", "C", "H", "W"), ("C", "H", "W", "N"), ("M", "N"), "mchw,chwn->mn"),
]


@pytest.mark.parametrize("left, right, out, subscripts", DOT_LINES,
                         ids=[f"{'.'.join(l)}*{'.'.join(r)}" for l, r, _, _ in DOT_LINES])
def test_dot(transformer, rng, dot_axes, left, right, out, subscripts):
    left_axes = [resolve(dot_axes, t) for t in left]
    right_axes = [resolve(dot_axes, t) for t in right]
    a = rng.standard_normal(tuple(ax.length for ax in left_axes))
    b = rng.standard_normal(tuple(ax.length for ax in right_axes))
    d = ng.dot(ng.constant(a, left_axes), ng.constant(b, right_axes))
    assert list(d.axes) == [dot_axes[t] for t in out]
    value = run(transformer, d)
    np.testing.assert_allclose(value, np.einsum(subscripts, a, b), rtol=1e-4, atol=1e-5)


def test_dot_direction_rule_left_plus_one_does_not_pair_with_right_base(transformer, rng,
                                                                        dot_axes):
    # Left W+1 pairs only with right W+2 (or W+1): with right W nothing is contracted.
    H, W, N = dot_axes["H"], dot_axes["W"], dot_axes["N"]
    a = rng.standard_normal((2, 3))
    b = rng.standard_normal((3, 4))
    d = ng.dot(ng.constant(a, [H, W + 1]), ng.constant(b, [W, N]))
    assert list(d.axes) == [H, W + 1, W, N]
    np.testing.assert_allclose(run(transformer, d), np.einsum('hv,wn->hvwn', a, b),
                               rtol=1e-5, atol=1e-6)


# -- reductions ------------------------------------------------------------------------

def test_reduction_axes_lines(transformer, rng):
    from axgraph.frontends.neon.axis import ax
    x = ng.placeholder([ax.C, ax.H, ax.W])
    cases = [
        ([], [ax.C, ax.H, ax.W], lambda v: v),
        ([ax.C], [ax.H, ax.W], lambda v: v.sum(axis=0)),
        ([ax.C, ax.W], [ax.H], lambda v: v.sum(axis=(0, 2))),
        ([ax.W, ax.C], [ax.H], lambda v: v.sum(axis=(2, 0))),
        (x.axes, [], lambda v: v.sum()),
    ]
    ops = []
    for reduction_axes, out, _ in cases:
        op = ng.sum(x, reduction_axes=reduction_axes)
        assert list(op.axes) == out
        ops.append(op)
    value = rng.standard_normal((2, 3, 4))
    results = transformer.computation(ops, x)(value)
    for (_, out, reference), result in zip(cases, results):
        assert result.shape == np.shape(reference(value))
        np.testing.assert_allclose(result, reference(value), rtol=1e-5, atol=1e-6)


# -- cast_axes -----------------------------------------------------------------------

def test_cast_axes_example(transformer):
    C1 = ng.make_axis(length=100, name="C1")
    C2 = ng.make_axis(length=100, name="C2")
    N = ng.make_axis(length=128, name="N")
    hidden_1 = ng.constant(np.ones((100, 128)), [C1, N])
    hidden_2 = ng.constant(np.ones((100, 128)), [C2, N])
    sum_direct = hidden_1 + hidden_2
    # The seed says "[C1, C2, N]" as a set; by its own ordering rule (left operand's
    # axes, then the right's new ones, as in (H, W) + (N, W) -> (H, W, N)) the order
    # is [C1, N, C2].
    assert list(sum_direct.axes) == [C1, N, C2]
    assert sum_direct.axes.is_equal_set([C1, C2, N])
    hidden_2_cast = ng.cast_axes(hidden_2, [C1, N])
    assert list(hidden_2_cast.axes) == [C1, N]
    sum_cast = hidden_1 + hidden_2_cast
    assert list(sum_cast.axes) == [C1, N]
    direct_val, cast_val = transformer.computation([sum_direct, sum_cast])()
    assert direct_val.shape == (100, 128, 100)
    np.testing.assert_array_equal(direct_val, np.full((100, 128, 100), 2.0))
    np.testing.assert_array_equal(cast_val, np.full((100, 128), 2.0))


def test_cast_axes_values(transformer, rng):
    C1 = ng.make_axis(length=3, name="C1")
    C2 = ng.make_axis(length=3, name="C2")
    N = ng.make_axis(length=4, name="N")
    h1, h2 = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    hidden_1 = ng.constant(h1, [C1, N])
    hidden_2 = ng.constant(h2, [C2, N])
    sum_direct = hidden_1 + hidden_2
    sum_cast = hidden_1 + ng.cast_axes(hidden_2, [C1, N])
    direct_val, cast_val = transformer.computation([sum_direct, sum_cast])()
    # direct: [C1, N, C2] -> h1[c1, n] + h2[c2, n]
    np.testing.assert_allclose(direct_val, h1[:, :, None] + h2.T[None, :, :], rtol=RTOL)
    np.testing.assert_allclose(cast_val, h1 + h2, rtol=RTOL)


# -- broadcast -------------------------------------------------------------------------

def test_broadcast_axes_lines():
    from axgraph.frontends.neon.axis import ax
    x = ng.placeholder([ax.C, ax.H])
    assert list(ng.broadcast(x, [ax.C, ax.H, ax.W]).axes) == [ax.C, ax.H, ax.W]
    assert list(ng.broadcast(x, [ax.W, ax.H, ax.C]).axes) == [ax.W, ax.H, ax.C]


def test_broadcast_values(transformer, rng):
    C = ng.make_axis(length=2, name="C")
    H = ng.make_axis(length=3, name="H")
    W = ng.make_axis(length=4, name="W")
    xv = rng.standard_normal((2, 3))
    x = ng.placeholder([C, H])
    b1 = ng.broadcast(x, [C, H, W])
    b2 = ng.broadcast(x, [W, H, C])
    v1, v2 = transformer.computation([b1, b2], x)(xv)
    expected_1 = np.empty((2, 3, 4))
    expected_2 = np.empty((4, 3, 2))
    for c in range(2):
        for h in range(3):
            for w in range(4):
                expected_1[c, h, w] = xv[c, h]
                expected_2[w, h, c] = xv[c, h]
    np.testing.assert_allclose(v1, expected_1, rtol=RTOL)
    np.testing.assert_allclose(v2, expected_2, rtol=RTOL)
