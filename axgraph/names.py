"""Names of ops (Nervana Graph's NameableValue).

Automatic names (`Add_12`, `variable_3`) are unique: they carry a serial
number in creation order. A name the user gives is kept exactly as given, so
that saving and restoring variables by name finds the same names every time
a model is rebuilt; two ops may share a user-given name.
"""
from __future__ import annotations

import itertools
from typing import Optional

from .debug_info import user_location
from .errors import AxgraphTypeError

_serials = itertools.count()


def next_serial() -> int:
    """A process-wide increasing number: creation order of named objects."""
    return next(_serials)


class NameableValue:
    """An object with a settable name; automatic names are `Kind_serial`."""

    def __init__(self, name: Optional[str] = None):
        self._serial = next_serial()
        self.name = name if name is not None else f"{self._name_prefix()}_{self._serial}"

    def _name_prefix(self) -> str:
        """What automatic names start with: the class name by default."""
        return type(self).__name__

    @property
    def name(self) -> str:
        """A label for debugging, printing and saving (user names are kept as given)."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise AxgraphTypeError(f"a name must be a non-empty string, not {value!r}",
                                   user_location())
        self._name = value
