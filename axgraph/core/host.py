"""Host calls: core nodes run for an effect on the host (a print), outside CORE_OPS.

The core lets a bridge define ops of its own; these are the ones that cannot
become core ops, because what they do is not a value. The core interpreter
runs each through its kernel, the cpu backend calls that kernel from the
generated code (no fusion, no planned buffer), and the passes leave them
alone: constant folding does not run them early, CSE does not merge two of
them, and nothing is rewritten through them.

Order: a host call may take the previous host call as an extra input
(`after`), read only so that every backend runs the calls in program order;
lowering chains them so, and keeps the last one among the Function's results,
so that no pass can drop one whose value nobody reads.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ..errors import GraphError
from .interpreter import kernel
from .node import Node
from .tensor_types import ElementType, Shape


class HostCall(Node):
    """Base of host calls: the value is the first input's, passed through."""

    def _infer(self) -> Tuple[ElementType, Shape]:
        if not 1 <= len(self.inputs) <= 2:
            raise self._fail(GraphError, f"takes a value and an optional previous host call, "
                                         f"not {len(self.inputs)} inputs")
        value = self.inputs[0]
        return value.element_type, value.shape


class Print(HostCall):
    """`x` unchanged, printed as ``prefix: x`` (or just x) each time the node runs.

    Parameters
    ----------
    x : Node
        The value printed and passed through: any element type and shape.
    prefix : str, optional
        Printed before the value, with a colon (default: none).
    after : Node, optional
        The previous host call, read only so that every backend runs the calls
        in program order.
    show_value : bool
        Print x (False: the prefix alone, as a message).

    Returns
    -------
    Print
        A node of x's element type and shape, holding x's values.

    Raises
    ------
    GraphError
        `prefix` is neither a string nor None, an input is not a core node, or
        `name` is not a non-empty string.
    """

    _attributes = ("prefix", "show_value")

    def __init__(self, x: Node, prefix: Optional[str] = None, after: Optional[Node] = None,
                 name: Optional[str] = None, show_value: bool = True):
        super().__init__((x,) if after is None else (x, after),
                         {"prefix": prefix, "show_value": show_value}, name)

    def _normalize(self, attributes: dict) -> dict:
        prefix = attributes["prefix"]
        if prefix is not None and not isinstance(prefix, str):
            raise self._fail(GraphError, f"prefix must be a string or None, not {prefix!r}")
        show_value = attributes.get("show_value", True)
        if not isinstance(show_value, bool):
            raise self._fail(GraphError, f"show_value must be a bool, not {show_value!r}")
        if not show_value and prefix is None:
            raise self._fail(GraphError, "a print of neither a value nor a prefix")
        return {"prefix": prefix, "show_value": show_value}


def print_value(prefix: Optional[str], value: np.ndarray, show_value: bool = True) -> None:
    """What a print shows, on every backend: one `print` call to sys.stdout (the prefix
    alone, as a message, without `show_value`)."""
    if not show_value:
        print(prefix)
    elif prefix is None:
        print(value)
    else:
        print(f"{prefix}:", value)


@kernel(Print)
def _print(node: Print, ctx, x: np.ndarray, *after: np.ndarray) -> np.ndarray:
    print_value(node.attributes["prefix"], x, node.attributes.get("show_value", True))
    return np.array(x, copy=True)  # a value of its own: the input's buffer may be reused


__all__ = ["HostCall", "Print", "print_value"]
