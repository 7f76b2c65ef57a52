"""The axes graph: ops over named axes and the functions that build them.

`operators` is imported first: it binds Python's operators onto `Op` (op.py
cannot import the op families that build them; they import op.py).
"""
from . import operators  # noqa: F401  (binds Op's operators)
from .op import Op
from .tensors import AssignableTensorOp

__all__ = ["Op", "AssignableTensorOp"]
