"""Rigid sizes in Axon (`forall n. t`): inference solves for every other size first, and a
body that would make a rigid size a particular size, another rigid size or a program's size
is an AxonShapeError naming the `forall` and the lines that pin it."""
import numpy as np
import pytest

from axgraph.frontends import axon
from axgraph.frontends.axon import AxonShapeError, AxonSyntaxError


def shape_error(source, **inputs):
    with pytest.raises(AxonShapeError) as info:
        axon.infer(source, **inputs)
    return info.value


def test_a_flexible_size_is_solved_for_and_a_rigid_one_is_not():
    # without forall, the body may fix n; with it, the same body is refused
    assert str(axon.infer("fun f (x : f32[n]) = x + zeros [4]")["f"]) == "f32[4] -> f32[4]"
    error = shape_error("fun f (x : forall n. f32[n]) = x + zeros [4]")
    assert error.headline == "size n is rigid (`forall`), but would be 4"
    # the annotation, the `forall n`, both arguments of `+`, `+` itself and the zeros
    assert error.positions == ((1, 12), (1, 19), (1, 32), (1, 34), (1, 36))


def test_a_flexible_size_becomes_the_rigid_one():
    result = axon.infer("""
fun pair (x : forall n. f32[n, 3]) (y : f32[k, 3]) = y + x
val p = pair (input : f32[5, 3]) (input : f32[5, 3])
""")
    assert str(result["pair"]) == "f32[n, 3] -> f32[n, 3] -> f32[n, 3]"
    assert str(result["p"]) == "f32[5, 3]"  # each use gives n a size of its own


def test_a_reshape_that_needs_one_size_pins_it():
    error = shape_error("fun rows (x : forall n. f32[n, 3]) = reshape [2, 12] x")
    assert error.headline == "size n is rigid (`forall`), but would be 8"
    assert (1, 22) in error.positions and (1, 38) in error.positions


def test_two_rigid_sizes_are_never_made_equal_and_both_foralls_are_named():
    error = shape_error("fun f (x : forall n m. f32[n]) (y : f32[m]) = x + y")
    assert error.headline in ("size m is rigid (`forall`), but would be n",
                              "size n is rigid (`forall`), but would be m")
    assert {(1, 19), (1, 21)} <= set(error.positions)


def test_a_multiple_of_a_rigid_size_is_solved_for_the_other_size_with_a_condition():
    result = axon.infer("""
fun h (x : forall n. f32[n]) (y : f32[2*k]) = x + y
val a = h (input : f32[6]) (input : f32[6])
""")
    assert str(result["h"]) == "f32[n] -> f32[2*(n//2)] -> f32[n] with n % 2 == 0; n >= 2"
    assert str(result["a"]) == "f32[6]"
    with pytest.raises(AxonShapeError, match="2 does not divide 7"):
        axon.infer("fun h (x : forall n. f32[n]) (y : f32[2*k]) = x + y\n"
                   "val a = h (input : f32[7]) (input : f32[7])")


def test_a_rigid_size_may_carry_a_condition_checked_at_each_use():
    result = axon.infer("fun t (x : forall n. f32[n]) = slice 0 1 3 x")
    assert str(result["t"]) == "f32[n] -> f32[2] with n >= 3"
    with pytest.raises(AxonShapeError, match="2 < 3"):
        axon.infer("fun t (x : forall n. f32[n]) = slice 0 1 3 x\nval u = t (input : f32[2])")


def test_a_rigid_program_size_must_not_be_fixed_by_the_program():
    error = shape_error("val x = input : forall B. f32[B]\nval y = x + (input : f32[3])")
    assert error.headline == "size B is rigid (`forall`), but would be 3"
    assert {(1, 24), (2, 22)} <= set(error.positions)
    assert axon.infer("val x = input : forall B. f32[B, 2]\nval y = x * x").sizes == ("B",)


def test_forall_needs_names_and_a_dot():
    with pytest.raises(AxonSyntaxError, match="a size name after `forall`"):
        axon.infer("fun f (x : forall . f32[n]) = x")
    with pytest.raises(AxonSyntaxError, match=r"`\.` after the names of `forall`"):
        axon.infer("fun f (x : forall n f32[n]) = x")


def test_a_rigid_function_compiles_and_computes_what_numpy_does(rng):
    program = axon.compile("""
fun centre (x : forall n. f32[n, 3]) = x - reshape [1, 3] (mean 0 x)
val y = centre (input : f32[B, 3])
""")
    x = rng.standard_normal((4, 3)).astype(np.float32)
    got = program.run({"y.input0": x}, "numpy")["y"]
    np.testing.assert_allclose(got, x - x.mean(axis=0, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_forall_after_the_size_is_used_still_makes_it_rigid():
    # n is used by `x + zeros [3]` before the result's annotation says `forall n`
    error = shape_error("fun h (x : f32[n]) = ((x + zeros [3]) : forall n. f32[n])")
    assert error.headline == "size n is rigid (`forall`), but would be 3"
    assert str(axon.infer("fun h (x : f32[n]) = ((x + x) : forall n. f32[n])")["h"]) == \
        "f32[n] -> f32[n]"
    later = shape_error("fun h (x : f32[n]) (y : f32[m]) = "
                        "(let val z = (x : forall n. f32[n]) in z + zeros [3] end)")
    assert later.headline == "size n is rigid (`forall`), but would be 3"
