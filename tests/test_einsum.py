"""ng.einsum: by a spec string of axis names or by Axis objects, on every transformer.

Each case is compared with np.einsum over the same arrays written with letters by hand;
gradients with float64 finite differences; bad specs are errors at the caller's line.
"""
import numpy as np
import pytest

import axgraph as ng
from axgraph.errors import (AxesError, AxgraphTypeError, AxgraphValueError, DuplicateAxisError,
                            UnmatchedAxesError)
from axgraph.testing import ExecutorFactory, check_derivative

from conftest import BACKENDS


def axes():
    return [ng.make_axis(length, name=name)
            for name, length in (("D", 3), ("T", 4), ("K", 5), ("H", 2))]


def arrays(rng, *shapes):
    return [rng.standard_normal(shape) for shape in shapes]


def cases():
    """label -> (build(ops, axes) -> Op, operand axes names, np.einsum spec)."""
    return {
        "contraction": (lambda x, y, a: ng.einsum("d t, d k -> t k", x, y),
                        ("DT", "DK"), "dt,dk->tk"),
        "contraction_by_axes": (lambda x, y, a: ng.einsum([a["T"], a["K"]], x, y),
                                ("DT", "DK"), "dt,dk->tk"),
        "batch": (lambda x, y, a: ng.einsum("h d t, k h d -> h k t", x, y),
                  ("HDT", "KHD"), "hdt,khd->hkt"),
        "outer": (lambda x, y, a: ng.einsum("t, k -> k t", x, y), ("T", "K"), "t,k->kt"),
        "sum_of_one_operand": (lambda x, y, a: ng.einsum("d t, k d -> k", x, y),
                               ("DT", "KD"), "dt,kd->k"),
        "everything_summed": (lambda x, y, a: ng.einsum([], x, y), ("DT", "TK"), "dt,tk->"),
        "kept_shared_axis_without_contraction": (
            lambda x, y, a: ng.einsum([a["D"], a["T"], a["K"]], x, y), ("DT", "DK"),
            "dt,dk->dtk"),
    }


@pytest.mark.parametrize("label", list(cases()))
def test_two_operands_against_numpy(transformer, rng, label):
    build, names, spec = cases()[label]
    a = dict(zip("DTKH", axes()))
    x = ng.placeholder([a[n] for n in names[0]], dtype=np.float64)
    y = ng.placeholder([a[n] for n in names[1]], dtype=np.float64)
    xv, yv = arrays(rng, x.axes.lengths, y.axes.lengths)
    result = build(x, y, a)
    got = transformer.computation(result, x, y)(xv, yv)
    want = np.einsum(spec, xv, yv)
    assert [ax.name.lower() for ax in result.axes] == list(spec.split("->")[1])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("spec", ["d t -> t d", "d t -> t", "d t -> "])
def test_one_operand_transposes_and_sums(transformer, rng, spec):
    D, T, K, H = axes()
    x = ng.placeholder([D, T], dtype=np.float64)
    (xv,) = arrays(rng, (3, 4))
    got = transformer.computation(ng.einsum(spec, x), x)(xv)
    np.testing.assert_allclose(got, np.einsum(spec.replace(" ", ""), xv), rtol=1e-12)


def test_three_operands_fold_left_and_sum_each_axis_once_unneeded(transformer, rng):
    D, T, K, H = axes()
    x, y, z = (ng.placeholder(list(ax), dtype=np.float64) for ax in ([D, T], [T, K], [K, H, D]))
    xv, yv, zv = arrays(rng, (3, 4), (4, 5), (5, 2, 3))
    result = ng.einsum("d t, t k, k h d -> h d", x, y, z)
    got = transformer.computation(result, x, y, z)(xv, yv, zv)
    np.testing.assert_allclose(got, np.einsum("dt,tk,khd->hd", xv, yv, zv), rtol=1e-10)


def test_names_match_exactly_first_then_ignoring_case():
    D, T, K, H = axes()
    lower_t = ng.make_axis(4, name="t")
    x = ng.placeholder([T, lower_t, D])
    assert list(ng.einsum("T t d -> t", x).axes) == [lower_t]
    assert list(ng.einsum("T t D -> T", x).axes) == [T]


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_match_finite_differences(backend, rng):
    D, T, K, H = axes()
    x = ng.placeholder([H, D, T], dtype=np.float64)
    y = ng.placeholder([K, H, D], dtype=np.float64)
    xv, yv = arrays(rng, (2, 3, 4), (5, 2, 3))
    result = ng.einsum("h d t, k h d -> t h", x, y)  # batch H, contract D, sum K away
    with ExecutorFactory(backend):
        check_derivative(result, x, 1e-6, xv, [y], [yv], rtol=1e-6, atol=1e-8)
        check_derivative(result, y, 1e-6, yv, [x], [xv], rtol=1e-6, atol=1e-8)


def bad_spec_cases():
    return {
        "no_arrow": ("d t, d k", AxgraphValueError, "'->'"),
        "two_arrows": ("d t -> d, k -> t", AxgraphValueError, "'->'"),
        "terms_per_operand": ("d t -> t", AxgraphValueError, "1 term(s) for 2 operand(s)"),
        "unknown_name": ("d x, d k -> k", UnmatchedAxesError, "'x'"),
        "axis_left_out": ("d, d k -> k", UnmatchedAxesError, "leaves out T"),
        "named_twice": ("d t d, d k -> k", DuplicateAxisError, "twice"),
        "unknown_result_axis": ("d t, d k -> t q", UnmatchedAxesError, "'q'"),
        "result_axis_twice": ("d t, d k -> t t", DuplicateAxisError, "twice"),
    }


@pytest.mark.parametrize("label", list(bad_spec_cases()))
def test_bad_specs_are_clear_errors_at_the_callers_line(label):
    spec, error, words = bad_spec_cases()[label]
    D, T, K, H = axes()
    x, y = ng.placeholder([D, T]), ng.placeholder([D, K])
    with pytest.raises(error) as caught:
        ng.einsum(spec, x, y)
    message = str(caught.value)
    assert "einsum" in message and words in message and "test_einsum.py" in message


def test_a_name_meaning_two_different_axes_is_refused():
    D, T, K, H = axes()
    other_d = ng.make_axis(3, name="D")
    with pytest.raises(AxesError, match="two different axes") as caught:
        ng.einsum("d t, d k -> t k", ng.placeholder([D, T]), ng.placeholder([other_d, K]))
    assert "test_einsum.py" in str(caught.value)


def test_an_ambiguous_name_is_refused():
    """'ab' matches no axis exactly and both 'Ab' and 'aB' ignoring case."""
    D, T, K, H = axes()
    x = ng.placeholder([ng.make_axis(2, name="Ab"), ng.make_axis(2, name="aB"), T])
    with pytest.raises(AxesError, match="could be any of") as caught:
        ng.einsum("ab aB t -> t", x)
    assert "test_einsum.py" in str(caught.value)


def test_result_axes_by_object_must_come_from_the_operands():
    D, T, K, H = axes()
    x = ng.placeholder([D, T])
    with pytest.raises(UnmatchedAxesError, match="not an axis of any operand"):
        ng.einsum([K], x)
    with pytest.raises(DuplicateAxisError):
        ng.einsum([T, T], x)
    with pytest.raises(AxgraphTypeError, match="spec must be"):
        ng.einsum(3, x)
    with pytest.raises(AxgraphValueError, match="at least one operand"):
        ng.einsum([T])
