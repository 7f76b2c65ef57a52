"""`ng.format_graph` and the DOT pictures of axes graphs with `shapes=`: each axis shows
the length the shape solver infers (written here by hand: a concat adds its parts, a
3-wide window takes 2 away) and a note lists the sizes and the checks left for when
data is fed, as `print(report)` does."""

import shutil

import pytest

import axgraph as ng
from axgraph.frontends.neon import ar
from axgraph.visualize import graph_to_dot, graph_to_svg

B, Hd = ng.dim("B"), ng.dim("Hd")


def line_of(marker):
    """The line of this file holding `# @marker`."""
    with open(__file__) as source:
        for number, text in enumerate(source, start=1):
            if text.rstrip().endswith(f"# @{marker}"):
                return number
    raise AssertionError(marker)


def pooled_graph():
    """A pooling over a symbolic height (a window check) and an open axis cast to it."""
    N = ng.make_axis(length=B, name="N")
    C = ng.make_axis(length=1, name="C", roles=[ar.Channel])
    images = ng.placeholder([C, ng.make_axis(length=Hd, name="H", roles=[ar.Height]),
                             ng.make_axis(length=5, name="W", roles=[ar.Width]), N])
    pooled = ng.pooling(None, images, window=3, strides=1)  # @pooling
    open_axis = ng.make_axis(name="A")
    labels = ng.placeholder([open_axis])
    paired = ng.cast_axes(labels, [N])
    joined = ng.concat_along_axis([labels, labels], open_axis)
    return pooled, paired, joined


def test_format_graph_shows_inferred_lengths_and_checks():
    pooled, paired, joined = pooled_graph()
    plain = ng.format_graph([pooled, paired, joined])
    assert "(A:?)" in plain and "sizes:" not in plain
    text = ng.format_graph([pooled, paired, joined], shapes=True)
    assert "(C: 1, P: Hd - 2, Q: 3, N: B)" in text  # 3-wide window, stride 1
    assert "(A: B)" in text                          # cast to N, which is B long
    assert "(A: 2*B)" in text                        # the joined axis: both parts
    assert "Hd >= 3   from pooling at " in text
    assert f"test_shapes_pictures.py:{line_of('pooling')} (H -> P" in text
    assert text.splitlines()[-len(ng.infer_shapes([pooled, paired, joined])
                                  .summary_lines()):][0] == "sizes:"


def test_the_dot_picture_labels_axes_with_symbolic_lengths_and_lists_checks():
    pooled, paired, joined = pooled_graph()
    report = ng.infer_shapes([pooled, paired, joined])
    dot = graph_to_dot([pooled, paired, joined], shapes=report)
    assert dot == graph_to_dot([pooled, paired, joined], shapes=True)
    assert "(C: 1, P: Hd - 2, Q: 3, N: B) float32" in dot
    assert "(A: 2*B) float32" in dot
    note = next(line for line in dot.splitlines() if line.startswith("  shapes [shape=note"))
    assert "checks when data is fed:" in note and "Hd >= 3" in note
    assert f":{line_of('pooling')}" in note
    for line in report.summary_lines():  # the same lines as print(report)
        assert line in str(report)
    assert "shape=note" not in graph_to_dot([pooled, paired, joined])
    if shutil.which("dot") is not None:
        svg = graph_to_svg([pooled, paired, joined], shapes=True)
        assert "Hd - 2" in svg and "checks when data is fed:" in svg


def test_a_report_of_another_graph_is_refused():
    pooled, paired, _ = pooled_graph()
    with pytest.raises(ng.AxgraphValueError, match="report of another graph"):
        graph_to_dot([pooled, paired], shapes=ng.infer_shapes(paired))
    with pytest.raises(ng.AxgraphTypeError, match="ShapeReport"):
        ng.format_graph(pooled, shapes="yes")


def test_a_core_function_takes_no_shapes():
    from axgraph import core

    x = core.Parameter(core.f32, core.Shape(3))
    function = core.Function([core.Negative(x)], [x])
    with pytest.raises(ng.AxgraphTypeError, match="shapes= belongs to an axes graph"):
        graph_to_dot(function, shapes=True)
