"""The strict core API: element types, shapes, core ops, Function, compile.

    from axgraph import core
    shape = core.Shape(32, 32)
    a = core.Parameter(core.f32, shape)
    b = core.Parameter(core.f32, shape)
    c = core.Parameter(core.f32, shape)
    t0 = core.Add(a, b)
    t1 = core.Multiply(t0, c)
    f = core.Function([t1], [a, b, c])
    (result,) = core.compile(f, backend="interpreter")(x, y, z)

Every op checks element types and shapes when it is built and raises at once,
naming the op and the user's line; nothing is broadcast or converted
implicitly. Dims may be ints or `Dim` expressions (`N`, `2*N + 1`), bound
from the arguments' shapes at call time.
"""
from __future__ import annotations

from ..dims import Dim, symbols
from .backend import (Backend, CacheInfo, Capabilities, Executable, backends, bind_arguments,
                      compile, get_backend, register_backend)
from .function import Function
from .node import Node, at_location
from .ops import *  # noqa: F401,F403 - the op classes are this namespace's point
from .ops import CORE_OPS
from .traits import NgFunction
from .tensor_types import (ElementType, Shape, boolean, element_type, element_types, f16, f32, f64,
                    has_bf16, i8, i16, i32, i64, u8, u16, u32, u64)


def __getattr__(name: str):
    if name == "bf16":  # only with ml_dtypes, imported on first use
        from . import tensor_types
        return tensor_types.bf16
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Dim", "symbols", "Backend", "CacheInfo", "Capabilities", "Executable", "backends", "bind_arguments",
           "compile", "get_backend", "register_backend", "Function", "Node",
           "at_location", "ElementType", "Shape", "boolean", "element_type", "element_types",
           "f16", "f32", "f64", "has_bf16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
           "CORE_OPS", "NgFunction"] + [op.__name__ for op in CORE_OPS]
