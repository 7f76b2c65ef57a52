"""Torch's element types and symbolic sizes as the core's."""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ... import core
from ...dims import Dim, DimLike
from .errors import TorchBridgeError

#: torch dtype -> core element type, for every dtype the bridge compiles (others fall back)
ELEMENT_TYPES: Dict[torch.dtype, core.ElementType] = {
    torch.float32: core.f32, torch.float64: core.f64, torch.float16: core.f16,
    torch.int64: core.i64, torch.int32: core.i32, torch.int16: core.i16, torch.int8: core.i8,
    torch.uint8: core.u8, torch.bool: core.boolean,
}


def element_type(dtype: torch.dtype) -> Optional[core.ElementType]:
    """The core element type of a torch dtype, or None where the bridge has none."""
    return ELEMENT_TYPES.get(dtype)


def sym_dim(value: Any) -> DimLike:
    """An int or a `torch.SymInt` as a core dim (a size variable named as torch names it)."""
    if isinstance(value, torch.SymInt):
        return sympy_dim(value.node.expr)
    return int(value)


def sympy_dim(expr: Any) -> DimLike:
    """A sympy size expression (sums, products, floor division, remainders) as a core dim."""
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        return Dim(expr.name)
    args = [sympy_dim(a) for a in expr.args]
    if expr.is_Add:
        total: DimLike = 0
        for a in args:
            total = total + a
        return total
    if expr.is_Mul:
        product: DimLike = 1
        for a in args:
            product = product * a
        return product
    name = type(expr).__name__
    if name == "FloorDiv" and isinstance(args[1], int):
        return args[0] // args[1]
    if name in ("Mod", "PythonMod") and isinstance(args[1], int):
        return args[0] % args[1]
    raise TorchBridgeError(f"size expression {expr} is not a polynomial with floor divisions")


def shape_of(value: Any) -> core.Shape:
    """The core shape of a (fake) tensor, symbolic sizes as size variables."""
    return core.Shape(tuple(sym_dim(d) for d in value.shape))


__all__ = ["ELEMENT_TYPES", "element_type", "sym_dim", "sympy_dim", "shape_of"]
