"""Liveness analysis over a Schedule (the first half of memory planning).

Why this exists: a compiled graph must not allocate one tensor per
intermediate (seed 003). To share memory we need to know, for every tensor
that owns storage, the first step that writes it and the last step that
still reads it. Everything in between is its *lifetime*; two tensors whose
lifetimes do not intersect may occupy the same bytes.

Schedule. The core IR has no ``other_deps``: lowering turns every ordering
constraint of the axes graph (assignments, other_deps) into plain data flow,
so a topological order of the core Function already respects them.
``Schedule.nodes`` is such an order (schedule.py); `check_schedule` checks
that every input really is scheduled before its user, so the rest of the
planner can rely on it.

Views. A node for which ``schedule.alias_of(node)`` is not None (Transpose, Reshape,
Slice, Broadcast done by striding) owns no storage: it reads the storage of
its base, which may itself be a view. Liveness follows such chains to the
*root* and charges every read of a view to that root, so the root stays alive
while any view of it is still used. A function result (or a view that is a
result) keeps its root alive to the end, because the caller copies results
out after the last step.

Steps are positions in the schedule: parameters take steps too, so a node's
step is simply its index in ``schedule``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, Optional, Sequence, Tuple

from ...core.node import Node
from ...errors import GraphError
from .schedule import Schedule

AliasOf = Callable[[Node], Optional[Node]]


def check_schedule(order: Sequence[Node]) -> Dict[Node, int]:
    """Each node's step; GraphError if a node is listed twice or runs before an input."""
    step: Dict[Node, int] = {}
    for position, node in enumerate(order):
        if node in step:
            raise GraphError(f"schedule: {node.op} {node.name} is scheduled twice "
                             f"(steps {step[node]} and {position})", node.location)
        for source in node.inputs:
            if source not in step:
                raise GraphError(f"schedule: {node.op} {node.name} (step {position}) reads "
                                 f"{source.op} {source.name}, which is not scheduled before it",
                                 node.location)
        step[node] = position
    return step


@dataclass(frozen=True)
class Liveness:
    """Lifetimes of the nodes that own storage, and where each view's storage is.

    ``start[n]`` is the step that writes owner ``n``; ``end[n]`` is the last
    step that reads it or any view of it (``last_step`` for pinned owners).
    Lifetimes are inclusive: at step s, the inputs read at s and the output
    written at s are all live, which is what makes an ordinary op's output
    unable to reuse its inputs' bytes (in-place execution is decided
    separately, by the planner).
    """

    schedule: Tuple[Node, ...]
    step: Dict[Node, int]
    #: Nodes that own storage (need a buffer and are not views), in schedule order.
    owners: Tuple[Node, ...]
    #: Every view -> the root node whose storage it reads (the root may own no buffer,
    #: e.g. a view of a Parameter).
    root: Dict[Node, Node]
    start: Dict[Node, int]
    end: Dict[Node, int]
    #: Owners that must survive to the end: results, or roots of views that are results.
    pinned: FrozenSet[Node]
    last_step: int

    def storage_root(self, node: Node) -> Node:
        """The node whose storage `node` uses: itself, or its view chain's root."""
        return self.root.get(node, node)

    def live_at(self, step: int) -> Tuple[Node, ...]:
        """Owners live at `step` (for reports and tests; O(owners))."""
        return tuple(n for n in self.owners if self.start[n] <= step <= self.end[n])


def _resolve_root(node: Node, alias_of: AliasOf, step: Dict[Node, int],
                  root: Dict[Node, Node]) -> Node:
    """Follow `alias_of` from `node` to a node that views nothing (memoized in `root`)."""
    chain = []
    current = node
    while True:
        if current in root:
            found = root[current]
            break
        base = alias_of(current)
        if base is None:
            found = current
            break
        if base not in step or step[base] >= step[current]:
            raise GraphError(f"memory plan: {current.op} {current.name} is said to view "
                             f"{base.op} {base.name}, which is not scheduled before it",
                             current.location)
        chain.append(current)
        current = base
    for view in chain:
        root[view] = found
    return found


def analyze_liveness(schedule: Schedule) -> Liveness:
    """Lifetimes of every storage-owning node of `schedule`.

    A node owns storage when ``schedule.needs_buffer(node)`` and it is not a
    view (``schedule.alias_of(node) is None``): a view never gets bytes of its
    own, since its values live in its base.
    """
    order = tuple(schedule.nodes)
    alias_of, needs_buffer = schedule.alias_of, schedule.needs_buffer
    step = check_schedule(order)
    last_step = len(order) - 1
    root: Dict[Node, Node] = {}
    owners = []
    for node in order:
        if alias_of(node) is not None:
            _resolve_root(node, alias_of, step, root)
        elif needs_buffer(node):
            owners.append(node)
    owned = set(owners)
    start = {n: step[n] for n in owners}
    end = dict(start)
    for node in order:
        # A view "reads" its base when it is formed; an ordinary node reads its inputs
        # (and, for a Col2Im computed with its product, the product's inputs).
        at = step[node]
        for source in schedule.reads(node):
            base = root.get(source, source)
            if base in owned and end[base] < at:
                end[base] = at
        if node in root:
            base = root[node]
            if base in owned and end[base] < at:
                end[base] = at
    pinned = set()
    for result in schedule.results:
        if result not in step:
            raise GraphError(f"memory plan: result {result.op} {result.name} is not scheduled",
                             result.location)
        base = root.get(result, result)
        if base in owned:
            pinned.add(base)
            end[base] = last_step
    return Liveness(schedule=order, step=step, owners=tuple(owners), root=root, start=start,
                    end=end, pinned=frozenset(pinned), last_step=last_step)
