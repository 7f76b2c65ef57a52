"""ONNX import: models built with onnx.helper run in axgraph as in onnxruntime.

Each model runs in onnxruntime (the reference) and, imported, on every
transformer; the outputs must agree to float32 tolerances.
"""
from __future__ import annotations

import numpy as np
import pytest

import axgraph as ng

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from axgraph.frontends.onnx import (OnnxImportError, UnsupportedOperatorError,  # noqa: E402
                                    import_model, supported_operators)

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
TRANSFORMERS = ("numpy", "cpu", "jax")
rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def make_model(nodes, inputs, outputs, initializers=(), opset=17):
    """A model of `nodes`; inputs and outputs are (name, elem_type, shape) triples."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=[onnx.numpy_helper.from_array(np.asarray(a), name) for name, a in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    if all(shape is not None for _, _, shape in outputs):  # (the checker wants output shapes)
        onnx.checker.check_model(model)
    return model


def run_onnxruntime(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_axgraph(model, feeds, transformer, **options):
    """The model's outputs computed by axgraph (inputs fed by their ONNX names)."""
    imported = import_model(model, **options)
    with ng.make_transformer(transformer) as t:
        computation = t.computation(imported.outputs, *imported.inputs)
        return computation(*(feeds[name] for name in imported.input_names))


def check(model, feeds, transformers=TRANSFORMERS, rtol=1e-4, atol=1e-5, **options):
    """The model's outputs in axgraph agree with onnxruntime's on each transformer."""
    expected = run_onnxruntime(model, feeds)
    for transformer in transformers:
        results = run_axgraph(model, feeds, transformer, **options)
        assert len(results) == len(expected)
        for got, want in zip(results, expected):
            assert got.shape == want.shape, (transformer, got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                       err_msg=f"on the {transformer} transformer")
    return expected


def node(op_type, inputs, outputs, **attributes):
    return helper.make_node(op_type, inputs, outputs, **attributes)


# -- dense layers ----------------------------------------------------------------------------
def test_gemm_relu_mlp_with_dynamic_batch():
    w1, b1, w2 = randn(4, 5), randn(5), randn(3, 5)
    model = make_model(
        [node("Gemm", ["x", "w1", "b1"], ["h"]), node("Relu", ["h"], ["r"]),
         node("Gemm", ["r", "w2"], ["y"], transB=1, alpha=0.5)],
        [("x", F, ["batch", 4])], [("y", F, ["batch", 3])],
        [("w1", w1), ("b1", b1), ("w2", w2)])
    check(model, {"x": randn(2, 4)})
    for batch in (1, 6):  # one computation, several batch sizes
        x = randn(batch, 4)
        want = 0.5 * np.maximum(x @ w1 + b1, 0) @ w2.T
        np.testing.assert_allclose(run_axgraph(model, {"x": x}, "numpy")[0], want, rtol=1e-5,
                                   atol=1e-5)


def test_gemm_trans_a_and_beta():
    model = make_model([node("Gemm", ["a", "b", "c"], ["y"], transA=1, beta=2.0)],
                       [("a", F, [4, 3]), ("b", F, [4, 5]), ("c", F, [1, 5])], [("y", F, [3, 5])])
    check(model, {"a": randn(4, 3), "b": randn(4, 5), "c": randn(1, 5)})


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3, 4), (4, 5)),
    ((2, 3, 4), (4, 5)),            # batched times a matrix
    ((2, 3, 4), (2, 4, 5)),         # batched times batched
    ((2, 1, 3, 4), (1, 6, 4, 5)),   # batch dims that broadcast both ways
    ((4,), (2, 4, 5)),              # a vector on the left
    ((2, 3, 4), (4,)),              # a vector on the right
])
def test_matmul_broadcasts_batch_dimensions(a_shape, b_shape):
    model = make_model([node("MatMul", ["a", "b"], ["y"])],
                       [("a", F, list(a_shape)), ("b", F, list(b_shape))], [("y", F, None)])
    a, b = randn(*a_shape), randn(*b_shape)
    np.testing.assert_allclose(check(model, {"a": a, "b": b})[0], np.matmul(a, b), rtol=1e-5,
                               atol=1e-5)


def test_matmul_of_a_square_matrix_with_itself():
    model = make_model([node("MatMul", ["a", "a"], ["y"])], [("a", F, [3, 3])], [("y", F, [3, 3])])
    check(model, {"a": randn(3, 3)})


# -- elementwise -----------------------------------------------------------------------------
@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div", "Pow"])
def test_binary_ops_broadcast_like_numpy(op_type):
    model = make_model([node(op_type, ["a", "b"], ["y"])],
                       [("a", F, [2, 1, 4]), ("b", F, [3, 1])], [("y", F, [2, 3, 4])])
    a, b = np.abs(randn(2, 1, 4)) + 0.5, randn(3, 1)
    check(model, {"a": a, "b": b})


def test_broadcast_against_an_initializer_and_a_scalar():
    model = make_model([node("Mul", ["x", "s"], ["m"]), node("Add", ["m", "bias"], ["y"])],
                       [("x", F, ["batch", 3, 4])], [("y", F, ["batch", 3, 4])],
                       [("s", np.array(2.0, np.float32)), ("bias", randn(3, 1))])
    check(model, {"x": randn(2, 3, 4)})


def test_broadcast_of_two_inputs_sharing_a_dim_param():
    model = make_model([node("Add", ["a", "b"], ["y"])],
                       [("a", F, ["n", 3]), ("b", F, ["n", 1])], [("y", F, ["n", 3])])
    imported = import_model(model)
    assert imported.inputs[0].axes[0] is imported.inputs[1].axes[0] is imported.axes["n"]
    check(model, {"a": randn(5, 3), "b": randn(5, 1)})


@pytest.mark.parametrize("op_type", ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Neg",
                                     "Abs", "Reciprocal", "Softplus"])
def test_unary_ops(op_type):
    model = make_model([node(op_type, ["x"], ["y"])], [("x", F, [3, 4])], [("y", F, [3, 4])])
    x = randn(3, 4)
    if op_type in ("Log", "Sqrt", "Reciprocal"):
        x = np.abs(x) + 0.1
    check(model, {"x": x})


@pytest.mark.parametrize("op_type", ["Floor", "Sign", "Sin", "Cos", "Tan"])
def test_more_unary_ops(op_type):
    model = make_model([node(op_type, ["x"], ["y"])], [("x", F, [3, 4])], [("y", F, [3, 4])])
    check(model, {"x": randn(3, 4)})


def test_variadic_clip_dropout_identity_and_size():
    model = make_model(
        [node("Max", ["a", "b", "c"], ["mx"]), node("Min", ["a", "b"], ["mn"]),
         node("Sum", ["a", "b", "c"], ["sm"]), node("Clip", ["a", "low", "high"], ["cl"]),
         node("Dropout", ["a"], ["dr"]), node("Identity", ["b"], ["id"]),
         node("Size", ["a"], ["size"]), node("Cast", ["size"], ["sf"], to=F),
         node("Mul", ["a", "sf"], ["scaled"]),
         node("Constant", [], ["k"], value_floats=[1.0, 2.0, 3.0]), node("Add", ["b", "k"], ["bk"])],
        [("a", F, ["batch", 3]), ("b", F, [3]), ("c", F, [1, 3])],
        [("mx", F, None), ("mn", F, None), ("sm", F, None), ("cl", F, None), ("dr", F, None),
         ("id", F, None), ("scaled", F, None), ("bk", F, None)],
        [("low", np.float32(-0.5)), ("high", np.float32(0.5))])
    check(model, {"a": randn(2, 3), "b": randn(3), "c": randn(1, 3)})


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_reductions(op_type, keepdims):
    model = make_model([node(op_type, ["x"], ["y"], axis=-1, keepdims=keepdims)],
                       [("x", F, [2, 3, 4])], [("y", I64, None)])
    check(model, {"x": randn(2, 3, 4)})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    model = make_model([node("Gelu", ["x"], ["y"], approximate=approximate)],
                       [("x", F, [2, 5])], [("y", F, [2, 5])], opset=20)
    check(model, {"x": randn(2, 5)})


def test_mod_of_floats():
    model = make_model([node("Mod", ["a", "b"], ["y"], fmod=1)],
                       [("a", F, [2, 4]), ("b", F, [4])], [("y", F, [2, 4])])
    a, b = 5 * randn(2, 4), np.array([1.5, -2.0, 3.0, -0.7], np.float32)
    np.testing.assert_allclose(check(model, {"a": a, "b": b})[0], np.fmod(a, b), rtol=1e-5,
                               atol=1e-5)
    # fmod=0 (the divisor's sign) is Python's %; onnxruntime runs it on floats from opset 28
    floor_mod = make_model([node("Mod", ["a", "b"], ["y"])],
                           [("a", F, [2, 4]), ("b", F, [4])], [("y", F, [2, 4])])
    for transformer in TRANSFORMERS:
        np.testing.assert_allclose(run_axgraph(floor_mod, {"a": a, "b": b}, transformer)[0],
                                   np.mod(a, b), rtol=1e-5, atol=1e-5)


def test_comparisons_where_and_cast():
    model = make_model(
        [node("Less", ["a", "b"], ["lt"]), node("Greater", ["a", "b"], ["gt"]),
         node("Equal", ["i", "j"], ["eq"]), node("Where", ["lt", "a", "b"], ["w"]),
         node("Cast", ["gt"], ["g"], to=F), node("Cast", ["a"], ["ai"], to=I64)],
        [("a", F, [2, 3]), ("b", F, [3]), ("i", I64, [2, 3]), ("j", I64, [1, 3])],
        [("lt", BOOL, [2, 3]), ("eq", BOOL, [2, 3]), ("w", F, [2, 3]), ("g", F, [2, 3]),
         ("ai", I64, [2, 3])])
    check(model, {"a": 3 * randn(2, 3), "b": randn(3),
                  "i": np.array([[1, 2, 3], [3, 2, 1]]), "j": np.array([[1, 2, 1]])})


@pytest.mark.parametrize("op_type, attributes", [
    ("LeakyRelu", {"alpha": 0.1}), ("Elu", {"alpha": 0.5}), ("Selu", {}),
    ("HardSigmoid", {}), ("HardSwish", {}),
])
def test_more_activations(op_type, attributes):
    model = make_model([node(op_type, ["x"], ["y"], **attributes)], [("x", F, [3, 4])],
                       [("y", F, [3, 4])])
    check(model, {"x": 4 * randn(3, 4)})


def test_prelu_and_logical_ops():
    model = make_model(
        [node("PRelu", ["x", "slope"], ["p"]), node("Greater", ["x", "zero"], ["g"]),
         node("Less", ["x", "one"], ["l"]), node("Or", ["g", "l"], ["o"]),
         node("Xor", ["g", "l"], ["e"]), node("Not", ["g"], ["n"])],
        [("x", F, [2, 3])], [("p", F, [2, 3]), ("o", BOOL, [2, 3]), ("e", BOOL, [2, 3]),
                             ("n", BOOL, [2, 3])],
        [("slope", np.array([0.1, 0.2, 0.3], np.float32)), ("zero", np.float32(0)),
         ("one", np.float32(1))])
    check(model, {"x": 2 * randn(2, 3)})


# -- shapes ----------------------------------------------------------------------------------
def test_reshape_transpose_flatten():
    model = make_model(
        [node("Reshape", ["x", "shape"], ["r"]), node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
         node("Flatten", ["t"], ["y"], axis=2)],
        [("x", F, ["batch", 6, 4])], [("y", F, ["batch", 2, 12])],
        [("shape", np.array([0, 3, -1, 4], np.int64))])
    check(model, {"x": randn(2, 6, 4)})


def test_reshape_of_a_symbolic_batch_through_shape_arithmetic():
    """Shape -> Gather -> Concat -> Reshape: the chain exporters write for a dynamic batch."""
    model = make_model(
        [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"], axis=0),
         node("Unsqueeze", ["n", "zero1"], ["n1"]), node("Concat", ["n1", "rest"], ["shape"], axis=0),
         node("Reshape", ["x", "shape"], ["y"])],
        [("x", F, ["batch", 2, 3, 4])], [("y", F, ["batch", 24])],
        [("zero", np.array(0, np.int64)), ("zero1", np.array([0], np.int64)),
         ("rest", np.array([24], np.int64))])
    check(model, {"x": randn(3, 2, 3, 4)})


def test_slice_to_a_size_read_from_a_shape():
    """Slice(x, 0, Shape(x)[0:1]) along a symbolic batch: the whole dimension."""
    model = make_model(
        [node("Shape", ["x"], ["s"]), node("Slice", ["s", "zero", "one"], ["n"]),
         node("Slice", ["x", "zero", "n", "zero"], ["y"]),
         node("Slice", ["x", "one", "big", "one"], ["z"])],
        [("x", F, ["batch", 3])], [("y", F, ["batch", 3]), ("z", F, ["batch", 2])],
        [("zero", np.array([0], np.int64)), ("one", np.array([1], np.int64)),
         ("big", np.array([2 ** 63 - 1], np.int64))])
    check(model, {"x": randn(4, 3)})


def test_concat_slice_split_squeeze_unsqueeze():
    model = make_model(
        [node("Concat", ["a", "b"], ["c"], axis=1),
         node("Slice", ["c", "starts", "ends", "axes", "steps"], ["s"]),
         node("Split", ["c", "sizes"], ["p", "q"], axis=1),
         node("Unsqueeze", ["q", "ax"], ["u"]), node("Squeeze", ["u", "ax"], ["v"])],
        [("a", F, [2, 3]), ("b", F, [2, 4])],
        [("s", F, None), ("p", F, [2, 5]), ("v", F, [2, 2])],
        [("starts", np.array([-1, 1], np.int64)), ("ends", np.array([-100, 2 ** 62], np.int64)),
         ("axes", np.array([0, 1], np.int64)), ("steps", np.array([-1, 2], np.int64)),
         ("sizes", np.array([5, 2], np.int64)), ("ax", np.array([0, 2], np.int64))])
    check(model, {"a": randn(2, 3), "b": randn(2, 4)})


def test_gather_embedding_and_constant_index():
    table = randn(10, 4)
    model = make_model(
        [node("Gather", ["table", "ids"], ["e"]), node("Gather", ["e", "one"], ["g"], axis=1)],
        [("ids", I64, ["batch", 3])], [("e", F, ["batch", 3, 4]), ("g", F, ["batch", 4])],
        [("table", table), ("one", np.array(-2, np.int64))])
    check(model, {"ids": np.array([[1, 9, 0], [3, 3, -1]], np.int64)})


def test_gather_of_constant_indices_counts_negatives_from_the_end():
    model = make_model([node("Gather", ["x", "ids"], ["y"], axis=1)], [("x", F, ["batch", 5])],
                       [("y", F, ["batch", 2, 2])],
                       [("ids", np.array([[0, -1], [-2, 3]], np.int64))])
    x = randn(3, 5)
    np.testing.assert_allclose(check(model, {"x": x})[0], x[:, [[0, 4], [3, 3]]])


@pytest.mark.parametrize("repeats", [[2, 1, 3], [1, 1, 1], [1, 2, 1]])
def test_tile(repeats):
    model = make_model([node("Tile", ["x", "repeats"], ["y"])], [("x", F, ["batch", 2, 3])],
                       [("y", F, None)], [("repeats", np.array(repeats, np.int64))])
    x = randn(2, 2, 3)
    np.testing.assert_allclose(check(model, {"x": x})[0], np.tile(x, repeats))


@pytest.mark.parametrize("modes", [("asymmetric", "floor"), ("half_pixel", "round_prefer_floor")])
@pytest.mark.parametrize("by_sizes", [False, True])
def test_resize_nearest_by_whole_factors(modes, by_sizes):
    scales = np.array([1, 1, 2, 3], np.float32)
    inputs = ["x", "", "", "sizes"] if by_sizes else ["x", "", "scales"]
    model = make_model([node("Resize", inputs, ["y"], mode="nearest",
                             coordinate_transformation_mode=modes[0], nearest_mode=modes[1])],
                       [("x", F, [2, 3, 2, 2])], [("y", F, [2, 3, 4, 6])],
                       [("scales", scales), ("sizes", np.array([2, 3, 4, 6], np.int64))])
    x = randn(2, 3, 2, 2)
    want = x.repeat(2, axis=2).repeat(3, axis=3)
    np.testing.assert_allclose(check(model, {"x": x})[0], want)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-1, 0, 2])
def test_trilu(upper, k):
    model = make_model([node("Trilu", ["x", "k"], ["y"], upper=upper)], [("x", F, [2, 3, 4])],
                       [("y", F, [2, 3, 4])], [("k", np.array(k, np.int64))])
    x = randn(2, 3, 4)
    want = np.triu(x, k) if upper else np.tril(x, k)
    np.testing.assert_allclose(check(model, {"x": x})[0], want)


def test_expand_and_constants():
    model = make_model(
        [node("Constant", [], ["k"], value=onnx.numpy_helper.from_array(randn(3, 1))),
         node("Add", ["x", "k"], ["s"]), node("Expand", ["s", "shape"], ["y"])],
        [("x", F, [1, 4])], [("y", F, [2, 3, 4])], [("shape", np.array([2, 1, 1], np.int64))])
    check(model, {"x": randn(1, 4)})


@pytest.mark.parametrize("equation, shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),          # implicit output: the letters seen once
    ("i j , i j -> i", [(3, 4), (3, 4)]),  # spaces, and a product summed over one axis
])
def test_einsum(equation, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    model = make_model([node("Einsum", names, ["y"], equation=equation)],
                       [(n, F, list(s)) for n, s in zip(names, shapes)], [("y", F, None)])
    arrays = [randn(*s) for s in shapes]
    got = check(model, dict(zip(names, arrays)))[0]
    np.testing.assert_allclose(got, np.einsum(equation.replace(" ", ""), *arrays), rtol=1e-5,
                               atol=1e-5)


def test_expand_to_a_shape_read_at_run_time():
    """Expand to Shape(x), x of a symbolic batch: the shape is the array [batch, 3]."""
    model = make_model([node("Shape", ["x"], ["s"]), node("Expand", ["bias", "s"], ["b"]),
                        node("Mul", ["x", "b"], ["y"])],
                       [("x", F, ["batch", 3])], [("y", F, ["batch", 3])],
                       [("bias", randn(1, 3))])
    for batch in (1, 4):
        check(model, {"x": randn(batch, 3)})


def test_arithmetic_on_symbolic_sizes():
    """Shape -> Slice -> Mul -> Concat -> Reshape: (batch, 4, 2) to (batch * 4, 2)."""
    model = make_model(
        [node("Shape", ["x"], ["s"]), node("Slice", ["s", "zero", "one"], ["n"]),
         node("Mul", ["n", "four"], ["rows"]), node("Concat", ["rows", "two"], ["shape"], axis=0),
         node("Reshape", ["x", "shape"], ["y"])],
        [("x", F, ["batch", 4, 2])], [("y", F, [None, 2])],
        [("zero", np.array([0], np.int64)), ("one", np.array([1], np.int64)),
         ("four", np.array([4], np.int64)), ("two", np.array([2], np.int64))])
    check(model, {"x": randn(3, 4, 2)})


def test_sizes_compared_and_chosen():
    """TorchScript's pattern: Where(Equal(shape, -1), ones, shape) before an Expand."""
    model = make_model(
        [node("Shape", ["x"], ["s"]), node("Equal", ["s", "minus_one"], ["unknown"]),
         node("Where", ["unknown", "ones", "s"], ["target"]),
         node("Expand", ["bias", "target"], ["b"]), node("Add", ["x", "b"], ["y"])],
        [("x", F, ["batch", 3])], [("y", F, ["batch", 3])],
        [("minus_one", np.array([-1, -1], np.int64)), ("ones", np.array([1, 1], np.int64)),
         ("bias", randn(3))])
    check(model, {"x": randn(2, 3)})


def test_a_symbolic_size_used_as_a_value():
    """A mean over the batch written as ReduceSum / Cast(Shape(x)[0]): the size is read when
    the model runs."""
    model = make_model(
        [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"]),
         node("Cast", ["n"], ["nf"], to=F), node("ReduceSum", ["x", "axes"], ["total"], keepdims=0),
         node("Div", ["total", "nf"], ["y"])],
        [("x", F, ["batch", 3])], [("y", F, [3])],
        [("zero", np.array(0, np.int64)), ("axes", np.array([0], np.int64))])
    for batch in (2, 5):
        x = randn(batch, 3)
        np.testing.assert_allclose(check(model, {"x": x})[0], x.mean(axis=0), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("pads, value", [([0, 1, 2, 0], 0.0), ([1, 0, 0, 2], 1.5),
                                         ([0, -1, 1, 1], 0.0)])   # a negative pad crops
def test_pad(pads, value):
    model = make_model([node("Pad", ["x", "pads", "value"], ["y"])], [("x", F, [2, 3])],
                       [("y", F, None)],
                       [("pads", np.array(pads, np.int64)), ("value", np.float32(value))])
    check(model, {"x": randn(2, 3)})


def test_constant_of_a_shape_read_at_run_time():
    model = make_model([node("Shape", ["x"], ["s"]),
                        node("ConstantOfShape", ["s"], ["c"],
                             value=onnx.numpy_helper.from_array(np.array([2.5], np.float32))),
                        node("Add", ["x", "c"], ["y"])],
                       [("x", F, ["batch", 3])], [("y", F, ["batch", 3])])
    check(model, {"x": randn(4, 3)})


# -- reductions, softmax ---------------------------------------------------------------------
@pytest.mark.parametrize("op_type", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                                     "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                                     "ReduceLogSumExp"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions_with_axes_as_input(op_type, keepdims):
    model = make_model([node(op_type, ["x", "axes"], ["y"], keepdims=keepdims)],
                       [("x", F, [2, 3, 4])], [("y", F, None)],
                       [("axes", np.array([-1, 0], np.int64))], opset=18)
    check(model, {"x": randn(2, 3, 4)})


def test_reductions_with_axes_as_attribute_and_all_axes():
    model = make_model([node("ReduceMean", ["x"], ["m"], axes=[1]),
                        node("ReduceMax", ["x"], ["a"], keepdims=0)],
                       [("x", F, [2, 3, 4])], [("m", F, None), ("a", F, None)], opset=13)
    check(model, {"x": randn(2, 3, 4)})


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
def test_softmax_along_an_axis(op_type):
    model = make_model([node(op_type, ["x"], ["y"], axis=1)], [("x", F, [2, 3, 4])],
                       [("y", F, [2, 3, 4])])
    check(model, {"x": randn(2, 3, 4)})


def test_layer_normalization():
    model = make_model([node("LayerNormalization", ["x", "g", "b"], ["y"], epsilon=1e-3)],
                       [("x", F, ["batch", 3, 4])], [("y", F, ["batch", 3, 4])],
                       [("g", randn(4)), ("b", randn(4))])
    check(model, {"x": randn(2, 3, 4)})


# -- convolutional layers --------------------------------------------------------------------
@pytest.mark.parametrize("attributes", [
    {},
    {"pads": [1, 1, 1, 1], "strides": [2, 2]},
    {"pads": [0, 1, 2, 1], "dilations": [2, 1]},    # uneven padding
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
])
def test_conv(attributes):
    model = make_model([node("Conv", ["x", "w", "b"], ["y"], **attributes)],
                       [("x", F, ["batch", 2, 7, 6])], [("y", F, None)],
                       [("w", randn(3, 2, 3, 3)), ("b", randn(3))])
    check(model, {"x": randn(2, 2, 7, 6)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("group, out_channels", [(2, 4), (4, 4)])  # 4: depthwise
def test_grouped_conv(group, out_channels):
    model = make_model([node("Conv", ["x", "w", "b"], ["y"], group=group, pads=[1, 1, 1, 1])],
                       [("x", F, ["batch", 4, 5, 5])], [("y", F, None)],
                       [("w", randn(out_channels, 4 // group, 3, 3)), ("b", randn(out_channels))])
    check(model, {"x": randn(2, 4, 5, 5)}, atol=1e-4)


@pytest.mark.parametrize("attributes", [
    {"strides": [2, 2]},
    {"strides": [2, 1], "pads": [1, 0, 1, 0], "dilations": [1, 2]},
    {"strides": [2, 2], "pads": [0, 1, 1, 2]},    # uneven padding
    {"strides": [1, 1], "group": 2},
])
def test_conv_transpose(attributes):
    model = make_model([node("ConvTranspose", ["x", "w", "b"], ["y"], **attributes)],
                       [("x", F, ["batch", 4, 4, 3])], [("y", F, None)],
                       [("w", randn(4, 3, 3, 3)), ("b", randn(3 * attributes.get("group", 1)))])
    check(model, {"x": randn(2, 4, 4, 3)}, atol=1e-4)


def test_conv_1d_without_bias():
    model = make_model([node("Conv", ["x", "w"], ["y"], pads=[1, 1])],
                       [("x", F, [2, 3, 8])], [("y", F, None)], [("w", randn(4, 3, 3))])
    check(model, {"x": randn(2, 3, 8)}, atol=1e-4)


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attributes", [{"kernel_shape": [2, 2], "strides": [2, 2]},
                                        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}])
def test_pooling(op_type, attributes):
    model = make_model([node(op_type, ["x"], ["y"], **attributes)],
                       [("x", F, ["batch", 2, 6, 6])], [("y", F, None)])
    check(model, {"x": randn(2, 2, 6, 6)})


UNEVEN_POOLING = [
    {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 0, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [2, 0, 0, 1], "count_include_pad": 1},
    {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
     "count_include_pad": 1},
    {"kernel_shape": [3, 3], "strides": [3, 3], "pads": [0, 0, 2, 2], "ceil_mode": 1,
     "count_include_pad": 1},  # a last window that would start in the padding is dropped
    {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "SAME_LOWER",
     "count_include_pad": 1},
]


def _pooling_model(op_type, attributes, shape):
    attributes = dict(attributes)
    if op_type == "MaxPool":
        attributes.pop("count_include_pad", None)
    return make_model([node(op_type, ["x"], ["y"], **attributes)],
                      [("x", F, list(shape))], [("y", F, None)], opset=19)


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attributes", UNEVEN_POOLING)
@pytest.mark.parametrize("size", [7, 6])
def test_pooling_with_uneven_pads_count_include_pad_and_ceil_mode(op_type, attributes, size):
    model = _pooling_model(op_type, attributes, ("batch", 3, size, size))
    check(model, {"x": randn(2, 3, size, size)}, transformers=("numpy", "cpu"))


def _reference_pool(x, op_type, attributes):
    """ONNX pooling of NCHW `x` as onnxruntime runs it, in float64 NumPy: each window
    clipped to the input (a max, or a sum divided by the elements that count)."""
    (kh, kw), (sh, sw) = attributes["kernel_shape"], attributes["strides"]
    pads = attributes.get("pads", [0, 0, 0, 0])
    ceil_mode = attributes.get("ceil_mode", 0)
    counted = attributes.get("count_include_pad", 0)
    out = []
    for n, k, s, b, e in zip(x.shape[2:], (kh, kw), (sh, sw), pads[:2], pads[2:]):
        count = (-(-(n + b + e - k) // s) if ceil_mode else (n + b + e - k) // s) + 1
        out.append(count - 1 if ceil_mode and (count - 1) * s >= n + b else count)
    y = np.zeros(x.shape[:2] + tuple(out))
    for i in range(out[0]):
        for j in range(out[1]):
            r0, c0 = i * sh - pads[0], j * sw - pads[1]
            rows = slice(max(r0, 0), min(r0 + kh, x.shape[2]))
            cols = slice(max(c0, 0), min(c0 + kw, x.shape[3]))
            window = x[:, :, rows, cols]
            if op_type == "MaxPool":
                y[:, :, i, j] = window.max(axis=(2, 3))
            else:
                h = (min(r0 + kh, x.shape[2] + pads[2]) - max(r0, -pads[0])) if counted \
                    else rows.stop - rows.start
                w = (min(c0 + kw, x.shape[3] + pads[3]) - max(c0, -pads[1])) if counted \
                    else cols.stop - cols.start
                y[:, :, i, j] = window.sum(axis=(2, 3)) / (h * w)
    return y


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attributes", UNEVEN_POOLING[:-1])
def test_gradients_of_uneven_pooling_match_finite_differences(op_type, attributes):
    x = randn(1, 2, 7, 7)
    model = _pooling_model(op_type, attributes, x.shape)
    imported = import_model(model)
    (y,), (placeholder,) = imported.outputs, imported.inputs
    np.testing.assert_allclose(run_onnxruntime(model, {"x": x})[0],
                               _reference_pool(x.astype(np.float64), op_type, attributes),
                               rtol=1e-5, atol=1e-6)  # the reference is onnxruntime's rule
    weights = randn(*_reference_pool(x, op_type, attributes).shape)
    loss = ng.sum(y * ng.constant(weights, y.axes), reduction_axes=y.axes)
    expected = np.zeros(x.size)
    step = 1e-6
    for k in range(x.size):
        shifted = x.astype(np.float64).reshape(-1).copy()
        shifted[k] += step
        above = (_reference_pool(shifted.reshape(x.shape), op_type, attributes) * weights).sum()
        shifted[k] -= 2 * step
        below = (_reference_pool(shifted.reshape(x.shape), op_type, attributes) * weights).sum()
        expected[k] = (above - below) / (2 * step)
    for transformer in ("numpy", "cpu"):
        with ng.make_transformer(transformer) as t:
            got = t.computation(ng.deriv(loss, placeholder), placeholder)(x)
        np.testing.assert_allclose(got.reshape(-1), expected, rtol=1e-4, atol=1e-5,
                                   err_msg=f"on the {transformer} transformer")


def test_instance_normalization():
    model = make_model([node("InstanceNormalization", ["x", "scale", "bias"], ["y"])],
                       [("x", F, ["batch", 3, 4, 5])], [("y", F, ["batch", 3, 4, 5])],
                       [("scale", randn(3)), ("bias", randn(3))])
    check(model, {"x": randn(2, 3, 4, 5)})


def test_global_max_pool():
    model = make_model([node("GlobalMaxPool", ["x"], ["y"])], [("x", F, ["batch", 3, 4, 5])],
                       [("y", F, ["batch", 3, 1, 1])])
    check(model, {"x": randn(2, 3, 4, 5)})


def test_batch_norm_and_global_average_pool():
    model = make_model(
        [node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["n"], epsilon=1e-3),
         node("GlobalAveragePool", ["n"], ["y"])],
        [("x", F, ["batch", 3, 4, 4])], [("n", F, ["batch", 3, 4, 4]), ("y", F, ["batch", 3, 1, 1])],
        [("scale", randn(3)), ("bias", randn(3)), ("mean", randn(3)),
         ("var", np.abs(randn(3)) + 0.5)])
    check(model, {"x": randn(2, 3, 4, 4)})


# -- recurrent layers ------------------------------------------------------------------------
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm(direction):
    dirs, hidden, features, steps = (2 if direction == "bidirectional" else 1), 3, 2, 4
    model = make_model(
        [node("LSTM", ["x", "w", "r", "b", "", "h0", "c0"], ["y", "yh", "yc"],
              hidden_size=hidden, direction=direction)],
        [("x", F, [steps, "batch", features]), ("h0", F, [dirs, "batch", hidden]),
         ("c0", F, [dirs, "batch", hidden])],
        [("y", F, None), ("yh", F, None), ("yc", F, None)],
        [("w", randn(dirs, 4 * hidden, features)), ("r", randn(dirs, 4 * hidden, hidden)),
         ("b", randn(dirs, 8 * hidden))])
    check(model, {"x": randn(steps, 2, features), "h0": randn(dirs, 2, hidden),
                  "c0": randn(dirs, 2, hidden)}, atol=1e-4)


def test_lstm_batch_first_layout_matches_the_time_first_one():
    """layout=1 takes (batch, time, features) and gives (batch, time, directions, hidden)."""
    hidden, features, steps = 3, 2, 3
    weights = [("w", randn(1, 4 * hidden, features)), ("r", randn(1, 4 * hidden, hidden)),
               ("b", randn(1, 8 * hidden))]
    x = randn(steps, 2, features)

    def outputs(layout, shape):
        model = make_model([node("LSTM", ["x", "w", "r", "b"], ["y", "yh"], hidden_size=hidden,
                                 layout=layout)],
                           [("x", F, shape)], [("y", F, None), ("yh", F, None)], weights)
        if layout == 0:
            return check(model, {"x": x}, transformers=("numpy",))
        return run_axgraph(model, {"x": x.transpose(1, 0, 2)}, "numpy")

    (y0, h0), (y1, h1) = outputs(0, [steps, 2, features]), outputs(1, [2, steps, features])
    np.testing.assert_allclose(y1, y0.transpose(2, 0, 1, 3), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h1, h0.transpose(1, 0, 2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_from_a_zero_state(linear_before_reset):
    hidden, features, steps = 3, 2, 3
    model = make_model(
        [node("GRU", ["x", "w", "r", "b"], ["y", "yh"], hidden_size=hidden,
              linear_before_reset=linear_before_reset)],
        [("x", F, [steps, 2, features])], [("y", F, None), ("yh", F, None)],
        [("w", randn(1, 3 * hidden, features)), ("r", randn(1, 3 * hidden, hidden)),
         ("b", randn(1, 6 * hidden))])
    check(model, {"x": randn(steps, 2, features)}, atol=1e-4)


# -- the importer ----------------------------------------------------------------------------
def test_inputs_follow_the_model_order_and_exclude_initializers(tmp_path):
    model = make_model([node("Sub", ["b", "a"], ["y"])],
                       [("a", F, [2]), ("b", F, [2]), ("w", F, [2])], [("y", F, [2])],
                       [("w", randn(2))])
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    imported = import_model(path)
    assert imported.input_names == ["a", "b"] and imported.output_names == ["y"]
    assert [x.name for x in imported.inputs] == ["a", "b"]


def test_sizes_fix_a_dim_param():
    model = make_model([node("Relu", ["x"], ["y"])], [("x", F, ["batch", 3])],
                       [("y", F, ["batch", 3])])
    imported = import_model(model, sizes={"batch": 4})
    assert imported.axes["batch"].length == 4


def test_trainable_initializers_become_variables():
    w = randn(3, 2)
    model = make_model([node("MatMul", ["x", "w"], ["y"])], [("x", F, ["batch", 3])],
                       [("y", F, ["batch", 2])], [("w", w)])
    imported = import_model(model, trainable=True)
    weight = imported.variables["w"]
    x = randn(4, 3)
    loss = ng.sum(imported.outputs[0])
    grad = ng.deriv(loss, weight)
    with ng.make_transformer("numpy") as t:
        computed = t.computation(grad, *imported.inputs)(x)
    np.testing.assert_allclose(computed, np.repeat(x.sum(0)[:, None], 2, axis=1), rtol=1e-5)


def test_an_unknown_operator_is_named_with_its_node():
    model = make_model([node("Relu", ["x"], ["r"]), node("Hardmax", ["r"], ["y"], name="head")],
                       [("x", F, [2, 3])], [("y", F, [2, 3])])
    with pytest.raises(UnsupportedOperatorError) as raised:
        import_model(model)
    message = str(raised.value)
    assert "Hardmax" in message and "'head'" in message and "Gemm" in message
    assert __file__ in message  # the user's line
    assert isinstance(raised.value, ng.AxgraphError)


def test_a_refused_attribute_is_named():
    model = make_model([node("ArgMax", ["x"], ["y"], select_last_index=1)],
                       [("x", F, [1, 2, 5, 5])], [("y", I64, None)])
    with pytest.raises(UnsupportedOperatorError, match="select_last_index=1"):
        import_model(model)


def test_an_op_that_refuses_its_operands_names_the_node():
    model = make_model([node("Add", ["a", "b"], ["y"], name="bad_add")],
                       [("a", F, [2, 3]), ("b", F, [4])], [("y", F, None)])
    with pytest.raises(OnnxImportError, match="Add node 'bad_add'") as raised:
        import_model(model)
    assert isinstance(raised.value.__cause__, ng.AxgraphError)


def test_an_input_no_node_computes():
    model = make_model([node("Relu", ["x"], ["y"])], [("x", F, [2])], [("y", F, [2])])
    model.graph.node[0].input[0] = "nowhere"
    with pytest.raises(OnnxImportError, match="'nowhere' is computed by no earlier node"):
        import_model(model)


def test_dims_of_unknown_length_are_each_their_own():
    model = make_model([node("Relu", ["x"], ["y"])], [("x", F, [None, None])],
                       [("y", F, [None, None])])
    imported = import_model(model)
    first, second = imported.inputs[0].axes
    assert first is not second and not imported.axes
    check(model, {"x": randn(2, 3)})


def test_dim_params_that_read_alike_stay_apart():
    model = make_model([node("Relu", ["x"], ["y"])], [("x", F, ["a-b", "a_b"])],
                       [("y", F, ["a-b", "a_b"])])
    check(model, {"x": randn(2, 3)})


def test_a_model_that_is_not_a_model(tmp_path):
    with pytest.raises(OnnxImportError, match="ModelProto"):
        import_model(42)
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x0a\xff\xff not a model")
    for path in (corrupt, tmp_path / "missing.onnx"):
        with pytest.raises(OnnxImportError, match="cannot read the ONNX model"):
            import_model(path)


def test_the_guide_lists_every_supported_operator():
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "onnx.md").read_text()
    missing = [op for op in supported_operators() if f"`{op}`" not in page]
    assert not missing, f"docs/onnx.md's table lacks {missing}"


def test_supported_operators_cover_the_common_ones():
    supported = set(supported_operators())
    assert {"Gemm", "MatMul", "Conv", "MaxPool", "AveragePool", "BatchNormalization",
            "LayerNormalization", "Softmax", "LSTM", "GRU", "Reshape", "Gather"} <= supported


def test_older_opsets_give_axes_as_attributes():
    """Opset 11: Squeeze/Unsqueeze/ReduceSum axes are attributes, Softmax flattens from its axis."""
    model = make_model(
        [node("Unsqueeze", ["x"], ["u"], axes=[0]), node("Squeeze", ["u"], ["s"], axes=[0]),
         node("ReduceSum", ["s"], ["r"], axes=[1], keepdims=0),
         node("Softmax", ["x"], ["p"], axis=1)],
        [("x", F, [2, 3, 4])], [("r", F, [2, 4]), ("p", F, [2, 3, 4])], opset=11)
    check(model, {"x": randn(2, 3, 4)})


def test_the_docstring_example_runs():
    import doctest

    import axgraph.frontends.onnx.importer as importer

    assert doctest.testmod(importer, optionflags=doctest.ELLIPSIS).failed == 0
