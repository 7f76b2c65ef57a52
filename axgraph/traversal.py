"""Depth-first post-order of a DAG: each node after the nodes it reads.

Both graphs (the axes graph and the core IR) need this order; the walk is
iterative so deep graphs (unrolled recurrences) never hit Python's recursion limit.
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable, List, Sequence, TypeVar

T = TypeVar("T", bound=Hashable)


def post_order(roots: Iterable[T], inputs_of: Callable[[T], Sequence[T]]) -> List[T]:
    """Every node `roots` reach through `inputs_of`, each once, after its inputs."""
    order: List[T] = []
    seen: set = set()
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.append((node, True))
            stack.extend((i, False) for i in reversed(inputs_of(node)) if i not in seen)
    return order
