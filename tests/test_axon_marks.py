"""Dims marked `#` in Axon: a size that may be 1 broadcasts against another dim (the result
is the other dim, with the condition that it is 1 or equal), where an unmarked pair is
made one size; the graph is built once the size is known, and computes what NumPy's
broadcasting does."""
import numpy as np
import pytest

from axgraph.frontends import axon
from axgraph.frontends.axon import AxonShapeError, AxonSyntaxError

SCALE = """
fun scale (x : f32[*b, #c]) (w : f32[k]) = x * w
val y = scale (input : f32[N, C]) (input : f32[3])
"""


def test_a_marked_dim_broadcasts_with_a_condition_where_an_unmarked_one_is_unified():
    unmarked = axon.infer("fun f (x : f32[n]) (y : f32[m]) = x + y")
    assert str(unmarked["f"]) == "f32[n] -> f32[n] -> f32[n]"
    marked = axon.infer("fun f (x : f32[#n]) (y : f32[m]) = x + y")
    assert str(marked["f"]) == "f32[n] -> f32[m] -> f32[m] with n == 1 or n == m"
    # either operand may carry the mark
    flipped = axon.infer("fun f (y : f32[m]) (x : f32[#n]) = y + x")
    assert str(flipped["f"]) == "f32[m] -> f32[n] -> f32[m] with n == 1 or n == m"


def test_the_condition_is_checked_at_each_use():
    result = axon.infer("fun f (x : f32[#n]) (y : f32[m]) = x + y\n"
                        "val a = f (input : f32[1]) (input : f32[4])\n"
                        "val b = f (input : f32[4]) (input : f32[4])")
    assert (str(result["a"]), str(result["b"])) == ("f32[4]", "f32[4]")
    with pytest.raises(AxonShapeError) as info:
        axon.infer("fun f (x : f32[#n]) (y : f32[m]) = x + y\n"
                   "val b = f (input : f32[3]) (input : f32[4])")
    error = info.value
    assert error.headline == "dims differ: 3 vs 4 (a dim marked `#` broadcasts only where it is 1)"
    # the mark's annotation, the `+`, the use and both arguments' annotations
    assert {(1, 12), (1, 38), (2, 9), (2, 20), (2, 37)} <= set(error.positions)


def test_a_mark_written_after_the_size_was_used_still_counts():
    # `x + x` uses c before `(z : f32[#c])` marks it; `* w` then broadcasts c
    result = axon.infer("fun f (x : f32[c]) (w : f32[k]) = "
                        "let val z = x + x in (z : f32[#c]) * w end")
    assert str(result["f"]) == "f32[c] -> f32[k] -> f32[k] with c == 1 or c == k"


def test_two_marked_dims_are_made_one_size():
    result = axon.infer("fun f (x : f32[#n]) (y : f32[#m]) = x + y")
    assert str(result["f"]) == "f32[n] -> f32[n] -> f32[n]"


def test_a_program_size_marked_stays_a_check_for_when_it_is_fed():
    result = axon.infer("val x = input : f32[N, #C]\nval z = x * (input : f32[N, 3])")
    assert str(result["z"]) == "f32[N, 3]"
    assert [r.text for r in result.residuals] == ["C == 1 or C == 3"]


def test_the_graph_needs_the_size_and_computes_numpys_broadcast(rng):
    program = axon.compile(SCALE)
    with pytest.raises(AxonShapeError, match="broadcasting a dim marked `#`"):
        program.graph()
    w = rng.standard_normal(3)
    for columns in (1, 3):
        x = rng.standard_normal((4, columns))
        got = program.run({"y.input0": x, "y.input1": w})["y"]
        np.testing.assert_allclose(got, x * w[None, :], rtol=1e-6)  # NumPy broadcasts 1
    assert program.graph(sizes={"N": 4, "C": 1}).shapes["y"] == (4, 3)
    with pytest.raises(AxonShapeError, match=r"dims differ: 2 vs 3 .*with N = 4, C = 2"):
        program.run({"y.input0": np.ones((4, 2)), "y.input1": w})


def test_a_mark_needs_a_name():
    with pytest.raises(AxonSyntaxError, match="a size name after `#`"):
        axon.infer("fun f (x : f32[#3]) = x")
