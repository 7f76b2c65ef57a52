"""A griffe extension for the API reference: a module's `__all__` as Python computes it.

griffe reads source without running it, so an `__all__` built by code (`axgraph.core`
lists its ops from `CORE_OPS`) would leave the reference empty. As griffe reads a
module that defines `__all__`, the module is imported and its exports are set to the
names its `__all__` holds at run time; members the module makes at import are read by
inspection. Only the docs build uses this file.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe


class RuntimeAll(griffe.Extension):
    """Set each module's exports from its imported `__all__`, before wildcard imports
    and exports are expanded."""

    def on_module_members(self, *, mod: griffe.Module, **kwargs: Any) -> None:
        if "__all__" in mod.members:
            module = importlib.import_module(mod.path)
            names = getattr(module, "__all__", None)
            if names is not None:
                mod.exports = [str(name) for name in names]
                # Names the module makes at import (the elementwise functions are built
                # from their core ops' declarations) have no source to read: inspect them.
                made = [n for n in mod.exports if n not in mod.members
                        and getattr(getattr(module, n, None), "__module__", None) == mod.path]
                if made:
                    inspected = griffe.inspect(mod.path)
                    for name in made:
                        mod.set_member(name, inspected[name])

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        """Use the docstring Python shows (`help()`) where code completes it at import (the
        reductions' shared parameters are written once and added by a decorator)."""
        try:
            value: Any = importlib.import_module(func.module.path)
        except ImportError:
            return
        for part in func.path[len(func.module.path) + 1:].split("."):
            value = getattr(value, part, None)
        if not (inspect.isfunction(value) and value.__module__ == func.module.path
                and value.__name__ == func.name and value.__doc__):
            return                  # an alias of something documented elsewhere, or no text
        text = inspect.cleandoc(value.__doc__)
        if not text or (func.docstring is not None and func.docstring.value == text):
            return
        like = func.docstring or func.module.docstring
        func.docstring = griffe.Docstring(
            text, parent=func, parser=like.parser if like else None,
            parser_options=like.parser_options if like else None)
