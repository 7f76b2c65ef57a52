"""Matrix products: MatMul (batched, with NumPy's broadcasting) and Gemm.

ONNX's MatMul contracts the last dimension of A with the second-to-last of B
and broadcasts the leading (batch) dimensions. Here both operands are relabelled
onto common batch axes and a new contracted axis, and `ng.dot` with
`reduction_axes` keeps the shared batch axes as batch axes of one product.
"""
from __future__ import annotations

from typing import List

import numpy as np

import axgraph as ng

from ...axes import Axis
from ...op_graph.op import Op
from ..positional import broadcast_axes, in_order, is_one, relabelled
from .import_rules import Node, Value, rule
from .import_elementwise import broadcast


def matmul(node: Node, a: Value, b: Value) -> Op:
    """NumPy's ``a @ b`` of two values (ops or arrays), its axes in ONNX order."""
    builder, hint = node.builder, node.proto.output[0]
    a_rank, b_rank = _rank(a), _rank(b)
    if a_rank == 0 or b_rank == 0:
        raise node.error("MatMul of a scalar")
    a_batch, b_batch = _batch_part(a, a_rank), _batch_part(b, b_rank)
    batch = broadcast_axes(builder, [x for x in (a_batch, b_batch) if x is not None], hint) \
        if a_rank > 2 or b_rank > 2 else []
    k = builder.new_axis(_shape(a)[-1], f"{hint}_k")
    used: List[Axis] = list(batch) + [k]
    n = _free_axis(builder, a, -2, used, hint) if a_rank >= 2 else None
    if n is not None:
        used.append(n)
    m = _free_axis(builder, b, -1, used, hint) if b_rank >= 2 else None
    a_op = _on_axes(a, batch, [n, k] if n is not None else [k])
    b_op = _on_axes(b, batch, [k, m] if m is not None else [k])
    product = ng.dot(a_op, b_op, reduction_axes=[k])
    out = list(batch) + [x for x in (n, m) if x is not None]
    return in_order(product, out)


def _rank(x: Value) -> int:
    return len(_shape(x))


def _shape(x: Value) -> tuple:
    return tuple(x.shape) if isinstance(x, np.ndarray) else tuple(a.length for a in x.axes)


def _batch_part(x: Value, rank: int):
    """x's leading (batch) dimensions, as something broadcast_axes takes."""
    if rank <= 2:
        return None
    if isinstance(x, np.ndarray):
        return np.zeros(x.shape[:-2], dtype=np.int8)
    return list(x.axes)[:-2]


def _free_axis(builder, x: Value, position: int, used: List[Axis], hint: str) -> Axis:
    if isinstance(x, Op) and x.axes[position] not in used:
        return x.axes[position]
    return builder.new_axis(_shape(x)[position], hint)


def _on_axes(x: Value, batch: List[Axis], matrix: List[Axis]) -> Op:
    """x relabelled onto the broadcast batch axes and its matrix axes; a leading dimension
    of length 1 that broadcasts is dropped."""
    shape = _shape(x)
    n_lead = len(shape) - len(matrix)
    offset = len(batch) - n_lead
    drop = [i < n_lead and is_one(n) and not is_one(batch[offset + i].length)
            for i, n in enumerate(shape)]
    kept = [batch[offset + i] if i < n_lead else matrix[i - n_lead]
            for i in range(len(shape)) if not drop[i]]
    if isinstance(x, np.ndarray):
        array = x.reshape([n for n, d in zip(shape, drop) if not d])
        return ng.constant(array, kept, dtype=x.dtype)
    if any(drop):
        x = ng.tensor_slice(x, tuple(0 if d else slice(None) for d in drop))
    return relabelled(x, kept)


@rule("MatMul")
def import_matmul(node: Node) -> Op:
    return matmul(node, node.input(0), node.input(1))


@rule("Gemm")
def import_gemm(node: Node) -> Op:
    a, b = node.input(0), node.input(1)
    if node.attr("transA", 0):
        a = _transposed(a)
    if node.attr("transB", 0):
        b = _transposed(b)
    result = matmul(node, a, b)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if alpha != 1.0:
        result = result * alpha
    if node.has_input(2) and beta != 0.0:
        c = node.input(2)
        if beta != 1.0:
            c = c * np.asarray(beta, c.dtype) if isinstance(c, np.ndarray) else c * beta
        result = broadcast(node, ng.add, result, c, dtype=result.dtype)
    return result


def _transposed(x: Value) -> Value:
    if isinstance(x, np.ndarray):
        return x.T
    return ng.axes_with_order(x, list(x.axes)[::-1])
