"""`compile(function, backend=...)`: a small registry of backends for core Functions.

A backend is a callable taking a Function and returning a callable
`fn(*arrays, out=None)`. Entries may be "module:attribute" strings, imported
on first use, so that registering a backend costs nothing until it is asked for.
"""
from __future__ import annotations

import importlib
from typing import Callable, Dict, List, Union

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
        raise ValueError(f"no core backend named {name!r}; choose one of {backends()}") from None
    if isinstance(entry, str):
        module_name, attribute = entry.split(":")
        entry = getattr(importlib.import_module(module_name), attribute)
        _BACKENDS[name] = entry
    return entry


def compile(function: Function, backend: str = "interpreter") -> Callable:
    """`function` ready to call on row-major arrays: `fn(*arrays, out=None)` -> results."""
    if not isinstance(function, Function):
        raise TypeError(f"compile() takes a core Function, not {type(function).__name__}")
    return _resolve(backend)(function)
