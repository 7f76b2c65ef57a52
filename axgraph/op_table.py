"""OpTable: what a backend, a rule set or autodiff knows per op class.

Kernel tables, lowering rules and adjoints all map an op class to an entry and
must serve subclasses (a user's subclass of a library op) with the entry of the
nearest registered base. One helper does that for all of them, so each answers
the same three questions the same way:

* `table.register(*classes)` decorates an entry (a kernel, a rule, ...);
* `table.lookup(op_class)` finds the entry of the class or of its nearest base
  in method resolution order (cached), None if there is none;
* `table.missing(classes)` lists the classes without an entry: a test over all
  ops and all backends asks this, so a forgotten entry fails there, not late.

An entry registered `when=` a predicate of the class covers only the classes it
accepts: a generic kernel registered on `UnaryElementwise` that computes with
the op's declared NumPy function covers exactly the ops that declare one, and
`missing` reports the others.

As a mapping the table holds what was registered, by exact class (so a test
may patch an entry with `monkeypatch.setitem`).
"""
from __future__ import annotations

from typing import (Callable, Dict, Generic, Iterable, Iterator, List, Mapping, MutableMapping,
                    Optional, Tuple, TypeVar)

V = TypeVar("V")
Condition = Callable[[type], bool]


class OpTable(MutableMapping[type, V], Generic[V]):
    """Op class -> entry, looked up through base classes (see the module docstring)."""

    def __init__(self, what: str, entries: Optional[Mapping[type, V]] = None):
        #: What the entries are ("interpreter kernel", "adjoint", ...), for messages.
        self.what = what
        self._entries: Dict[type, Tuple[V, Optional[Condition]]] = {}
        self._found: Dict[type, V] = {}
        for op_class, entry in (entries or {}).items():
            self[op_class] = entry

    def register(self, *classes: type, when: Optional[Condition] = None
                 ) -> Callable[[V], V]:
        """Decorator: the decorated object becomes the entry of each of `classes`
        (of those `when(op_class)` accepts, if given: subclasses included)."""

        def add(entry: V) -> V:
            for op_class in classes:
                self._entries[op_class] = (entry, when)
            self._found.clear()
            return entry

        return add

    def lookup(self, op_class: type) -> Optional[V]:
        """The entry of `op_class` or of its nearest registered base that applies to it.

        Found entries are remembered until the table changes; a class without one is
        searched again each time (a condition may read another table, filled later).
        """
        found = self._found.get(op_class)
        if found is not None:
            return found
        for base in op_class.__mro__:
            registered = self._entries.get(base)
            if registered is not None and (registered[1] is None or registered[1](op_class)):
                self._found[op_class] = registered[0]
                return registered[0]
        return None

    def missing(self, classes: Iterable[type]) -> List[type]:
        """The classes among `classes` that no entry covers, in the order given."""
        return [op_class for op_class in classes if self.lookup(op_class) is None]

    # -- the mapping of registered entries ---------------------------------------------------
    def __getitem__(self, op_class: type) -> V:
        return self._entries[op_class][0]

    def __setitem__(self, op_class: type, entry: V) -> None:
        self.register(op_class)(entry)

    def __delitem__(self, op_class: type) -> None:
        del self._entries[op_class]
        self._found.clear()

    def __iter__(self) -> Iterator[type]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<OpTable of {self.what}: {len(self)} entries>"


__all__ = ["OpTable"]
