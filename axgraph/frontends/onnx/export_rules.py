"""One ONNX rule per core op class: how its value is written as ONNX nodes.

`RULES` is an `OpTable`, so a core op without a rule is found by a test over
`core.CORE_OPS` (`RULES.missing(...)`), not by a user's export. Elementwise
ops are covered by one rule each family over a declared table of ONNX op types
(`ELEMENTWISE`); the other ops have a rule of their own. Ops ONNX cannot
express have a rule too, one that raises `OnnxExportError` saying why
(`UNSUPPORTED`), so the table is complete and each refusal is documented.

A rule is called as ``rule(g, node, inputs, out)``: `g` the GraphBuilder, `node`
the core node, `inputs` the ONNX value names of its inputs, `out` the name its
value must get; it returns nothing and writes `out` as its last node's output.
The windowed ops (convolution, pooling, their adjoints) have their rules in
export_windows.py.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence

import numpy as np

from ... import core
from ...core.ops import elementwise as ew
from ...core.ops.leaves import DimValue
from ...core.ops.reduction import IndexReduction
from ...op_table import OpTable
from .export_graph import GraphBuilder, OnnxExportError, tensor_type

#: A rule's node parameter is typed by the op class it is registered for.
Rule = Callable[[GraphBuilder, Any, List[str], str], None]

#: Op class -> its ONNX rule.
RULES: "OpTable[Rule]" = OpTable("ONNX export rule")

#: Elementwise core op -> the ONNX op computing it, all of them of the same arity.
ELEMENTWISE: Dict[type, str] = {
    ew.Negative: "Neg", ew.Abs: "Abs", ew.Sign: "Sign", ew.Sqrt: "Sqrt", ew.Exp: "Exp",
    ew.Log: "Log", ew.Tanh: "Tanh", ew.Sigmoid: "Sigmoid", ew.Sin: "Sin", ew.Cos: "Cos",
    ew.Floor: "Floor", ew.Erf: "Erf", ew.Tan: "Tan", ew.Not: "Not",
    ew.And: "And", ew.Or: "Or", ew.Add: "Add", ew.Subtract: "Sub", ew.Multiply: "Mul",
    ew.Divide: "Div", ew.Power: "Pow", ew.Maximum: "Max", ew.Minimum: "Min",
    ew.Equal: "Equal", ew.Less: "Less", ew.LessEq: "LessOrEqual", ew.Greater: "Greater",
    ew.GreaterEq: "GreaterOrEqual", ew.Select: "Where",
}

#: Core ops ONNX has no operator for, and why (their rule raises OnnxExportError).
UNSUPPORTED: Dict[type, str] = {
    core.Im2Col: "ONNX has no operator gathering convolution windows into columns (only a "
                 "backend's convolution-as-matmul pass makes this op, and export does not run "
                 "it)",
    core.Col2Im: "ONNX's Col2Im has another layout, and only a backend's convolution-as-matmul "
                 "pass makes this op (export does not run it)",
}


def _declared(op_class: type) -> bool:
    return op_class in ELEMENTWISE


@RULES.register(ew.UnaryElementwise, ew.BinaryElementwise, ew.Select, when=_declared)
def _elementwise(g: GraphBuilder, node: core.Node, inputs: List[str], out: str) -> None:
    g.add(ELEMENTWISE[type(node)], inputs, out)


def _one(g: GraphBuilder, node: core.Node) -> str:
    return g.constant(np.ones((), dtype=node.element_type.dtype), hint="one")


@RULES.register(ew.Log1p)
def _log1p(g: GraphBuilder, node: core.Node, inputs: List[str], out: str) -> None:
    # ONNX has no log1p. log(u) * x / (u - 1) for u = 1 + x corrects the rounding of u
    # (x itself where u rounds to 1, and x where it is +inf, whose quotient is NaN)
    x, one = inputs[0], _one(g, node)
    u = g.add("Add", [x, one])
    corrected = g.add("Mul", [g.add("Log", [u]), g.add("Div", [x, g.add("Sub", [u, one])])])
    g.add("Where", [g.add("Or", [g.add("Equal", [u, one]), g.add("IsInf", [x], detect_negative=0)]),
                    x, corrected], out)


@RULES.register(ew.Rsqrt)
def _rsqrt(g: GraphBuilder, node: core.Node, inputs: List[str], out: str) -> None:
    # a square root then a division, rounded as the core's kernels round it
    g.add("Div", [_one(g, node), g.add("Sqrt", inputs)], out)


@RULES.register(ew.NotEqual)
def _not_equal(g: GraphBuilder, node: core.Node, inputs: List[str], out: str) -> None:
    g.add("Not", [g.add("Equal", inputs)], out)


@RULES.register(ew.Convert)
def _convert(g: GraphBuilder, node: ew.Convert, inputs: List[str], out: str) -> None:
    g.add("Cast", inputs, out, to=tensor_type(node.element_type.dtype))


# -- leaves ------------------------------------------------------------------------------

@RULES.register(core.Parameter)
def _parameter(g: GraphBuilder, node: core.Node, inputs: List[str], out: str) -> None:
    raise node._fail(OnnxExportError, "a parameter of the function that is neither an "
                                      "exported input nor a stored tensor")


@RULES.register(core.Constant)
def _constant(g: GraphBuilder, node: core.Constant, inputs: List[str], out: str) -> None:
    value = np.asarray(node.attributes["value"])
    if value.ndim == 0 and len(node.shape):  # a scalar filling a shape: write the scalar once
        g.add("Expand", [g.constant(value), g.shape(node.shape)], out)
    else:
        g.add("Identity", [g.constant(value, hint=out + "/value")], out)


@RULES.register(DimValue)
def _dim_value(g: GraphBuilder, node: DimValue, inputs: List[str], out: str) -> None:
    scalar = g.add("Squeeze", [g.dim(node.attributes["dim"]), g.ints([0])])
    g.add("Cast", [scalar], out, to=tensor_type(node.element_type.dtype))


def _random(onnx_op: str, first: str, second: str) -> Rule:
    def rule(g: GraphBuilder, node: Any, inputs: List[str], out: str) -> None:
        attributes: Dict[str, Any] = {
            first: float(node.attributes[node._parameter_names[0]]),
            second: float(node.attributes[node._parameter_names[1]]),
            "dtype": tensor_type(node.element_type.dtype)}
        if node.attributes["seed"] is not None:
            attributes["seed"] = float(node.attributes["seed"])
        if all(isinstance(d, int) for d in node.shape):
            g.add(onnx_op, [], out, shape=list(node.shape), **attributes)
        else:
            like = g.add("ConstantOfShape", [g.shape(node.shape)])
            g.add(onnx_op + "Like", [like], out, **attributes)
    return rule


RULES.register(core.RandomUniform)(_random("RandomUniform", "low", "high"))
RULES.register(core.RandomNormal)(_random("RandomNormal", "mean", "scale"))


# -- data movement -----------------------------------------------------------------------

@RULES.register(core.Broadcast)
def _broadcast(g: GraphBuilder, node: core.Broadcast, inputs: List[str], out: str) -> None:
    x = inputs[0]
    if node.attributes["axes"]:
        x = g.add("Unsqueeze", [x, g.ints(node.attributes["axes"])])
    g.add("Expand", [x, g.shape(node.shape)], out)


@RULES.register(core.Reshape)
def _reshape(g: GraphBuilder, node: core.Reshape, inputs: List[str], out: str) -> None:
    # allowzero: a 0 in the shape is a length, not "copy the input's dim"
    g.add("Reshape", [inputs[0], g.shape(node.shape)], out, allowzero=1)


@RULES.register(core.Transpose)
def _transpose(g: GraphBuilder, node: core.Transpose, inputs: List[str], out: str) -> None:
    g.add("Transpose", inputs, out, perm=list(node.attributes["permutation"]))


@RULES.register(core.Slice)
def _slice(g: GraphBuilder, node: core.Slice, inputs: List[str], out: str) -> None:
    attributes = node.attributes
    g.add("Slice", [inputs[0], g.shape(attributes["lower"]), g.shape(attributes["upper"]),
                    g.ints(range(node.rank)), g.ints(attributes["strides"])], out)


@RULES.register(core.Reverse)
def _reverse(g: GraphBuilder, node: core.Reverse, inputs: List[str], out: str) -> None:
    axes = list(node.attributes["axes"])
    if not axes:
        g.add("Identity", inputs, out)
        return
    last = np.iinfo(np.int64)
    g.add("Slice", [inputs[0], g.ints([-1] * len(axes)), g.ints([last.min] * len(axes)),
                    g.ints(axes), g.ints([-1] * len(axes))], out)


@RULES.register(core.Concat)
def _concat(g: GraphBuilder, node: core.Concat, inputs: List[str], out: str) -> None:
    g.add("Concat", inputs, out, axis=node.attributes["axis"])


@RULES.register(core.Pad)
def _pad(g: GraphBuilder, node: core.Pad, inputs: List[str], out: str) -> None:
    attributes = node.attributes
    value = g.constant(np.asarray(attributes["value"], dtype=node.element_type.dtype))
    x = _interior(g, inputs[0], node.inputs[0].shape, attributes["interior"], value)
    pads = g.shape(tuple(attributes["below"]) + tuple(attributes["above"]))
    g.add("Pad", [x, pads, value], out, mode="constant")


def _interior(g: GraphBuilder, x: str, dims, interior, value: str) -> str:
    """x with interior[i] values between neighbours along each dim i: every element gets
    them after it (on a new dim, padded), the pairs are merged, the last ones cut off."""
    rank = len(dims)
    for position, (length, gap) in enumerate(zip(dims, interior)):
        if not gap:
            continue
        pads = [0] * (2 * rank + 2)
        pads[rank + 1 + position + 1] = gap  # after each element, on the new dim
        spread = g.add("Pad", [g.add("Unsqueeze", [x, g.ints([position + 1])]), g.ints(pads),
                               value], mode="constant")
        pieces = [g.add("Shape", [x], start=0, end=position)] if position else []
        pieces.append(g.ints([-1]))
        if position + 1 < rank:
            pieces.append(g.add("Shape", [x], start=position + 1))
        merged = g.add("Reshape", [spread, g.add("Concat", pieces, axis=0)])
        gaps = max(length - 1, 0) if isinstance(length, int) else length - 1
        kept = g.dim(length + gap * gaps)
        x = g.add("Slice", [merged, g.ints([0]), kept, g.ints([position])])
    return x


# -- contraction and reductions ----------------------------------------------------------

def _matmul_form(node: core.Dot) -> bool:
    """Whether a Dot is ONNX MatMul as it stands: batch dims leading in order, then one
    matrix product of a's last dim with b's first (or second to last) non-batch dim."""
    a, b = node.inputs
    pairs = node.attributes
    leading = tuple(range(len(pairs["batch_a"])))
    if tuple(pairs["batch_a"]) != leading or tuple(pairs["batch_b"]) != leading:
        return False
    if len(pairs["contract_a"]) != 1 or pairs["contract_a"][0] != a.rank - 1 or a.rank == len(
            leading):
        return False
    if leading:
        return a.rank == b.rank == len(leading) + 2 and pairs["contract_b"][0] == len(leading)
    return b.rank in (1, 2) and pairs["contract_b"][0] == 0


@RULES.register(core.Dot)
def _dot(g: GraphBuilder, node: core.Dot, inputs: List[str], out: str) -> None:
    a, b = node.inputs
    if _matmul_form(node):
        g.add("MatMul", inputs, out)
        return
    pairs = node.attributes
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    on_a = [next(letters) for _ in range(a.rank)]
    on_b = [next(letters) for _ in range(b.rank)]
    paired_a = pairs["contract_a"] + pairs["batch_a"]
    paired_b = pairs["contract_b"] + pairs["batch_b"]
    for i, j in zip(paired_a, paired_b):
        on_b[j] = on_a[i]
    result = ([on_a[i] for i in pairs["batch_a"]]
              + [c for i, c in enumerate(on_a) if i not in paired_a]
              + [c for j, c in enumerate(on_b) if j not in paired_b])
    g.add("Einsum", inputs, out,
          equation=f"{''.join(on_a)},{''.join(on_b)}->{''.join(result)}")


def reduce(g: GraphBuilder, op_type: str, x: str, axes: Sequence[int], out=None,
           keepdims: int = 0) -> str:
    """ReduceX of x over `axes` (Identity for none): axes are an input from opset 18 on,
    and ReduceSum's from 13."""
    if not axes:
        return g.add("Identity", [x], out)
    if op_type == "ReduceSum" or g.opset >= 18:
        return g.add(op_type, [x, g.ints(axes)], out, keepdims=keepdims)
    return g.add(op_type, [x], out, axes=list(axes), keepdims=keepdims)


def _reduction(op_type: str) -> Rule:
    def rule(g: GraphBuilder, node: Any, inputs: List[str], out: str) -> None:
        reduce(g, op_type, inputs[0], node.attributes["axes"], out)
    return rule


for _class, _onnx in ((core.Sum, "ReduceSum"), (core.Prod, "ReduceProd"),
                      (core.Max, "ReduceMax"), (core.Min, "ReduceMin")):
    RULES.register(_class)(_reduction(_onnx))


def _to_last(g: GraphBuilder, node: core.Node, x: str, axes: Sequence[int]):
    """x with `axes` moved last (in the order given) and flattened into one dim, and the
    transposed shape to undo it; symbolic dims are copied (Reshape's 0) or read (Shape)."""
    rank = node.inputs[0].rank
    kept = [i for i in range(rank) if i not in axes]
    permutation = kept + list(axes)
    if permutation != list(range(rank)):
        x = g.add("Transpose", [x], perm=permutation)
    shape = g.add("Shape", [x])
    flat = g.add("Reshape", [x, g.ints([0] * len(kept) + [-1])])
    return flat, shape, permutation


def _from_last(g: GraphBuilder, flat: str, shape: str, permutation: List[int], out: str) -> None:
    if permutation == sorted(permutation):
        g.add("Reshape", [flat, shape], out)
        return
    inverse = [permutation.index(i) for i in range(len(permutation))]
    g.add("Transpose", [g.add("Reshape", [flat, shape])], out, perm=inverse)


@RULES.register(core.ArgMax, core.ArgMin)
def _arg_extreme(g: GraphBuilder, node: IndexReduction, inputs: List[str], out: str) -> None:
    kind = type(node).__name__
    if len(node.attributes["axes"]) == 1:
        index = g.add(kind, inputs, axis=node.attributes["axes"][0], keepdims=0)
    else:
        flat, _, _ = _to_last(g, node, inputs[0], node.attributes["axes"])
        index = g.add(kind, [flat], axis=-1, keepdims=0)
    g.add("Cast", [index], out, to=tensor_type(node.element_type.dtype))


@RULES.register(core.Softmax, core.LogSoftmax)
def _softmax(g: GraphBuilder, node: core.Softmax, inputs: List[str], out: str) -> None:
    kind = type(node).__name__
    if len(node.attributes["axes"]) == 1:
        g.add(kind, inputs, out, axis=node.attributes["axes"][0])
        return
    flat, shape, permutation = _to_last(g, node, inputs[0], node.attributes["axes"])
    _from_last(g, g.add(kind, [flat], axis=-1), shape, permutation, out)


@RULES.register(core.SoftmaxBackprop)
def _softmax_backprop(g: GraphBuilder, node: core.SoftmaxBackprop, inputs: List[str],
                      out: str) -> None:
    dy, y = inputs  # y * (dy - sum(dy * y))
    total = reduce(g, "ReduceSum", g.add("Mul", [dy, y]), node.attributes["axes"], keepdims=1)
    g.add("Mul", [y, g.add("Sub", [dy, total])], out)


@RULES.register(core.LogSoftmaxBackprop)
def _log_softmax_backprop(g: GraphBuilder, node: core.LogSoftmaxBackprop, inputs: List[str],
                          out: str) -> None:
    dy, y = inputs  # dy - exp(y) * sum(dy)
    total = reduce(g, "ReduceSum", dy, node.attributes["axes"], keepdims=1)
    g.add("Sub", [dy, g.add("Mul", [g.add("Exp", [y]), total])], out)


# -- indexing ----------------------------------------------------------------------------

@RULES.register(core.Gather)
def _gather(g: GraphBuilder, node: core.Gather, inputs: List[str], out: str) -> None:
    g.add("Gather", inputs, out, axis=node.attributes["axis"])


@RULES.register(core.ScatterAdd)
def _scatter_add(g: GraphBuilder, node: core.ScatterAdd, inputs: List[str], out: str) -> None:
    # ScatterND adds whole slices along the first dim: move `axis` first in inputs and
    # updates (whose indexed dims follow the dims before `axis`), and back after
    target, indices, updates = inputs
    axis, rank = node.attributes["axis"], node.inputs[0].rank
    index_rank = node.inputs[1].rank
    if axis:
        target = g.add("Transpose", [target],
                       perm=[axis] + [i for i in range(rank) if i != axis])
        picked = list(range(axis, axis + index_rank))
        updates = g.add("Transpose", [updates], perm=picked + [
            i for i in range(node.inputs[2].rank) if i not in picked])
    as_int64 = g.add("Cast", [indices], to=tensor_type(np.dtype(np.int64)))
    positions = g.add("Unsqueeze", [as_int64, g.ints([-1])])
    if not axis:
        g.add("ScatterND", [target, positions, updates], out, reduction="add")
        return
    scattered = g.add("ScatterND", [target, positions, updates], reduction="add")
    back = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
    g.add("Transpose", [scattered], out, perm=back)


@RULES.register(core.OneHot)
def _one_hot(g: GraphBuilder, node: core.OneHot, inputs: List[str], out: str) -> None:
    # (x == position along the one-hot dim), in x's type: exact for every numeric type
    axis = node.attributes["one_hot_axis"]
    depth = node.shape[axis]
    dtype = tensor_type(node.element_type.dtype)
    limit = (g.constant(np.int64(depth)) if isinstance(depth, int)
             else g.add("Squeeze", [g.dim(depth), g.ints([0])]))
    positions = g.add("Range", [g.constant(np.int64(0)), limit, g.constant(np.int64(1))])
    trailing = len(node.shape) - axis - 1
    positions = g.add("Reshape", [g.add("Cast", [positions], to=dtype),
                                  g.ints([-1] + [1] * trailing)])
    labels = g.add("Unsqueeze", [inputs[0], g.ints([axis])])
    g.add("Cast", [g.add("Equal", [labels, positions])], out, to=dtype)


# -- groups ------------------------------------------------------------------------------

@RULES.register(core.Fused)
def _fused(g: GraphBuilder, node: core.Fused, inputs: List[str], out: str) -> None:
    from .exporter import write_nodes  # the walk over a function, shared with the body

    body = node.function
    known = dict(zip(body.parameters, inputs))
    write_nodes(g, body.nodes, known, {node.output: out})


def _unsupported(reason: str) -> Rule:
    def rule(g: GraphBuilder, node: Any, inputs: List[str], out: str) -> None:
        raise node._fail(OnnxExportError, f"cannot be written as ONNX: {reason}")
    return rule


for _class, _reason in UNSUPPORTED.items():
    RULES.register(_class)(_unsupported(_reason))

__all__ = ["ELEMENTWISE", "RULES", "Rule", "UNSUPPORTED", "reduce"]
