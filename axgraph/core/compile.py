"""`compile(function, backend=...)`: a small registry of backends for core Functions.

A backend is a callable taking a Function and returning a callable
`fn(*arrays, out=None)`. Entries may be "module:attribute" strings, imported
on first use, so that registering a backend costs nothing until it is asked for.
"""
from __future__ import annotations

import importlib
from typing import Callable, Dict, List, Union

from ..debug_info import user_location
from ..errors import AxgraphTypeError, AxgraphValueError
from .function import Function

Backend = Callable[[Function], Callable]

_BACKENDS: Dict[str, Union[str, Backend]] = {
    "interpreter": "axgraph.core.interpreter:compile_function",
    "cpu": "axgraph.transformers.cpu.backend:CpuFunction",
}


def register_backend(name: str, backend: Union[str, Backend]) -> None:
    """Make `compile(f, backend=name)` use `backend` (a callable or "module:attribute")."""
    _BACKENDS[name] = backend


def backends() -> List[str]:
    """Names `compile` accepts."""
    return sorted(_BACKENDS)


def _resolve(name: str) -> Backend:
    try:
        entry = _BACKENDS[name]
    except KeyError:
        raise AxgraphValueError(f"no core backend named {name!r}; choose one of {backends()}",
                                user_location()) from None
    if isinstance(entry, str):
        module_name, attribute = entry.split(":")
        entry = getattr(importlib.import_module(module_name), attribute)
        _BACKENDS[name] = entry
    return entry


def compile(function: Function, backend: str = "interpreter") -> Callable:
    """`function` ready to call on row-major arrays: `fn(*arrays, out=None)` -> results."""
    if not isinstance(function, Function):
        raise AxgraphTypeError(f"compile() takes a core Function, not "
                               f"{type(function).__name__}", user_location())
    return _resolve(backend)(function)
