"""Automatically generated unique names (seed 001 NameableValue)."""
from __future__ import annotations

import itertools
import weakref
from typing import Optional

_serials = itertools.count()
_live_names: "weakref.WeakValueDictionary[str, NameableValue]" = weakref.WeakValueDictionary()


def next_serial() -> int:
    """A process-wide increasing number: creation order of named objects."""
    return next(_serials)


class NameableValue:
    """An object with a unique, settable name; auto names are `Kind_serial`."""

    def __init__(self, name: Optional[str] = None):
        self._serial = next_serial()
        self._name = None
        self.name = name if name is not None else f"{self._name_prefix()}_{self._serial}"

    def _name_prefix(self) -> str:
        """What auto-generated names start with: the class name by default."""
        return type(self).__name__

    @property
    def name(self) -> str:
        """Unique among live objects; a clashing name gets a numeric suffix."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise TypeError(f"a name must be a non-empty string, not {value!r}")
        candidate, suffix = value, 0
        while True:
            holder = _live_names.get(candidate)
            if holder is None or holder is self:
                break
            suffix += 1
            candidate = f"{value}_{suffix}"
        if self._name is not None and _live_names.get(self._name) is self:
            del _live_names[self._name]
        self._name = candidate
        _live_names[candidate] = self
