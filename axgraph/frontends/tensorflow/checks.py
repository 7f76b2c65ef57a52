"""TF's Assert: a check that runs with the graph and fails with TF's message.

An ``Assert`` node (``tf.Assert``, ``tf.debugging.assert_*``) becomes `AssertOp`,
whose value is its condition, passed through. Computing it raises `ExecutionError`
when the condition is false, with the text TF prints (``assertion failed: [x > 0]
[-1 2 3]``: each datum in brackets, a tensor summarized to its first `summarize`
elements as TF writes them). Like a print it is an effect: it lowers to the host
call `TFAssert`, chained after the program's earlier host calls, so no pass folds,
merges or drops it. The NumPy transformer and the core interpreter (which the cpu
backend calls for host calls) run the checks here; the jax transformer records the
check with its others, and a failed one raises after the call.
"""
from __future__ import annotations

import sys
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from ...axes import Axes
from ...core import interpreter
from ...core.host import HostCall
from ...core.tensor_types import ElementType, Shape
from ...errors import ExecutionError, GraphError
from ...lowering.rules import rule as lowering_rule
from ...op_graph.op import Op
from ...op_graph.tensors import as_op
from ...shapes import op_rules
from ...transformers import reference_kernels

#: One datum of an Assert: its text (a string constant), or None (the next tensor).
Part = Optional[str]


class AssertOp(Op):
    """TF's ``Assert(condition, data)``: the condition, passed through; computing it
    raises ExecutionError with TF's message where any of its elements is false.

    Parameters
    ----------
    condition : Op
        The booleans that must all hold.
    data : sequence of Op
        The tensors shown in the message, in the order of the Nones among `parts`.
    label : str
        Who fails: the TF node (``TF Assert node 'check'``).
    parts : sequence of str or None
        The message's data in order: a text, or None for the next tensor of `data`.
    summarize : int
        The elements of each tensor shown (negative: all).
    name : str, optional
        A name for the op (automatic if None).

    Raises
    ------
    GraphError
        If `condition` is not boolean, or `parts` does not have one None per tensor.
    """

    attributes = ("label", "parts", "summarize")
    label: str
    parts: Tuple[Part, ...]
    summarize: int
    dtype_of_arg = 0
    has_effect = True

    def __init__(self, condition, data: Sequence[Op], label: str, parts: Sequence[Part],
                 summarize: int, name: Optional[str] = None):
        super().__init__(as_op(condition), *(as_op(d) for d in data), label=label,
                         parts=tuple(parts), summarize=int(summarize), name=name)

    def infer_axes(self) -> Axes:
        condition = self.args[0]
        if condition.dtype != np.bool_:
            raise GraphError(f"{self.label}: a condition of type {condition.dtype}, not bool",
                             self.location)
        if sum(part is None for part in self.parts) != len(self.args) - 1:
            raise GraphError(f"{self.label}: {len(self.args) - 1} tensors for the parts "
                             f"{self.parts}", self.location)
        return condition.axes


op_rules.rule(AssertOp, says="its condition's axes")(lambda op, length_of: iter(()))


class TFAssert(HostCall):
    """The host call of an `AssertOp`: the condition, passed through, checked each run.

    Parameters
    ----------
    condition : Node
        The booleans checked.
    data : sequence of Node
        The tensors shown in the message.
    label, parts, summarize
        As `AssertOp`'s.
    after : Node, optional
        The previous host call, read only so that every backend runs the calls in
        program order.

    Returns
    -------
    TFAssert
        A node of the condition's type and shape.
    """

    _attributes = ("label", "parts", "summarize")

    def __init__(self, condition, data: Sequence, label: str, parts: Sequence[Part],
                 summarize: int, after=None, name: Optional[str] = None):
        inputs = (condition, *data) + (() if after is None else (after,))
        attributes = {"label": label, "parts": tuple(parts), "summarize": int(summarize)}
        super(HostCall, self).__init__(inputs, attributes, name)

    def _infer(self) -> Tuple[ElementType, Shape]:
        condition = self.inputs[0]
        return condition.element_type, condition.shape

    @property
    def tensor_count(self) -> int:
        """How many inputs after the condition are data (the rest: the previous call)."""
        return sum(part is None for part in self.attributes["parts"])


# -- TF's text ------------------------------------------------------------------------------

def _element(value) -> str:
    """One element as TF prints it: floats in the shortest of %g's 6 or 9 (15 or 17 for
    float64) digits that reads back the same, booleans as 1 and 0."""
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, np.floating):
        short, long = ("%.15g", "%.17g") if value.dtype == np.float64 else ("%.6g", "%.9g")
        text = short % float(value)
        same = np.isnan(value) or value.dtype.type(float(text)) == value
        return text if same else long % float(value)
    return str(value)


def _summary(shape: Sequence[int], limit: int, element: Callable[[int], str]) -> str:
    """TF's summary of a tensor of `shape`: its first `limit` elements (all if negative)
    in nested brackets, ``...`` where some are left out; `element(k)` writes element k."""
    count = int(np.prod(shape, dtype=np.int64))
    limit = count if limit < 0 else min(limit, count)
    if not shape:
        return element(0) if count else ""
    out: List[str] = []
    index = 0

    def dimension(d: int) -> None:
        nonlocal index
        if index >= limit:
            return
        if d == len(shape) - 1:
            for i in range(shape[d]):
                if index >= limit:
                    if d != 0:
                        out.append("...")
                    return
                out.append((" " if i else "") + element(index))
                index += 1
            return
        for _ in range(shape[d]):
            opened = index < limit
            if opened:
                out.append("[")
            dimension(d + 1)
            if opened or index < limit:
                out.append("]")

    dimension(0)
    if limit < count:
        out.append("...")
    return "".join(out)


def _elements_of(value: np.ndarray) -> Callable[[int], str]:
    """``element(k)``: element k of `value` (row-major) as TF prints it."""
    flat = value.reshape(-1)
    return lambda k: _element(flat[k])


def assertion_message(label: str, parts: Sequence[Part], data: Sequence[np.ndarray],
                      summarize: int) -> str:
    """The message of a failed assertion, as TF words it (after the node that failed)."""
    tensors = iter(data)
    texts = []
    for part in parts:
        if part is not None:
            texts.append(part)
            continue
        value = np.asarray(next(tensors))
        texts.append(_summary(value.shape, summarize, _elements_of(value)))
    return f"{label}: assertion failed: " + " ".join(f"[{t}]" for t in texts)


def _check(label: str, parts: Sequence[Part], summarize: int, condition: np.ndarray,
           data: Sequence[np.ndarray], location=None) -> np.ndarray:
    if not np.all(condition):
        raise ExecutionError(assertion_message(label, parts, data, summarize), location)
    return np.array(condition, copy=True)  # a value of its own, as a host call's


@reference_kernels.kernel(AssertOp)
def _assert_op(op: AssertOp, ctx, condition, *data):
    return _check(op.label, op.parts, op.summarize, condition, data, op.location)


@interpreter.kernel(TFAssert)
def _tf_assert(node: TFAssert, ctx, condition, *rest):
    attributes = node.attributes
    return _check(attributes["label"], attributes["parts"], attributes["summarize"],
                  condition, rest[:node.tensor_count])


@lowering_rule(AssertOp)
def _lower_assert(ctx, op: AssertOp, condition, *data):
    _register_jax_kernel()
    node = TFAssert(condition, data, op.label, op.parts, op.summarize,
                    after=ctx.effects[-1] if ctx.effects else None)
    ctx.effects.append(node)
    return node


def _register_jax_kernel() -> None:
    """Give the jax transformer its kernel of TFAssert, once it is loaded (jax is
    optional, so it is never imported here): it records the check, which raises after
    the call, as jax's failed checks do."""
    kernels = sys.modules.get("axgraph.transformers.jax.kernels")
    if kernels is None or TFAssert in kernels.KERNELS:
        return
    import jax.numpy as jnp

    @kernels.kernel(TFAssert)
    def _jax_tf_assert(node: TFAssert, trace, condition, *rest):
        attributes = node.attributes
        template, elements = [], []
        tensors = iter(rest[:node.tensor_count])
        for part in attributes["parts"]:
            if part is not None:
                template.append(part.replace("{", "{{").replace("}", "}}"))
                continue
            value = next(tensors)
            flat = jnp.ravel(value)
            spec = "{:g}" if jnp.issubdtype(value.dtype, jnp.floating) else "{:d}"

            def slot(k: int, flat=flat, spec=spec) -> str:
                elements.append(flat[k])
                return spec

            template.append(_summary(tuple(value.shape), attributes["summarize"], slot))
        label = attributes["label"].replace("{", "{{").replace("}", "}}")
        message = f"{label}: assertion failed: " + " ".join(f"[{t}]" for t in template)
        trace.check(node, ~jnp.all(condition), message, *elements)
        return condition
