"""The values of a TF graph that are known before any data is fed.

Constants, shapes (every shape is static here: placeholders have full shapes),
the random draws of variables' initializers, and whatever is computed from them only (the shape
arithmetic of `tf.gradients`: BroadcastGradientArgs, Fill, ...) are computed once,
at import time, by TensorFlow itself, in one session run. The rules then see them as NumPy arrays,
so shape arithmetic never reaches the axgraph graph.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

#: Ops that read only their inputs' shapes: computed from TF's static shapes.
SHAPE_OPS = ("Shape", "ShapeN", "Size", "Rank")

#: Ops never known in advance although they are stateless: their value is fed.
FED_OPS = ("Placeholder", "PlaceholderWithDefault", "PlaceholderV2")

#: Random draws (stateful in TF). Those that only initialize variables are computed at
#: import like the rest: a variable's random initial value is drawn once, by TF, so a
#: graph with seeds set starts as in TF's session. Others (dropout's) are drawn each run.
RANDOM_OPS = ("RandomStandardNormal", "TruncatedNormal", "RandomUniform", "RandomUniformInt")


def _is_initializer(op: Any) -> bool:
    """Whether `op` is a variable's initializer: the assignment ``v/Assign`` of v."""
    return (op.type in ("Assign", "AssignVariableOp") and len(op.inputs) == 2
            and op.name == f"{op.inputs[0].op.name}/Assign")


def _feeding_only_initializers(graph: Any) -> set:
    """The names of the ops whose values reach only variables' initializers."""
    only: set = set()
    for op in reversed(graph.get_operations()):  # each op after the ops it feeds
        consumers = [c for t in op.outputs for c in t.consumers()]
        if consumers and all(_is_initializer(c) or c.name in only for c in consumers):
            only.add(op.name)
    return only


def _plain_dtype(dtype: Any) -> bool:
    """Whether a TF dtype holds numbers or booleans (not a reference, resource or string)."""
    return dtype == dtype.base_dtype and (dtype.is_floating or dtype.is_integer or dtype.is_bool)


def _shape_values(op: Any) -> List[np.ndarray]:
    out_type = op.get_attr("out_type").as_numpy_dtype if op.type != "Rank" else np.int32
    shapes = [t.shape.as_list() for t in op.inputs]
    if op.type == "Rank":
        return [np.asarray(len(shapes[0]), np.int32)]
    if op.type == "Size":
        return [np.asarray(int(np.prod(shapes[0], dtype=np.int64)), out_type)]
    return [np.asarray(shape, out_type) for shape in shapes]


def static_values(tf: Any, graph: Any) -> Dict[str, np.ndarray]:
    """The value of every output of `graph` known before data is fed, by tensor name.

    Parameters
    ----------
    tf : module
        ``tensorflow.compat.v1``.
    graph : tf.Graph
        The graph, with TF's static shapes.

    Returns
    -------
    dict of str to numpy.ndarray
        Tensor name (``"op:0"``) -> value.
    """
    known: set = set()
    initializing = _feeding_only_initializers(graph)
    feeds: Dict[Any, np.ndarray] = {}
    fetches: List[Any] = []
    for op in graph.get_operations():
        if not op.outputs or not all(_plain_dtype(t.dtype) for t in op.outputs):
            continue
        if op.type in SHAPE_OPS and all(t.shape.is_fully_defined() for t in op.inputs):
            feeds.update(zip(op.outputs, _shape_values(op)))
        elif ((op.type == "Const" or op.inputs and op.type not in FED_OPS
               and (not op.op_def.is_stateful
                    or op.type in RANDOM_OPS and op.name in initializing)
               and all(t.op.name in known for t in op.inputs))
              and all(c.name in known for c in op.control_inputs)):
            fetches.extend(op.outputs)
        else:
            continue
        known.add(op.name)
    values = {t.name: np.asarray(v) for t, v in feeds.items()}
    if fetches:
        with tf.Session(graph=graph) as session:
            results = session.run(fetches, feed_dict=feeds)
        values.update((t.name, np.asarray(v)) for t, v in zip(fetches, results))
    return values
