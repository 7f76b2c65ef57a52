"""Ops run for their effect or their branch: Assert, PrintV2, and v1 control flow.

``tf.Assert`` and ``tf.debugging.assert_*`` build, in graphs of ``tf.compat.v1``, a
``tf.cond`` guarding an Assert node: Switch nodes route each value to the branch its
predicate picks, and a Merge takes the value of the branch that ran. axgraph computes
both branches; a Merge is ``ng.where(predicate, true_value, false_value)``, and a value
remembers the branch it lives in (the node's `context`), so that an Assert checks its
condition only where TF would run it. Effects other than checks (writes, prints)
inside a branch would run whichever branch is taken, so they are refused.
"""
from __future__ import annotations

import re
from typing import List, Optional

import numpy as np

import axgraph as ng

from ...op_graph.op import Op
from ..positional import relabelled
from .checks import AssertOp
from .rules import Context, Node, rule


def alive(context: Context) -> Optional[Op]:
    """Whether a value of `context` is computed in TF (None: always)."""
    result: Optional[Op] = None
    for predicate, taken in context:
        holds = predicate if taken else ng.equal(predicate, False)
        result = holds if result is None else ng.where(result, holds, False)
    return result


def _text(node: Node, value: np.ndarray) -> str:
    """A string tensor known at import (an Assert's message), as TF prints it."""
    words = [w.decode("utf-8", "replace") if isinstance(w, bytes) else str(w)
             for w in value.reshape(-1)]
    return " ".join(words)


@rule("Assert")
def import_assert(node: Node) -> Op:
    condition = node.op(0)
    parts: List[Optional[str]] = []
    data: List[Op] = []
    for i, value in enumerate(node.inputs[1:], start=1):
        if isinstance(value, np.ndarray) and value.dtype.kind in "OSU":
            parts.append(_text(node, value))
        else:
            parts.append(None)
            data.append(node.op(i))
    running = alive(node.context)
    if running is not None:  # outside its branch, the check passes
        condition = ng.where(running, condition, True)
    return AssertOp(condition, data, f"TF {node.label}", parts,
                    int(node.attr("summarize", 3)), name=node.hint)


@rule("StringFormat")
def import_string_format(node: Node) -> Op:
    """The text ``tf.print`` prints: each tensor printed with `ng.PrintOp`, after the
    template's text before it (``tf.print("loss:", x)`` prints ``loss: <x>``); a template
    without tensors is printed as it is (``tf.print("done")``)."""
    template = str(node.attr("template", "{}"))
    placeholder = str(node.attr("placeholder", "{}"))
    texts = template.split(placeholder)
    if len(texts) - 1 != len(node.inputs):
        raise node.error(f"template {template!r} has {len(texts) - 1} places for "
                         f"{len(node.inputs)} tensors")
    if not node.inputs:
        return ng.PrintOp(ng.constant(np.int32(0)), template, show_value=False)
    prints = []
    for i, text in enumerate(texts[:-1]):
        prefix = re.sub(r"[:\s]+$", "", text).strip()
        prints.append(ng.PrintOp(node.op(i), prefix or None))
    return ng.doall(prints)


@rule("PrintV2")
def import_print(node: Node) -> Op:
    printed = node.input(0)
    if not isinstance(printed, Op):
        raise node.unsupported("the printed text must come from a StringFormat (tf.print)")
    return printed


@rule("Switch", "RefSwitch")
def import_switch(node: Node) -> tuple:
    """Both outputs are the value: the importer gives each the branch it lives in (a
    RefSwitch routes a reference variable itself: a branch reading it reads the variable)."""
    value = node.op(0)
    return value, value


@rule("Merge")
def import_merge(node: Node) -> tuple:
    """The value of the branch taken: the inputs must be the two branches of one cond."""
    if len(node.inputs) != 2:
        raise node.unsupported(f"a Merge of {len(node.inputs)} values (only the two "
                               f"branches of a tf.cond are supported)")
    first, second = node.input_contexts[:2]
    split = _split(first, second)
    if split is None:
        raise node.unsupported("the merged values are not the two branches of one tf.cond")
    predicate, first_taken = split
    index = [ng.constant(np.int32(0)), ng.constant(np.int32(1))]
    values = [node.op(0), node.op(1)]
    if [a.length for a in values[0].axes] != [a.length for a in values[1].axes]:
        raise node.unsupported("branches of different shapes are not supported")
    values[1] = relabelled(values[1], list(values[0].axes))
    if not first_taken:
        values.reverse()
        index.reverse()
    return ng.where(predicate, values[0], values[1]), ng.where(predicate, index[0], index[1])


def _split(first: Context, second: Context):
    """The (predicate, taken-in-first) telling two branches apart; None if they are not
    the branches of one predicate."""
    differing = [(p, v) for p, v in first if not any(q is p and w == v for q, w in second)]
    others = [(p, v) for p, v in second if not any(q is p and w == v for q, w in first)]
    if len(differing) != 1 or len(others) != 1 or differing[0][0] is not others[0][0]:
        return None
    return differing[0]
