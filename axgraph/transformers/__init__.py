"""Transformers that run axes graphs, found by name.

`make_transformer("numpy")` gives the reference interpreter. Every backend
registered with `core.register_backend` is a transformer too: a
`LoweringTransformer` on that backend, unless a transformer class is
registered under its name here (the "cpu" one adds inspection). Entries are
"module:Class" paths imported only when asked for, so `import axgraph`
needs NumPy alone.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Callable, Dict, List, Optional, Union

from ..core.backend import backends
from ..debug_info import user_location
from ..errors import AxgraphTypeError, AxgraphValueError
from .base import Computation, Transformer

#: Transformers other than the plain lowering transformer on a backend of the same name.
_REGISTRY: Dict[str, Union[str, type]] = {
    "numpy": "axgraph.transformers.nptransform:NumPyTransformer",
    "cpu": "axgraph.transformers.cpu.transformer:CpuTransformer",
    "jax": "axgraph.transformers.jax.transformer:JaxTransformer",
    "gpu": "axgraph.transformers.jax.transformer:GpuTransformer",
}


def register_transformer(name: str, transformer: Union[str, type]) -> None:
    """Make `make_transformer(name)` build `transformer` (a class or "module:Class")."""
    if not isinstance(name, str) or not name:
        raise AxgraphTypeError(f"a transformer name must be a non-empty string, not {name!r}",
                               user_location())
    is_path = isinstance(transformer, str) and transformer.count(":") == 1
    if not (is_path or isinstance(transformer, type)):
        raise AxgraphTypeError(f"register_transformer({name!r}, ...) takes a Transformer class "
                               f"or a 'module:Class' string, not {transformer!r}",
                               user_location())
    _REGISTRY[name] = transformer


def transformer_choices() -> List[str]:
    """The transformer names `make_transformer` accepts.

    Registered transformers ("numpy", the reference interpreter; "cpu", the
    compiling backend; "jax", compiled by XLA, and "gpu", the same on a GPU) and
    every backend registered with the core IR, whose transformer lowers the axes
    graph to it.

    Returns
    -------
    list of str
        The names, sorted.

    Examples
    --------
    >>> import axgraph as ng
    >>> {"numpy", "cpu", "interpreter"} <= set(ng.transformer_choices())
    True
    """
    return sorted(set(_REGISTRY) | set(backends()))


def transformer_class(name: str) -> type:
    """The class registered under `name` (importing its module if needed), or the
    lowering transformer for a core backend of that name."""
    if not isinstance(name, str):
        raise AxgraphTypeError(f"a transformer name is a string (one of "
                               f"{transformer_choices()}), not {name!r}", user_location())
    if name not in _REGISTRY and name in backends():
        from .lowering_transformer import LoweringTransformer

        return LoweringTransformer
    try:
        entry = _REGISTRY[name]
    except KeyError:
        raise AxgraphValueError(f"no transformer named {name!r}; choose one of "
                                f"{transformer_choices()}", user_location()) from None
    if isinstance(entry, str):
        module_name, class_name = entry.split(":")
        entry = getattr(importlib.import_module(module_name), class_name)
        entry.transformer_name = name
        _REGISTRY[name] = entry
    return entry


def allocate_transformer(name: str, **options) -> Transformer:
    """A new transformer of the registered kind `name` (Nervana Graph's name for it)."""
    cls = transformer_class(name)
    # a core backend's lowering transformer takes the backend's name (and checks its options)
    arguments = () if name in _REGISTRY else (name,)
    try:
        inspect.signature(cls).bind(*arguments, **options)
    except TypeError as error:
        raise AxgraphTypeError(f"make_transformer({name!r}): {error}; {cls.__name__} takes "
                               f"{inspect.signature(cls)}", user_location()) from None
    return cls(*arguments, **options)


class TransformerFactory:
    """A callable making transformers of one kind with fixed options."""

    def __init__(self, name: str, **options):
        transformer_class(name)  # fail now, not at the first call, on an unknown name
        self.name, self.options = name, options

    def __call__(self) -> Transformer:
        return allocate_transformer(self.name, **self.options)

    def __repr__(self) -> str:
        return f"TransformerFactory({self.name!r}, **{self.options!r})"


def make_transformer_factory(name: str, **options) -> TransformerFactory:
    """A factory for `make_transformer()` and `set_transformer_factory`."""
    return TransformerFactory(name, **options)


_default_factory: Callable[[], Transformer] = TransformerFactory("numpy")


def set_transformer_factory(factory: Callable[[], Transformer]) -> None:
    """Make `make_transformer()` (with no name) call `factory`."""
    global _default_factory
    _default_factory = factory


def get_transformer_factory() -> Callable[[], Transformer]:
    """The factory `make_transformer()` uses when given no name."""
    return _default_factory


def make_transformer(name: Optional[str] = None, **options) -> Transformer:
    """Make a transformer: the object that runs axes graphs and holds their stored values.

    Computations are made from a transformer (``t.computation(results,
    *placeholders)``) and share its variables; close it (or use it in a
    ``with`` block) to release them. All transformers compute the same
    values, so a model is written once and run on any of them.

    Parameters
    ----------
    name : str, optional
        One of `transformer_choices()`: "numpy" (the reference interpreter),
        "cpu" (compiled C kernels), "interpreter" (the core IR interpreter),
        "jax" (compiled by XLA on the CPU, GPU or TPU JAX finds; the optional
        extra ``axgraph[jax]``), "gpu" (the jax transformer on a GPU), or
        another registered backend. None: one from the factory set by
        `set_transformer_factory` (the NumPy reference unless set).
    **options
        Keyword options of that transformer (for "cpu": ``fuse``, ``engine``,
        ``optimize``, ``fuse_min_elements``, ``cache_size``: the programs kept, one per
        binding of the lengths fed, 8 by default; see ``computation.cache_info()``; for
        "jax": ``optimize``, ``cache_size``, ``platform``, ``keep_on_device``).

    Returns
    -------
    Transformer
        A new transformer, open until closed.

    Raises
    ------
    AxgraphValueError
        If no transformer is called `name`.
    AxgraphTypeError
        If `name` is not a string, or the transformer takes no such options.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C = ng.make_axis(length=2, name="C")
    >>> x = ng.placeholder([C])
    >>> with ng.make_transformer("numpy") as t:
    ...     square = t.computation(x * x, x)
    ...     print(square(np.array([3.0, 4.0])))
    [ 9. 16.]
    """
    if name is None:
        if options:
            return allocate_transformer(getattr(_default_factory, "name", "numpy"), **options)
        return _default_factory()
    return allocate_transformer(name, **options)


def __getattr__(attribute: str):
    if attribute == "NumPyTransformer":
        return transformer_class("numpy")
    raise AttributeError(attribute)


__all__ = ["Computation", "NumPyTransformer", "Transformer", "TransformerFactory",
           "allocate_transformer", "get_transformer_factory", "make_transformer",
           "make_transformer_factory", "register_transformer", "set_transformer_factory",
           "transformer_choices", "transformer_class"]
