"""Backends that run axes graphs, found by name in one registry.

`make_transformer("numpy")` gives the reference interpreter. Backends with
optional dependencies register a "module:Class" path and are imported only
when asked for, so `import axgraph` needs NumPy alone.
"""
from __future__ import annotations

import importlib
from typing import Dict, List, Union

from .base import Computation, Transformer

_REGISTRY: Dict[str, Union[str, type]] = {
    "numpy": "axgraph.transformers.nptransform:NumPyTransformer",
    "interpreter": "axgraph.transformers.interpreter:InterpreterTransformer",
    "cpu": "axgraph.transformers.cpu.transformer:CpuTransformer",
}


def register_transformer(name: str, transformer: Union[str, type]) -> None:
    """Make `make_transformer(name)` build `transformer` (a class or "module:Class")."""
    _REGISTRY[name] = transformer


def transformer_choices() -> List[str]:
    """Names `make_transformer` accepts."""
    return sorted(_REGISTRY)


def transformer_class(name: str) -> type:
    """The class registered under `name` (importing its module if needed)."""
    try:
        entry = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"no transformer named {name!r}; choose one of {transformer_choices()}") from None
    if isinstance(entry, str):
        module_name, class_name = entry.split(":")
        entry = getattr(importlib.import_module(module_name), class_name)
        entry.transformer_name = name
        _REGISTRY[name] = entry
    return entry


def make_transformer(name: str = "numpy", **options) -> Transformer:
    """A new transformer of the registered kind `name`."""
    return transformer_class(name)(**options)


def __getattr__(attribute: str):
    if attribute == "NumPyTransformer":
        return transformer_class("numpy")
    raise AttributeError(attribute)


__all__ = ["Computation", "Transformer", "make_transformer", "register_transformer",
           "transformer_choices", "transformer_class", "NumPyTransformer"]
