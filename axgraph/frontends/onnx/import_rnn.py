"""ONNX's recurrent layers, LSTM and GRU, unrolled over a sequence of known length.

Weights are stacked by gate in ONNX's order (LSTM: input, output, forget, cell;
GRU: update, reset, hidden); each gate's block is sliced out and relabelled so
that one step is a `dot` of the input with W and of the previous state with R.
Every direction (forward, reverse, bidirectional) is supported; activations,
peepholes, clipping and per-example sequence lengths other than the default are
refused by name.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import numpy as np

import axgraph as ng

from ...axes import Axis
from ...op_graph.op import Op
from ..positional import in_order, relabelled
from .import_rules import Node, rule

LSTM_GATES = "iofc"
GRU_GATES = "zrh"
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


class _Direction:
    """One direction's weights, per gate: W (hidden, input), R (hidden, previous) and biases."""

    def __init__(self, node: Node, index: int, gates: str, hidden: Axis, previous: Axis,
                 features: Axis):
        w, r = node.op(1), node.op(2)
        size = hidden.length
        self.w: Dict[str, Op] = {}
        self.r: Dict[str, Op] = {}
        self.w_bias: Dict[str, Optional[Op]] = {}
        self.r_bias: Dict[str, Optional[Op]] = {}
        bias = node.op(3) if node.has_input(3) else None
        for g, gate in enumerate(gates):
            block = slice(g * size, (g + 1) * size)
            self.w[gate] = relabelled(ng.tensor_slice(w, (index, block, slice(None))),
                                      [hidden, features])
            self.r[gate] = relabelled(ng.tensor_slice(r, (index, block, slice(None))),
                                      [hidden, previous])
            if bias is None:
                self.w_bias[gate] = self.r_bias[gate] = None
            else:
                self.w_bias[gate] = relabelled(ng.tensor_slice(bias, (index, block)), [hidden])
                rblock = slice((len(gates) + g) * size, (len(gates) + g + 1) * size)
                self.r_bias[gate] = relabelled(ng.tensor_slice(bias, (index, rblock)), [hidden])

    def input_part(self, x: Op, gate: str) -> Op:
        """x W^T (+ the input bias) for one gate."""
        result = ng.dot(x, self.w[gate])
        return result if self.w_bias[gate] is None else result + self.w_bias[gate]

    def state_part(self, h: Optional[Op], gate: str, previous: Axis) -> Optional[Op]:
        """h R^T (+ the recurrent bias) for one gate; None for a zero state and no bias."""
        bias = self.r_bias[gate]
        if h is None:
            return bias
        # h is on (batch, hidden): R contracts the previous step's hidden units, so they
        # must be an axis of their own
        result = ng.dot(relabelled(h, list(h.axes)[:-1] + [previous]), self.r[gate])
        return result if bias is None else result + bias


def _plus(a: Op, b: Optional[Op]) -> Op:
    return a if b is None else a + b


def _lstm_step(d: _Direction, x: Op, h: Optional[Op], c: Optional[Op], previous: Axis):
    def gate(name: str) -> Op:
        return _plus(d.input_part(x, name), d.state_part(h, name, previous))

    i, f, o = ng.sigmoid(gate("i")), ng.sigmoid(gate("f")), ng.sigmoid(gate("o"))
    candidate = ng.tanh(gate("c"))
    c = i * candidate if c is None else f * c + i * candidate
    return o * ng.tanh(c), c


def _gru_step(d: _Direction, x: Op, h: Optional[Op], previous: Axis, linear_before_reset: bool):
    def gate(name: str) -> Op:
        return _plus(d.input_part(x, name), d.state_part(h, name, previous))

    z, r = ng.sigmoid(gate("z")), ng.sigmoid(gate("r"))
    if h is None:
        recurrent = d.r_bias["h"]
        if recurrent is not None:
            recurrent = r * recurrent if linear_before_reset else recurrent
    elif linear_before_reset:
        recurrent = r * d.state_part(h, "h", previous)
    else:
        recurrent = d.state_part(r * h, "h", previous)
    candidate = ng.tanh(_plus(d.input_part(x, "h"), recurrent))
    return (1 - z) * candidate if h is None else (1 - z) * candidate + z * h


def _recurrent(node: Node, gates: str, step: Callable) -> tuple:
    kind = node.op_type
    activations = node.attr("activations")
    if activations and [a.lower() for a in activations] != \
            [a.lower() for a in DEFAULT_ACTIVATIONS[kind]] * (len(activations) //
                                                               len(DEFAULT_ACTIVATIONS[kind])):
        raise node.unsupported(f"activations {activations} are not supported (only the default "
                               f"{DEFAULT_ACTIVATIONS[kind]})")
    for name in ("clip", "input_forget"):
        if node.attr(name):
            raise node.unsupported(f"attribute {name} is not supported")
    if node.has_input(7 if kind == "LSTM" else 6):
        raise node.unsupported("peephole weights (input P) are not supported")
    x = node.op(0)
    layout = node.attr("layout", 0)
    if layout:
        x = in_order(x, [x.axes[1], x.axes[0], x.axes[2]])
    time, batch, features = x.axes
    if not isinstance(time.length, int):
        raise node.unsupported("the sequence length must be known to unroll it; give it with "
                               "import_model(..., sizes={...})")
    if node.has_input(4):
        lens = node.input(4)
        if not isinstance(lens, np.ndarray) or np.any(lens != time.length):
            raise node.unsupported("sequence_lens other than the full length are not supported")
    direction = node.attr("direction", "forward")
    orders = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}
    if direction not in orders:
        raise node.error(f"direction {direction!r} is not one of {sorted(orders)}")
    size = int(node.attr("hidden_size") or node.op(2).axes[-1].length)
    hint = node.proto.output[0] or node.label
    hidden = node.builder.new_axis(size, f"{hint}_hidden")
    previous = node.builder.new_axis(size, f"{hint}_previous")
    out_time = node.builder.new_axis(time.length, f"{hint}_time")
    ys: List[Op] = []
    last_h: List[Op] = []
    last_c: List[Op] = []
    for index, backwards in enumerate(orders[direction]):
        weights = _Direction(node, index, gates, hidden, previous, features)
        h = _initial(node, 5, index, batch, hidden)
        c = _initial(node, 6, index, batch, hidden) if kind == "LSTM" else None
        steps: List[Optional[Op]] = [None] * time.length
        for t in (reversed(range(time.length)) if backwards else range(time.length)):
            x_t = ng.tensor_slice(x, (t, slice(None), slice(None)))
            if kind == "LSTM":
                h, c = step(weights, x_t, h, c, previous)
            else:
                h = step(weights, x_t, h, previous, bool(node.attr("linear_before_reset", 0)))
            h = in_order(h, [batch, hidden])
            steps[t] = h
        ys.append(ng.stack(steps, out_time, pos=0))
        assert h is not None  # (a sequence has at least one step)
        last_h.append(h)
        if c is not None:
            last_c.append(in_order(c, [batch, hidden]))
    directions = node.builder.new_axis(len(ys), f"{hint}_directions")
    y = ng.stack(ys, directions, pos=1)
    y_time = y.axes[0]
    y_h = ng.stack(last_h, node.builder.new_axis(len(ys), f"{hint}_directions"), pos=0)
    y_c = ng.stack(last_c, node.builder.new_axis(len(ys), f"{hint}_directions"), pos=0) \
        if last_c else None
    if layout:
        y = in_order(y, [batch, y_time, directions, hidden])
        y_h = in_order(y_h, [batch, y_h.axes[0], hidden])
        y_c = None if y_c is None else in_order(y_c, [batch, y_c.axes[0], hidden])
    return (y, y_h, y_c) if kind == "LSTM" else (y, y_h)


def _initial(node: Node, index: int, direction: int, batch: Axis, hidden: Axis) -> Optional[Op]:
    """An initial state of one direction, on (batch, hidden); None if not given (zero)."""
    if not node.has_input(index):
        return None
    state = node.op(index)
    return relabelled(ng.tensor_slice(state, (direction, slice(None), slice(None))),
                      [batch, hidden])


@rule("LSTM")
def import_lstm(node: Node) -> tuple:
    return _recurrent(node, LSTM_GATES, _lstm_step)


@rule("GRU")
def import_gru(node: Node) -> tuple:
    return _recurrent(node, GRU_GATES, _gru_step)
