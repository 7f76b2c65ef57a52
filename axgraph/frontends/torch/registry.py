"""The one table of ATen rules: each overload the bridge compiles, and how.

A rule turns one ATen op of an FX graph into core ops (or bridge ops that the pass
pipeline lowers to core ops). Everything else is derived from the table: which ops a
graph partition may hold (`supported`), what `supported_ops()` lists, what falls back.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch

from .types import element_type

#: decides, from an FX node, why a rule cannot take it (None: it can)
Check = Callable[[Any], Optional[str]]
Build = Callable[..., Any]


@dataclass(frozen=True)
class Rule:
    """How one or more ATen overloads become core ops.

    Attributes
    ----------
    build : callable
        ``build(builder, node, args)``: the core node (a tuple of them for an op with
        several results, a dim for a size computation) standing for the FX node.
    check : callable or None
        ``check(node)``: why this node's arguments are beyond the rule (None: they are not).
    """

    build: Build
    check: Optional[Check] = None


RULES: Dict[Any, Rule] = {}


def rule(*overloads: Any, check: Optional[Check] = None) -> Callable[[Build], Build]:
    """Register the decorated function as the rule for `overloads`."""
    def register(build: Build) -> Build:
        for overload in overloads:
            if overload in RULES:
                raise ValueError(f"{overload} has two rules")
            RULES[overload] = Rule(build, check)
        return build
    return register


def supported_ops() -> List[str]:
    """Every ATen overload (and Python operator on sizes) the bridge compiles, sorted.

    Returns
    -------
    list of str
        Their names as PyTorch prints them (``aten.addmm.default``).
    """
    return sorted(op_name(op) for op in RULES)


def op_name(target: Any) -> str:
    """An FX target's printed name: ``aten.mm.default``, ``operator.getitem``."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return f"{getattr(target, '__module__', None) or 'builtins'}.{getattr(target, '__name__', target)}"


def _tensors(value: Any) -> Iterator[Any]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def unsupported_reason(node: Any) -> Optional[str]:
    """Why the bridge cannot compile this FX call node (None: it can)."""
    found = RULES.get(node.target)
    if found is None:
        return "no rule for this op"
    values = [node.meta.get("val")]
    values += [a.meta.get("val") for a in node.all_input_nodes]
    for tensor in (t for v in values for t in _tensors(v)):
        if element_type(tensor.dtype) is None:
            return f"element type {tensor.dtype} is not compiled"
    return found.check(node) if found.check is not None else None


class Arguments:
    """An ATen node's arguments by their schema names, defaults filled in, resolved.

    ``args.self`` is the core node (or number, list, dim) that stands for the argument;
    ``args.raw("self")`` is the FX argument itself (for its traced metadata).
    """

    def __init__(self, node: Any, resolve: Callable[[Any], Any]):
        values: Dict[str, Any] = {}
        schema = getattr(node.target, "_schema", None)
        if schema is None:  # a Python operator: positional only
            names: Tuple[str, ...] = tuple(f"arg{i}" for i in range(len(node.args)))
            values = dict(zip(names, node.args))
        else:
            for i, argument in enumerate(schema.arguments):
                if i < len(node.args) and not argument.kwarg_only:
                    values[argument.name] = node.args[i]
                elif argument.name in node.kwargs:
                    values[argument.name] = node.kwargs[argument.name]
                elif argument.has_default_value():
                    values[argument.name] = argument.default_value
                else:
                    values[argument.name] = None
        self._raw = values
        self._resolved = {name: resolve(value) for name, value in values.items()}

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_resolved"][name]
        except KeyError:
            raise AttributeError(name) from None

    def raw(self, name: str) -> Any:
        """The FX argument as the graph holds it."""
        return self._raw[name]


__all__ = ["Rule", "RULES", "rule", "supported_ops", "op_name", "unsupported_reason",
           "Arguments"]
