"""An insertion-ordered set: other_deps and initializers keep creation order."""
from __future__ import annotations

from typing import Generic, Iterable, Iterator, MutableSet, TypeVar

T = TypeVar("T")


class OrderedSet(MutableSet, Generic[T]):
    """A set that iterates in insertion order; `pop()` takes the newest item."""

    def __init__(self, items: Iterable[T] = ()):
        self._items = dict.fromkeys(items)

    def __contains__(self, item) -> bool:
        return item in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: T) -> None:
        self._items[item] = None

    def discard(self, item: T) -> None:
        self._items.pop(item, None)

    def pop(self) -> T:
        """Remove and return the most recently added item."""
        if not self._items:
            raise KeyError("pop from an empty OrderedSet")
        return self._items.popitem()[0]

    def update(self, items: Iterable[T]) -> None:
        for item in items:
            self._items[item] = None

    def __repr__(self) -> str:
        return f"OrderedSet({list(self._items)!r})"
