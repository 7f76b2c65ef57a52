"""Sparse optimizer steps without TF's de-duplication of their indices.

Before a sparse step such as SparseApplyMomentum, TF's optimizers sum the gradient rows
of repeated indices: ``Unique`` of the indices, then an UnsortedSegmentSum of the rows
into as many rows as there are distinct indices. That count is known only when the
graph runs, and an axes graph has no axis of unknown length there. The import rules of
these steps sum rows by index themselves (into the variable's rows), so the importer
hands them the indices and rows from before the de-duplication, and drops the ops that
computed it when nothing else reads them. TF's own result is unchanged.
"""
from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, Set, Tuple

#: Op type -> the positions of its (gradient rows, indices) inputs, for the steps whose
#: import rules sum the rows of repeated indices.
SUMMING_STEPS: Dict[str, Tuple[int, int]] = {
    "SparseApplyMomentum": (3, 4),
    "ResourceSparseApplyMomentum": (3, 4),
}

#: The op types that may compute a de-duplication, dropped once nothing reads them.
_DEDUPLICATING = ("Unique", "UnsortedSegmentSum", "Shape", "StridedSlice", "Const")


def _source(name: str) -> Tuple[str, int]:
    """A GraphDef input (``"op"``, ``"op:1"``) as (op name, output index)."""
    op, _, index = name.partition(":")
    return op, int(index) if index else 0


def without_deduplication(tf: Any, graph_def: Any) -> Tuple[Any, FrozenSet[str]]:
    """`graph_def`, or a copy whose summing steps read the rows and indices from before
    TF's de-duplication (see the module's notes), and the names of those steps.

    A summing step not fed by a de-duplication (the raw op called directly) keeps its
    inputs; its import rule refuses repeated indices when the graph runs, as TF would
    apply them one after another.

    Parameters
    ----------
    tf : module
        ``tensorflow.compat.v1``.
    graph_def : tf.GraphDef
        The graph; it is not changed.

    Returns
    -------
    tf.GraphDef
        The graph the importer reads.
    frozenset of str
        The steps that now read the rows and indices from before the de-duplication.
    """
    nodes = {node.name: node for node in graph_def.node}
    rewired: List[Tuple[str, int, str]] = []
    dropped: Set[str] = set()
    for node in graph_def.node:
        if node.op not in SUMMING_STEPS:
            continue
        rows_at, indices_at = SUMMING_STEPS[node.op]
        summed_name, summed_output = _source(node.input[rows_at])
        unique_name, unique_output = _source(node.input[indices_at])
        summed, unique = nodes.get(summed_name), nodes.get(unique_name)
        if (unique is None or unique.op != "Unique" or unique_output != 0 or summed is None
                or summed.op != "UnsortedSegmentSum" or summed_output != 0
                or _source(summed.input[1]) != (unique.name, 1)):
            continue
        rewired.append((node.name, rows_at, summed.input[0]))
        rewired.append((node.name, indices_at, unique.input[0]))
        dropped.update((summed.name, unique.name))
    if not rewired:
        return graph_def, frozenset()
    copy = tf.GraphDef()
    copy.CopyFrom(graph_def)
    by_name = {node.name: node for node in copy.node}
    for name, position, source in rewired:
        by_name[name].input[position] = source
    _drop_unread(copy, dropped)
    return copy, frozenset(name for name, _, _ in rewired)


def _drop_unread(graph_def: Any, candidates: Set[str]) -> None:
    """Remove the candidates nothing reads any more, and then the de-duplicating ops that
    only they read (the count of distinct indices: a Shape of the Unique, a slice)."""
    kinds = {node.name: node.op for node in graph_def.node}
    while True:
        read = {_read(name) for node in graph_def.node for name in node.input}
        unread = [i for i, node in enumerate(graph_def.node)
                  if node.name in candidates and node.name not in read]
        if not unread:
            return
        for index in reversed(unread):
            node = graph_def.node[index]
            candidates.update(op for op in map(_read, node.input)
                              if kinds.get(op) in _DEDUPLICATING)
            del graph_def.node[index]


def _read(name: str) -> str:
    """The op a GraphDef input (``"op:1"``, or ``"^op"`` for a control input) reads."""
    return _source(name.lstrip("^"))[0]


__all__ = ["SUMMING_STEPS", "without_deduplication"]
