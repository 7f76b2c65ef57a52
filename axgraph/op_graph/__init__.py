"""The axes graph: ops over named axes and the functions that build them."""
from .op import Op
from .tensors import AssignableTensorOp

__all__ = ["Op", "AssignableTensorOp"]
