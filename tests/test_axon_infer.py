"""Axon's inference: each program's types written out by hand, symbolic shapes included,
and errors that name every contributing position."""
import pytest

from axgraph.dims import Dim, evaluate
from axgraph.frontends import axon
from axgraph.frontends.axon import AxonShapeError, AxonTypeError

MLP = """
fun dense (x : f32[*b, k]) (w : f32[k, n]) = relu (x @ w)
fun mlp x w1 w2 = softmax (dense x w1 @ w2)
val y = mlp (input : f32[B, 784]) (param : f32[784, 512]) (param : f32[512, 10])
"""


def types(source, **inputs):
    result = axon.infer(source, **inputs)
    return {name: str(scheme) for name, scheme in result.items()}


def checks(source, **inputs):
    return sorted(r.text for r in axon.infer(source, **inputs).residuals)


# (source, the types expected, the residual checks expected)
CASES = {
    # -- the example, and matmul -------------------------------------------------------
    "mlp": (MLP, {"dense": "f32[*b, k] -> f32[k, n] -> f32[*b, n]", "y": "f32[B, 10]"}, []),
    "matmul batch dims": ("val y = (input : f32[B, T, 8]) @ (input : f32[8, 4])",
                          {"y": "f32[B, T, 4]"}, []),
    "matmul vector-matrix": ("val y = (input : f32[8]) @ (input : f32[8, 4])", {"y": "f32[4]"}, []),
    "matmul matrix-vector": ("val y = (input : f32[3, 8]) @ (input : f32[8])", {"y": "f32[3]"}, []),
    "matmul rank-polymorphic right": ("val y = (input : f32[B, 8]) @ (input : f32[8, 2, 3])",
                                      {"y": "f32[B, 2, 3]"}, []),
    "matmul infers the contraction": ("val y = (input : f32[B, k]) @ (input : f32[16, 4])",
                                      {"y": "f32[B, 4]"}, []),
    # -- linear dims -----------------------------------------------------------------------------
    "concat adds": ("val y = concat 0 (input : f32[n, 3]) (input : f32[m, 3])",
                    {"y": "f32[m + n, 3]"}, []),
    "concat along the last dim": ("val y = concat (-1) (input : f32[B, n]) (input : f32[B, 1])",
                                  {"y": "f32[B, n + 1]"}, []),
    "doubling": ("fun dup (x : f32[n]) = concat 0 x x\nval y = dup (dup (input : f32[k]))",
                 {"dup": "f32[n] -> f32[2*n]", "y": "f32[4*k]"}, []),
    "solving 2*n": ("fun half (x : f32[2*n]) = reshape [n, 2] x\nval y = half (input : f32[10])",
                    {"half": "f32[2*n] -> f32[n, 2]", "y": "f32[5, 2]"}, []),
    "solving a sum": ("val y = concat 0 (input : f32[a]) (input : f32[3]) : f32[10]\n"
                      "val z = input : f32[a]", {"y": "f32[10]", "z": "f32[7]"}, []),
    "an expression annotation": ("val x = input : f32[2*n + 1]\nval y = slice 0 0 1 x",
                                 {"x": "f32[2*n + 1]", "y": "f32[1]"}, []),
    "inputs given by name": ("val y = x @ w", {"y": "f32[B, 10]"}, []),
    # -- divisibility ------------------------------------------------------------------------------
    "reshape names the quotient": ("val x = input : f32[M]\nval y = reshape [rows, 4] x",
                                   {"x": "f32[4*rows]", "y": "f32[rows, 4]"}, []),
    "reshape with a known size": ("val y = reshape [_, 4] (input : f32[12])", {"y": "f32[3, 4]"}, []),
    "flatten": ("val y = reshape [B, _] (input : f32[B, 28, 28])", {"y": "f32[B, 784]"}, []),
    "unflatten": ("val y = reshape [B, 28, _] (input : f32[B, 784])", {"y": "f32[B, 28, 28]"}, []),
    "an inexact division leaves a check": ("val y = reshape [_, 2] (input : f32[3*m])",
                                           {"y": "f32[m + m//2, 2]"}, ["3*m % 2 == 0"]),
    "a product stays a check": ("val y = reshape [a, b] (input : f32[12])",
                                {"y": "f32[a, b]"}, ["12 == a*b"]),
    # -- convolution and pooling -------------------------------------------------------------------
    "conv and pool, known sizes": ("val x = input : f32[N, 3, 32, 32]\n"
                                   "val y = pool 2 2 (relu (conv2d 1 1 x (param : f32[8, 3, 3, 3])))\n"
                                   "val z = conv2d 2 0 y (param : f32[16, 8, 3, 3])",
                                   {"y": "f32[N, 8, 16, 16]", "z": "f32[N, 16, 7, 7]"}, []),
    "conv, symbolic": ("val y = conv2d 1 0 (input : f32[N, 3, H, W]) (param : f32[8, 3, 5, 5])",
                       {"y": "f32[N, 8, H - 4, W - 4]"}, ["H >= 5", "W >= 5"]),
    "strided conv": ("val y = conv2d 2 1 (input : f32[N, 3, H, W]) (param : f32[8, 3, 3, 3])",
                     {"y": "f32[N, 8, (H + 1)//2, (W + 1)//2]"}, []),
    "pool, symbolic": ("val y = pool 3 3 (input : f32[N, C, H, 9])",
                       {"y": "f32[N, C, H//3, 3]"}, ["H >= 3"]),
    # -- rank polymorphism: shape variables used at two ranks ---------------------------------------
    "dense at two ranks": ("fun dense (x : f32[*b, k]) (w : f32[k, n]) = x @ w\n"
                           "val w = param : f32[8, 16]\n"
                           "val a = dense (input : f32[B, 8]) w\n"
                           "val c = dense (input : f32[B, T, 8]) w",
                           {"a": "f32[B, 16]", "c": "f32[B, T, 16]"}, []),
    "normalise at two ranks": ("fun norm (x : f32[*b, n]) = x - reshape [*b, 1] (mean (-1) x)\n"
                               "val v = norm (input : f32[8])\nval m = norm (input : f32[B, 8])",
                               {"norm": "f32[*b, n] -> f32[*b, n]", "v": "f32[8]", "m": "f32[B, 8]"},
                               []),
    "reduce the last dim": ("fun last (x : f32[*s, n]) = sum (-1) x\n"
                            "val a = last (input : f32[4])\nval c = last (input : f32[2, 3, 4])",
                            {"last": "f32[*s, n] -> f32[*s]", "a": "f32[]", "c": "f32[2, 3]"}, []),
    "flatten at two ranks": ("fun flat (x : f32[b, *s]) = reshape [b, _] x\n"
                             "val p = flat (input : f32[B, 4, 5])\nval q = flat (input : f32[B, 6])",
                             {"p": "f32[B, 20]", "q": "f32[B, 6]"}, []),
    "reductions by index": ("val x = input : f32[A, B, C]\nval s = sum 1 x\nval m = mean (-1) x\n"
                            "val t = max 0 x", {"s": "f32[A, C]", "m": "f32[A, B]", "t": "f32[B, C]"},
                            []),
    "transpose": ("val y = transpose (input : f32[B, m, n])", {"y": "f32[B, n, m]"}, []),
    "map over the leading dim": ("val y = map (fn x => softmax (x @ transpose x)) "
                                 "(input : f32[B, T, D])", {"y": "f32[B, T, T]"}, []),
    # -- loops with carried state --------------------------------------------------------------------
    "an rnn as a fold": ("val xs = input : f32[T, B, 4]\nval w = param : f32[4, 8]\n"
                         "val u = param : f32[8, 8]\n"
                         "val h = fold (fn (h, x) => tanh (x @ w + h @ u)) (zeros [B, 8]) xs",
                         {"h": "f32[B, 8]"}, []),
    "an rnn infers its hidden size from the carry": (
        "val xs = input : f32[T, B, 4]\nval h0 = input : f32[B, H]\nval w = param : f32[4, 8]\n"
        "val h = fold (fn (h, x) => tanh (x @ w + h)) h0 xs",
        {"h0": "f32[B, 8]", "h": "f32[B, 8]"}, []),
    "a tuple carry": ("val xs = input : f32[T, 3]\n"
                      "val (s, p) = fold (fn ((s, p), x) => (s + x, p * x)) (zeros [3], ones [3]) xs",
                      {"s": "f32[3]", "p": "f32[3]"}, []),
    "scan": ("val xs = input : f32[T, 3]\n"
             "val (total, partial) = scan (fn (c, x) => (c + x, sum 0 c)) (zeros [3]) xs",
             {"total": "f32[3]", "partial": "f32[T]"}, []),
    # x may be a scalar, [1] or [3]: the most general type keeps the broadcast as a condition
    "a fold generalized": ("fun total xs = fold (fn (c, x) => c + x) (zeros [3]) xs",
                           {"total": "f32[n, *s] -> f32[3] with [3] == broadcast([3], [*s])"}, []),
    # -- broadcasting ----------------------------------------------------------------------------------
    "bias": ("val y = (input : f32[B, n]) + (input : f32[n])", {"y": "f32[B, n]"}, []),
    "a column of ones broadcasts": ("val y = (input : f32[B, 1]) * (input : f32[B, n])",
                                    {"y": "f32[B, n]"}, []),
    "a scalar": ("val y = (input : f32[B, n]) * 2.0", {"y": "f32[B, n]"}, []),
    "two names meet": ("val y = (input : f32[B, n]) + (input : f32[m])", {"y": "f32[B, n]"}, []),
    "a polymorphic sum carries its broadcast": (
        "fun add x y = x + y\nval a = add (input : f32[B, 3]) (input : f32[3])",
        {"add": "'t[*s] -> 't[*s2] -> 't[*s3] with [*s3] == broadcast([*s], [*s2])",
         "a": "f32[B, 3]"}, []),
    "a broadcast at the front": ("fun center x = x - mean 0 x",
                                 {"center": "'t[n, *s] -> 't[n, *s]"}, []),
    # -- functions, tuples, let-polymorphism, element types --------------------------------------------
    "higher order": ("fun twice f x = f (f x)\nval y = twice (fn z => z * 2.0) (input : f32[4])",
                     {"twice": "('a -> 'a) -> 'a -> 'a", "y": "f32[4]"}, []),
    "let polymorphism": ("val p = let fun id x = x in (id (input : f32[3]), id (input : f32[4, 5])) end",
                         {"p": "f32[3] * f32[4, 5]"}, []),
    "a lambda is generalized, an application is not": (
        "val f = fn x => x * 2.0\nval g = f (input : f64[2])",
        {"f": "'t[*s] -> 't[*s]", "g": "f64[2]"}, []),
    "f64 programs": ("val y = (input : f64[n]) * 0.5", {"y": "f64[n]"}, []),
    "a slice": ("val y = slice 1 1 3 (input : f32[B, n])", {"y": "f32[B, 2]"}, ["n >= 3"]),
}


#: Inputs given to `infer` by name, for the cases that have some.
INPUTS = {"inputs given by name": {"x": "f32[B, 784]", "w": ("k", 10)}}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inferred_types_are_the_hand_written_ones(name):
    source, expected, residuals = CASES[name]
    inputs = INPUTS.get(name, {})
    got = types(source, **inputs)
    assert {k: got[k] for k in expected} == expected
    assert checks(source, **inputs) == sorted(residuals)


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


def test_inputs_given_by_name_share_the_program_sizes():
    result = axon.infer("val y = x @ w\nval z = input : f32[B, 3]", x="f32[B, 784]", w=("k", 10))
    assert str(result["y"]) == "f32[B, 10]"
    assert result.sizes == ("B",)  # k is 784, decided by x
    assert result["y"].shape == (Dim("B"), 10)


def test_a_stack_of_strided_layers_gives_the_composed_floor_and_one_bound():
    source = ("val x = input : f32[N, 3, H, W]\n"
              "val y = pool 2 2 (relu (conv2d 1 1 x (param : f32[8, 3, 3, 3])))\n"
              "val z = pool 2 2 (conv2d 2 0 y (param : f32[16, 8, 3, 3]))")
    result = axon.infer(source)
    height = result["z"].shape[2]
    for h in range(10, 80):
        by_hand = h                             # conv 3x3, padding 1, stride 1: same size
        by_hand = (by_hand - 2) // 2 + 1        # pool 2, stride 2
        by_hand = (by_hand - 3) // 2 + 1        # conv 3x3, no padding, stride 2
        by_hand = (by_hand - 2) // 2 + 1        # pool 2, stride 2
        assert evaluate(height, {"H": h}) == by_hand
    assert sorted(r.text for r in result.residuals) == ["H >= 10", "W >= 10"]
    # H = 10 is the smallest that leaves one output row: 10 -> 10 -> 5 -> 2 -> 1 (9 gives 0)


def test_printing_shows_each_binding_then_the_checks():
    text = str(axon.infer("val y = conv2d 1 0 (input : f32[N, 3, H, 8]) (param : f32[8, 3, 5, 5])"))
    # the check comes from the convolution, its two arguments and their annotations
    assert text == "val y : f32[N, 8, H - 4, 4]\ncheck H >= 5  (from 1:9, 1:20, 1:29, 1:46, 1:55)"


# -- errors name every position that contributed ----------------------------------------------

def error_of(source, kind=AxonShapeError, **inputs):
    with pytest.raises(kind) as info:
        axon.infer(source, **inputs)
    return info.value


def test_a_matmul_mismatch_names_both_annotations_and_the_function_that_joins_them():
    error = error_of(MLP.replace("f32[512, 10]", "f32[256, 10]"))
    assert error.headline == "dims differ: 512 vs 256"
    # the two parameters' annotations, and inside mlp the product joining them
    assert {(4, 44), (4, 68), (3, 41)} <= set(error.positions)
    assert "    val y = mlp (input : f32[B, 784]) (param : f32[784, 512]) (param : f32[256, 10])\n" \
           + " " * 71 + "^^^^^^^^^^^^" in error.message


def test_a_size_pinned_in_two_places_names_both():
    error = error_of("val x = input : f32[B, 3]\nval t = input : f32[B, 4]\nval y = x + t")
    assert error.headline == "dims differ: 3 vs 4"
    assert {(1, 17), (2, 17), (3, 11)} <= set(error.positions)


def test_positions_do_not_depend_on_the_order_of_declarations():
    first = error_of("val a = input : f32[n]\nval b = input : f32[m]\nval c = a + b\n"
                     "val d = a + (input : f32[3])\nval e = b + (input : f32[4])")
    second = error_of("val a = input : f32[n]\nval b = input : f32[m]\nval c = a + b\n"
                      "val e = b + (input : f32[4])\nval d = a + (input : f32[3])")
    assert {p[0] for p in first.positions} == {p[0] for p in second.positions} == {1, 2, 3, 4, 5}


def test_a_window_too_big_names_the_input_and_the_filter():
    error = error_of("val x = input : f32[N, 3, 4, 4]\n"
                     "val y = conv2d 1 0 x (param : f32[8, 3, 5, 5])")
    assert error.headline.startswith("the filter is")
    assert {(1, 17), (2, 9), (2, 31)} <= set(error.positions)


def test_a_carry_that_changes_shape_is_an_error_at_the_loop():
    error = error_of("val xs = input : f32[T, 3]\n"
                     "val h = fold (fn (c, x) => concat 0 c x) (zeros [3]) xs")
    assert "size" in error.headline or "dims differ" in error.headline
    assert (2, 9) in error.positions or (2, 14) in error.positions
    nested = error_of("val xs = input : f32[T, 3, 3]\n"
                      "val h = fold (fn (c, x) => map (fn r => c) c) xs xs")
    assert "contain itself" in nested.headline or "ranks differ" in nested.headline


def test_an_inexact_size_says_which_fraction():
    error = error_of("val y = reshape [_, 2] (input : f32[7])")
    assert error.headline.endswith("would have to be 7/2, not a whole number")
    assert set(error.positions) == {(1, 9), (1, 24), (1, 33)}


def test_type_errors_say_what_was_used_as_what():
    error = error_of("val x = input : f32[7]\nval y = x 3", AxonTypeError)
    assert error.headline.startswith("a tensor is used as a function")
    assert error.positions == ((1, 17), (2, 11))
    assert error_of("val y = (input : f32[3]) + (input : f64[3])", AxonTypeError).headline in (
        "element types differ: f32 vs f64", "element types differ: f64 vs f32")
    assert "unknown name `z`" in error_of("val y = z", AxonTypeError).headline
    recursive = error_of("fun f x = f x", AxonTypeError)
    assert "cannot call itself" in recursive.message
    assert "must be an int literal" in error_of("val y = sum x x", AxonTypeError, x="f32[3]").headline
    assert "needs its dim first" in error_of("val y = map sum (input : f32[3, 3])", AxonTypeError).headline
    assert "inside a function" in error_of("fun f x = x @ (param : f32[3, 3])", AxonTypeError).headline


def test_ranks_that_differ_are_an_error():
    error = error_of("val y = sum 2 (input : f32[3, 4])")
    assert error.headline.startswith("ranks differ")
    assert error.positions == ((1, 15), (1, 24))


def test_an_input_of_unknown_shape_is_reported_when_compiling():
    with pytest.raises(AxonTypeError, match=r"the type of input y, 'a, is not known: annotate it"):
        axon.compile("val y = input")
    with pytest.raises(AxonShapeError, match=r"the rank of input y, f32\[\*s\], is not known"):
        axon.compile("val y = input : f32[*s]")
