"""ng.infer_shapes on axes graphs: every expectation below is a symbolic length written by
hand (the usual arithmetic of each op: a concat adds, a 3-wide valid convolution takes 2
away, a stride halves, rounding up), compared with what the solver infers without data;
then contradictions that name every line, and data fed against inferred lengths and
residual checks on every transformer."""

import numpy as np
import pytest

import axgraph as ng
from axgraph.dims import Dim, dim_min
from axgraph.frontends.neon import ar

B, T, H, W, D, L = (ng.dim(n) for n in ("B", "T", "H", "W", "D", "L"))


def axis(length, name, *roles, **flags):
    return ng.make_axis(length=length, name=name, roles=roles, **flags)


def line_of(marker):
    """The line of this file holding `# @marker`."""
    with open(__file__) as source:
        for number, text in enumerate(source, start=1):
            if text.rstrip().endswith(f"# @{marker}"):
                return number
    raise AssertionError(marker)


def lengths(result):
    return ng.infer_shapes(result).lengths(result)


def residuals(report):
    return sorted(str(r.constraint) for r in report.residuals)


# -- linear: lengths that add, copy and pin -----------------------------------------------------

def test_concat_of_a_symbolic_axis_with_itself():
    N, F = axis(B, "N"), axis(4, "F")
    x = ng.placeholder([F, N])
    assert lengths(ng.concat_along_axis([x, x], N)) == (4, 2 * B)


def test_concat_of_three_parts():
    F = axis(4, "F")
    x, y, z = (ng.placeholder([F, axis(n, "S")]) for n in (B, 2, T))
    joined = ng.concat_along_axis([x, y, z], x.axes[1])
    assert lengths(joined) == (4, B + T + 2)


def test_concat_of_an_open_length():
    A = axis(None, "A")
    x = ng.placeholder([A])
    joined = ng.concat_along_axis([x, x, x], A)
    report = ng.infer_shapes(joined)
    assert report.lengths(joined) == (3 * Dim("A"),) and report.free == ("A",)


def test_an_open_length_cast_to_a_known_one_is_inferred():
    A, K = axis(None, "A"), axis(3, "K")
    x = ng.placeholder([A])
    report = ng.infer_shapes(ng.cast_axes(x, [K]))
    assert report.lengths(x) == (3,) and report.solution.inferred == {"A": 3}


def test_an_open_length_paired_in_a_dot_takes_the_other_length():
    A, S = axis(None, "A"), axis(2 * T, "S")
    x, w = ng.placeholder([A]), ng.placeholder([S])
    report = ng.infer_shapes(ng.dot(x, ng.cast_axes(w, [A])))
    assert report.lengths(x) == (2 * T,)


def test_a_dot_with_relabelled_result_axes():
    A, C, R = axis(None, "A"), axis(B, "C"), axis(5, "R")
    x = ng.placeholder([C, R])
    y = ng.placeholder([R])
    product = ng.dot(x, y)
    relabelled = product.sibling(type(product), x, y, axes=[A])
    assert lengths(relabelled) == (B,)


def test_padding_adds_to_a_symbolic_length():
    N = axis(H, "N")
    x = ng.placeholder([N])
    assert lengths(ng.pad(x, [(1, 2)])) == (H + 3,)


def test_padding_into_an_axis_left_open():
    N, P = axis(H, "N"), axis(None, "P")
    x = ng.placeholder([N])
    assert lengths(ng.pad(x, [(2, 2)], axes=[P])) == (H + 4,)


def test_stacking_pins_a_symbolic_axis_to_the_count():
    F, S = axis(4, "F"), axis(T, "S")
    x = ng.placeholder([F])
    report = ng.infer_shapes(ng.stack([x, x, x], S))
    assert report.solution.pinned == {"T": 3} and report.lengths(x) == (4,)


def test_flattening_multiplies():
    C, N = axis(3, "C"), axis(B, "N")
    x = ng.placeholder([C, N])
    flat = ng.flatten(x)
    assert lengths(flat) == (3 * B,)
    assert lengths(ng.unflatten(flat)) == (3, B)


def test_reductions_and_broadcasts_keep_lengths():
    C, N, F = axis(3, "C"), axis(B, "N"), axis(T + 1, "F")
    x = ng.placeholder([C, N])
    assert lengths(ng.sum(x, reduction_axes=[C])) == (B,)
    assert lengths(ng.broadcast(x, [F, C, N])) == (T + 1, 3, B)


def test_elementwise_broadcasting_over_named_axes():
    N, F = axis(B, "N"), axis(4, "F")
    x, y = ng.placeholder([N]), ng.placeholder([N, F])
    assert lengths(x + y) == (B, 4)
    assert lengths(ng.tanh(x) * 2.0) == (B,)


def test_two_equations_in_two_open_lengths():
    # two different axes named A, both open: joined they are 10 long, the first is 3
    A, A2, K, J = axis(None, "A"), axis(None, "A"), axis(10, "K"), axis(3, "J")
    x, y = ng.placeholder([A]), ng.placeholder([A2])
    joined = ng.concat_along_axis([x, y], A)
    report = ng.infer_shapes([ng.cast_axes(joined, [K]), ng.cast_axes(x, [J])])
    assert report.lengths(x) == (3,) and report.lengths(y) == (7,)


def test_an_open_length_twice_over_is_solved():
    A, K = axis(None, "A"), axis(10, "K")
    x = ng.placeholder([A])
    report = ng.infer_shapes(ng.cast_axes(ng.concat_along_axis([x, x], A), [K]))
    assert report.lengths(x) == (5,)


def test_no_whole_number_length_is_an_error():
    A, K = axis(None, "A"), axis(7, "K")
    x = ng.placeholder([A])
    joined = ng.concat_along_axis([x, x], A)
    cast = ng.cast_axes(joined, [K])  # @half-of-seven
    with pytest.raises(ng.ShapeConflictError, match="A would have to be 7/2") as info:
        ng.infer_shapes(cast)
    assert f"test_shape_inference.py:{line_of('half-of-seven')}" in str(info.value)


def test_a_slice_into_an_open_axis():
    N, P = axis(T, "N"), axis(None, "P")
    x = ng.placeholder([N])
    sliced = ng.tensor_slice(x, [slice(1, 3)], axes=[P])
    assert lengths(sliced) == (dim_min(T, 3) - 1,)  # 2 once T >= 3, as Python slices count
    everything = ng.tensor_slice(x, [slice(None, None, 2)], axes=[axis(None, "E")])
    assert lengths(everything) == ((T + 1) // 2,)


def test_an_index_into_a_symbolic_axis_is_checked_when_fed():
    N, F = axis(T, "N"), axis(2, "F")
    x = ng.placeholder([N, F])
    report = ng.infer_shapes(x[5])
    assert report.lengths(x[5]) == (2,) and residuals(report) == ["T >= 6"]


def test_an_initial_value_pins_a_symbolic_axis():
    N = axis(B, "N")
    v = ng.variable([N], initial_value=np.arange(5.0))
    assert ng.infer_shapes(v).solution.pinned == {"B": 5}


# -- divisibility --------------------------------------------------------------------------------

def test_a_flattened_open_length_over_a_constant():
    A, F, K = axis(None, "A"), axis(4, "F"), axis(12, "K")
    x = ng.placeholder([A, F])
    report = ng.infer_shapes(ng.cast_axes(ng.flatten(x), [K]))
    assert report.lengths(x) == (3, 4)


def test_a_flattened_open_length_that_cannot_divide():
    A, F, K = axis(None, "A"), axis(4, "F"), axis(10, "K")
    x = ng.placeholder([A, F])
    with pytest.raises(ng.ShapeConflictError, match="A would have to be 5/2"):
        ng.infer_shapes(ng.cast_axes(ng.flatten(x), [K]))


def test_a_flattened_open_length_over_a_symbolic_size_divides_exactly():
    A, F, K = axis(None, "A"), axis(D, "F"), axis(4 * D, "K")
    x = ng.placeholder([A, F])
    assert ng.infer_shapes(ng.cast_axes(ng.flatten(x), [K])).lengths(x) == (4, D)


def test_a_symbolic_divisor_gives_a_quotient_and_a_divisibility_check():
    A, F, K = axis(None, "A"), axis(D, "F"), axis(L, "K")
    x = ng.placeholder([A, F])
    report = ng.infer_shapes(ng.cast_axes(ng.flatten(x), [K]))
    (quotient,) = report.solution.quotients
    assert (quotient.name, quotient.dividend, quotient.divisor) == ("A", L, D)
    assert residuals(report) == ["L % D == 0"]
    assert "L % D == 0" in str(report)


# -- convolution and pooling stacks --------------------------------------------------------------

def feature_map(channels=3):
    C = axis(channels, "C", ar.Channel)
    return ng.placeholder([C, axis(H, "H", ar.Height), axis(W, "W", ar.Width), axis(B, "N")])


def conv(x, size=3, out=4, **geometry):
    channel = x.axes[0]
    R, S = axis(size, "R", ar.Height), axis(size, "S", ar.Width)
    w = ng.variable([channel, R, S, axis(out, "K", ar.Channelout)], initial_value=0.1)
    return ng.convolution(None, x, w, **geometry)  # @conv-call


def recast(y):
    """y's output channels as the input channels of the next layer."""
    return ng.cast_axes(y, [axis(y.axes[0].length, "Ci", ar.Channel)] + list(y.axes[1:]))


def test_a_valid_convolution_takes_two_away_and_needs_three():
    y = conv(feature_map())
    report = ng.infer_shapes(y)
    assert report.lengths(y) == (4, H - 2, W - 2, B)
    assert residuals(report) == ["H >= 3", "W >= 3"]


def test_a_padded_convolution_keeps_the_size():
    y = conv(feature_map(), padding=1)
    report = ng.infer_shapes(y)
    assert report.lengths(y) == (4, H, W, B) and residuals(report) == []


def test_a_strided_convolution_rounds_up():
    y = conv(feature_map(), padding=1, strides=2)
    assert lengths(y) == (4, (H + 1) // 2, (W + 1) // 2, B)


def test_pooling_halves_and_needs_two():
    y = ng.pooling(None, feature_map(), window=2, strides=2)
    report = ng.infer_shapes(y)
    assert report.lengths(y) == (3, H // 2, W // 2, B)
    assert residuals(report) == ["H >= 2", "W >= 2"]
    assert report.solution.bounds["H"] == (2, float("inf"))


def test_a_strided_convolution_then_pooling():
    y = ng.pooling(None, conv(feature_map(), padding=1, strides=2), window=2, strides=2)
    assert lengths(y)[1] == (H + 1) // 4


def test_three_strided_convolutions_collapse_their_floors():
    y = feature_map()
    for _ in range(3):
        y = recast(conv(y, padding=1, strides=2))
    assert lengths(y)[1:3] == ((H + 7) // 8, (W + 7) // 8)


def test_a_dilated_convolution():
    y = conv(feature_map(), dilation=2)
    report = ng.infer_shapes(y)
    assert report.lengths(y)[1] == H - 4 and "H >= 5" in residuals(report)


def test_a_deconvolution_doubles_back():
    x = feature_map()
    R, S = axis(3, "R", ar.Height), axis(3, "S", ar.Width)
    w = ng.variable([axis(2, "Cw", ar.Channel), R, S, axis(3, "K", ar.Channelout)],
                    initial_value=0.1)
    y = ng.deconvolution(None, x, w, padding=1, strides=2)
    assert lengths(y) == (2, 2 * H - 1, 2 * W - 1, B)


def test_only_the_strongest_window_check_is_left():
    y = feature_map()
    for _ in range(3):
        y = recast(conv(y))   # valid 3x3 three times: H - 6, so H >= 7
    report = ng.infer_shapes(y)
    assert report.lengths(y)[1:3] == (H - 6, W - 6)
    assert residuals(report) == ["H >= 7", "W >= 7"]
    assert report.solution.bounds["H"] == (7, float("inf"))


def test_a_conv_pool_stack():
    y = feature_map()
    for _ in range(2):
        y = ng.pooling(None, recast(conv(y, padding=1)), window=2, strides=2)
    y = recast(conv(y))
    assert lengths(y)[1:3] == (H // 4 - 2, W // 4 - 2)


def test_output_axes_left_open_get_the_geometry():
    x = feature_map()
    K, P, Q = axis(4, "K", ar.Channelout), axis(None, "P", ar.Height), axis(None, "Q", ar.Width)
    R, S = axis(3, "R", ar.Height), axis(3, "S", ar.Width)
    w = ng.variable([x.axes[0], R, S, K], initial_value=0.1)
    y = ng.convolution(None, x, w, axes=[K, P, Q, x.axes[3]], strides=2)
    assert lengths(y) == (4, (H - 3) // 2 + 1, (W - 3) // 2 + 1, B)


def test_an_open_channel_count_meets_the_filter():
    C = axis(None, "C", ar.Channel)
    x = ng.placeholder([C, axis(H, "H", ar.Height), axis(W, "W", ar.Width), axis(B, "N")])
    R, S = axis(3, "R", ar.Height), axis(3, "S", ar.Width)
    Cw = axis(5, "Cw", ar.Channel)
    w = ng.variable([Cw, R, S, axis(4, "K", ar.Channelout)], initial_value=0.1)
    y = ng.convolution(None, ng.cast_axes(x, [Cw] + list(x.axes[1:])), w, padding=1)
    assert ng.infer_shapes(y).lengths(x) == (5, H, W, B)


def test_a_window_that_can_never_fit_is_refused_at_once():
    x = ng.placeholder([axis(3, "C", ar.Channel), axis(2, "H", ar.Height),
                        axis(W, "W", ar.Width), axis(B, "N")])
    with pytest.raises(ng.IncompatibleAxesError):
        conv(x)


# -- broadcasting ---------------------------------------------------------------------------------

def test_broadcast_to_a_new_symbolic_axis():
    N, F = axis(B, "N"), axis(2 * T, "F")
    x = ng.placeholder([N])
    assert lengths(ng.broadcast(x, [N, F])) == (B, 2 * T)


def test_a_constant_broadcasts_against_symbolic_axes():
    N, F = axis(B, "N"), axis(4, "F")
    x = ng.placeholder([N, F])
    bias = ng.constant(np.ones(4), [F])
    assert lengths(x + bias) == (B, 4)


# -- provenance -----------------------------------------------------------------------------------

def test_two_pins_of_one_length_name_both_lines():
    A = axis(None, "A")
    x = ng.placeholder([A])
    three = ng.cast_axes(x, [axis(3, "K")])  # @pin-three
    four = ng.cast_axes(x, [axis(4, "J")])  # @pin-four
    with pytest.raises(ng.ShapeConflictError) as info:
        ng.infer_shapes([three, four])
    message = str(info.value)
    assert f":{line_of('pin-three')}" in message and f":{line_of('pin-four')}" in message
    assert "A = 3" in message and "A = 4" in message


def test_a_contradiction_through_a_dot_names_all_three_lines():
    P, Q = axis(None, "P"), axis(None, "Q")
    x, y = ng.placeholder([P]), ng.placeholder([Q])
    x128 = ng.cast_axes(x, [axis(128, "K")])  # @pin-128
    y64 = ng.cast_axes(y, [axis(64, "J")])  # @pin-64
    paired = ng.dot(x, ng.cast_axes(y, [P]))  # @pair
    with pytest.raises(ng.ShapeConflictError) as info:
        ng.infer_shapes([x128, y64, paired])
    message = str(info.value)
    for marker in ("pin-128", "pin-64", "pair"):
        assert f"test_shape_inference.py:{line_of(marker)}" in message, marker
    assert {o.line for c in info.value.conflicts for o in c.origins} == {
        line_of("pin-128"), line_of("pin-64"), line_of("pair")}


def test_a_computation_refuses_contradicting_lengths_when_it_is_made():
    A = axis(None, "A")
    x = ng.placeholder([A])
    both = [ng.cast_axes(x, [axis(3, "K")]), ng.cast_axes(x, [axis(4, "J")])]
    with ng.make_transformer("numpy") as t:
        with pytest.raises(ng.ShapeConflictError):
            t.computation(both, x)


def test_the_report_prints_lengths_and_checks_with_their_lines():
    y = conv(feature_map())
    text = str(ng.infer_shapes(y))
    assert "H >= 3" in text and f"test_shape_inference.py:{line_of('conv-call')}" in text
    assert "[K: 4, P: H - 2, Q: W - 2, N: B]" in text
    assert "checks when data is fed:" in text


def test_the_order_of_results_does_not_change_the_report():
    A, A2, K, J = axis(None, "A"), axis(None, "A"), axis(10, "K"), axis(3, "J")
    x, y = ng.placeholder([A]), ng.placeholder([A2])
    joined = ng.concat_along_axis([x, y], A)
    results = [ng.cast_axes(joined, [K]), ng.cast_axes(x, [J])]
    forward, backward = ng.infer_shapes(results), ng.infer_shapes(results[::-1])
    assert forward.solution.bindings == backward.solution.bindings
    assert str(forward) == str(backward)


# -- data fed against inferred lengths and residual checks ------------------------------------------

@pytest.mark.parametrize("backend", ["numpy", "interpreter", "cpu"])
def test_a_length_pinned_on_one_line_and_fed_on_another_names_both(backend):
    A, K = axis(None, "A"), axis(3, "K")
    x = ng.placeholder([A], dtype=np.float64)
    doubled = ng.cast_axes(x, [K]) * 2.0  # @pinned-to-three
    with ng.make_transformer(backend) as t:
        f = t.computation(doubled, x)
        np.testing.assert_array_equal(f(np.arange(3.0)), [0.0, 2.0, 4.0])
        with pytest.raises(ng.ShapeCheckError) as info:
            f(np.arange(4.0))  # @fed-four
    message = str(info.value)
    assert "A = 3 from cast_axes at " in message and "A = 4 from" in message
    assert f":{line_of('pinned-to-three')}" in message and f":{line_of('fed-four')}" in message
    assert isinstance(info.value, ng.FeedError)


@pytest.mark.parametrize("backend", ["numpy", "interpreter", "cpu"])
def test_a_declared_size_pinned_by_the_graph_is_checked_when_fed(backend):
    P, Q = axis(B, "P"), axis(4, "Q")
    u, v = ng.placeholder([P], dtype=np.float64), ng.placeholder([Q], dtype=np.float64)
    total = ng.dot(ng.cast_axes(u, [Q]), v)  # @pins-B
    assert ng.infer_shapes(total).solution.pinned == {"B": 4}
    with ng.make_transformer(backend) as t:
        f = t.computation(total, u, v)
        assert f(np.ones(4), np.arange(4.0)) == 6.0
        with pytest.raises(ng.ShapeCheckError, match=rf"B = 4 from cast_axes at .*:"
                                                      rf"{line_of('pins-B')}.*B = 5 from"):
            f(np.ones(5), np.arange(4.0))


@pytest.mark.parametrize("backend", ["numpy", "interpreter"])
def test_a_window_check_fails_with_the_size_fed(backend):
    x = feature_map(1)
    y = conv(x, out=1)
    with ng.make_transformer(backend) as t:
        f = t.computation(y, x)
        data = np.ones((1, 5, 4, 2))
        got = f(data)
        assert got.shape == (1, 3, 2, 2)
        np.testing.assert_allclose(got, np.full((1, 3, 2, 2), 0.9))  # nine taps of 0.1
        with pytest.raises(ng.ShapeCheckError) as info:
            f(np.ones((1, 2, 4, 2)))  # @fed-two
    message = str(info.value)
    assert "H = 2 from" in message and "H must be >= 3" in message
    assert f":{line_of('conv-call')}" in message and f":{line_of('fed-two')}" in message


def test_report_check_with_shapes_only():
    A, F, K = axis(None, "A"), axis(D, "F"), axis(L, "K")
    x = ng.placeholder([A, F])
    k = ng.placeholder([K])
    report = ng.infer_shapes([ng.cast_axes(ng.flatten(x), [K]), k])
    solved = report.check({x: (3, 4), k: (12,)})
    assert solved.value(report.variable(A)) == 3
    with pytest.raises(ng.ShapeCheckError, match="13"):
        report.check({x: (3, 4), k: (13,)})
    with pytest.raises(ng.ShapeCheckError, match="rank 1"):
        report.check({x: (12,)})


def test_the_benchmark_stack_halves_twice_in_64_blocks():
    from benchmarks import shape_inference

    result, ops = shape_inference.build(64)   # a 2x2 stride-2 pool after blocks 32 and 64
    report = ng.infer_shapes(result)
    assert ops == len(report.ops) and ops > 400
    assert report.lengths(result) == (8, Dim("H") // 4, Dim("W") // 4, Dim("N"))
    assert residuals(report) == ["H >= 4", "W >= 4"]
