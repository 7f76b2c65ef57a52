"""Execution order of an axes graph.

An op runs after its args and its other_deps. Among ops that are ready at the
same time, the one created first runs first, so a graph executes in the order
the program built it (assigns take effect in creation order).
`sequential([a, b, c])` adds the edges that make everything b needs (and has
not already been needed by a) run after a, and so on, for the ops whose place
can be seen (`timed_ops`): an op computed only from values that no op of the
computation writes gives the same value wherever it runs, so pinning it after a
step would only add false cycles (a placeholder, a constant, or a product of
them that two sequentials share, one needing it before a print the other needs
it after).
"""
from __future__ import annotations

import heapq
from typing import Callable, Dict, Iterable, List, Set

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

    timed = timed_ops(ops)
    for op in ops:
        for dep in set(op.args) | set(op.other_deps):
            edge(dep, op)
        if isinstance(op, (SequentialOp, DoAllOp)):
            _sequential_edges(op, edge, timed)

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


def timed_ops(ops: Iterable[Op]) -> Set[Op]:
    """The ops of `ops` (closed under args and other_deps) whose place in a schedule
    can be seen.

    An op without a value or with an effect (a print, a check) acts when it runs;
    an op reading a stored tensor that an op of `ops` writes sees the value of the
    moment; an op needing such ops inherits their moment. The rest (stored tensors,
    which are read where used, and ops computed from constants, placeholders and
    unwritten variables alone) give the same value wherever they run.
    """
    written = {arg for op in ops for arg in op.args[:op.lvalue_args]}
    known: Dict[Op, bool] = {}
    entered: Set[Op] = set()
    for root in ops:
        stack = [(root, False)]
        while stack:
            op, expanded = stack.pop()
            if op in known or (op in entered and not expanded):  # done, or on a cycle
                continue
            deps = [*op.args, *op.other_deps]
            if not expanded:
                entered.add(op)
                stack.append((op, True))
                stack.extend((dep, False) for dep in deps if dep not in entered)
                continue
            known[op] = not op.is_assignable and (
                not op.is_tensor_op or op.has_effect
                or any(arg in written for arg in op.args)
                or any(known.get(dep, True) for dep in deps))  # (a dep on a cycle: timed)
    return {op for op, is_timed in known.items() if is_timed}


def _sequential_edges(op: Op, edge: Callable[[Op, Op], None], timed: Set[Op]) -> None:
    """Everything a step needs that no earlier step needed runs after the last timed
    step before it; ops whose place cannot be seen stay free (see `timed_ops`)."""
    if not op.args:
        return
    first = op.args[0]
    done: Set[Op] = set(reachable([first]))
    anchor = first if first in timed else None
    for step in op.args[1:]:
        for needed in reachable([step]):
            if needed not in done:
                done.add(needed)
                if anchor is not None and needed in timed:
                    edge(anchor, needed)
        if step in timed:
            anchor = step
