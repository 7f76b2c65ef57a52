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

    A way to look at an intermediate value without making it a result: the
    value (and its derivative) passes through unchanged, and every backend
    prints in the order the program built the prints, once per call that
    reaches it. No optimization removes, merges or moves a print.

    Parameters
    ----------
    x : Op or number
        The value printed and passed on.
    prefix : str, optional
        Printed before the value, followed by a colon (None: the value alone).
    show_value : bool
        Print the value (False: the prefix alone, as a message; the value still
        passes through).
    name : str, optional
        A name for the result (automatic if None).

    Raises
    ------
    GraphError
        If `x` has no value (an assign).
    AxgraphTypeError
        If `x` is not an op or a number.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C = ng.make_axis(length=3, name="C")
    >>> x = ng.constant(np.array([1.0, 2.0, 3.0]), axes=[C])
    >>> y = ng.PrintOp(x * 2, "doubled")
    >>> with ng.make_transformer() as t:
    ...     print(t.computation(y + 1)())
    doubled: [2. 4. 6.]
    [3. 5. 7.]
    """

    attributes = ("prefix", "show_value")
    prefix: Optional[str]
    show_value: bool
    dtype_of_arg = 0
    has_effect = True

    def __init__(self, x, prefix=None, show_value: bool = True, name: Optional[str] = None):
        super().__init__(as_op(x), prefix=None if prefix is None else str(prefix),
                         show_value=bool(show_value), name=name)

    def infer_axes(self) -> Axes:
        x = self.args[0]
        if not x.is_tensor_op:
            raise x.error(GraphError, f"PrintOp: {type(x).__name__} {x.name} has no value to "
                                      f"print (it is run for its effect)")
        return x.axes
