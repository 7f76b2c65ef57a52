"""Random draws made when a computation runs (dropout's masks): a fresh sample each call.

The draws of variables' initializers are TF's own, taken at import (`static_values`);
these are axgraph's, from the same distributions but not TF's values.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

import axgraph as ng

from ...op_graph.op import Op
from .rules import Node, rule


def _axes(node: Node):
    node.constant(0, "shape")
    return [node.new_axis(n, f"{node.hint}_d{i}") for i, n in enumerate(node.out_shape(0))]


def _seed(node: Node) -> Optional[int]:
    """The op's TF seed, when one was set (a graph-level or op-level seed)."""
    seed, seed2 = int(node.attr("seed", 0)), int(node.attr("seed2", 0))
    return (seed * 1_000_003 + seed2) % 2 ** 31 if seed or seed2 else None


def _dtype(node: Node) -> np.dtype:
    return np.dtype(node.attr("dtype").as_numpy_dtype)


@rule("RandomUniform")
def import_random_uniform(node: Node) -> Op:
    return ng.uniform(_axes(node), 0.0, 1.0, seed=_seed(node), dtype=_dtype(node))


@rule("RandomStandardNormal")
def import_random_standard_normal(node: Node) -> Op:
    return ng.normal(_axes(node), 0.0, 1.0, seed=_seed(node), dtype=_dtype(node))
