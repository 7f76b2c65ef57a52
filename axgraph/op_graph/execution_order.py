"""Execution order of an axes graph.

An op runs after its args and its other_deps. Among ops that are ready at the
same time, the one created first runs first, so a graph executes in the order
the program built it (assigns take effect in creation order).
`sequential([a, b, c])` adds the edges that make everything b needs (and has
not already been needed by a) run after a, and so on.
"""
from __future__ import annotations

import heapq
from typing import Dict, Iterable, List, Set

from ..errors import GraphError
from .control import DoAllOp, SequentialOp
from .op import Op, upstream_ops


def reachable(roots: Iterable[Op]) -> List[Op]:
    """Ops reachable from `roots` through args and other_deps."""
    return upstream_ops(roots, include_control=True)


def schedule(roots: Iterable[Op]) -> List[Op]:
    """All ops `roots` need, in an order that honours every dependency."""
    ops = reachable(roots)
    successors: Dict[Op, List[Op]] = {op: [] for op in ops}
    pending: Dict[Op, int] = {op: 0 for op in ops}

    def edge(before: Op, after: Op) -> None:
        successors[before].append(after)
        pending[after] += 1

    for op in ops:
        for dep in set(op.args) | set(op.other_deps):
            edge(dep, op)
        if isinstance(op, (SequentialOp, DoAllOp)):
            _sequential_edges(op, edge)

    ready = [(op._serial, op) for op in ops if pending[op] == 0]
    heapq.heapify(ready)
    order: List[Op] = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for after in successors[op]:
            pending[after] -= 1
            if pending[after] == 0:
                heapq.heappush(ready, (after._serial, after))
    if len(order) != len(ops):
        stuck = sorted((op for op in ops if pending[op]), key=lambda op: op._serial)
        raise GraphError("the graph has a dependency cycle through "
                         + ", ".join(op.name for op in stuck[:5]), stuck[0].location)
    return order


def _sequential_edges(op: Op, edge) -> None:
    if not op.args:
        return
    done: Set[Op] = set(reachable([op.args[0]]))
    for previous, step in zip(op.args, op.args[1:]):
        for needed in reachable([step]):
            if needed not in done:
                edge(previous, needed)
                done.add(needed)
