"""PrintOp: a value printed each time a computation computes it (Nervana Graph v0.4).

    y = ng.PrintOp(x * 2, "doubled")   # prints "doubled: [...]" on every call
    z = y + 1                          # y is x * 2, unchanged

The value passes through unchanged, and so does its derivative. A print is
an effect: every backend prints in the order the program built the prints
(each print runs once per call, when a computation reaches it, like any op),
and no optimization folds, merges, fuses or drops one. The compiling
backends lower it to the host call `axgraph.core.host.Print`.
"""
from __future__ import annotations

from typing import Optional

from ..axes import Axes
from ..errors import GraphError
from .op import Op
from .tensors import as_op


class PrintOp(Op):
    """x, printed as ``prefix: value`` (or just the value) whenever it is computed.

    `prefix` is printed before the value, followed by a colon (None: the value alone).
    """

    attributes = ("prefix",)
    prefix: Optional[str]
    dtype_of_arg = 0

    def __init__(self, x, prefix=None, name: Optional[str] = None):
        super().__init__(as_op(x), prefix=None if prefix is None else str(prefix), name=name)

    def infer_axes(self) -> Axes:
        x = self.args[0]
        if not x.is_tensor_op:
            raise x.error(GraphError, f"PrintOp: {type(x).__name__} {x.name} has no value to "
                                      f"print (it is run for its effect)")
        return x.axes
