"""The "cpu" transformer: lowering, passes, then generated code over a planned arena.

    with ng.make_transformer("cpu") as t:
        step = t.computation(loss, x, y)
        step(xv, yv)
        print(step.source)          # the generated Python
        print(step.fused_function)  # the core IR it runs, with its Fused nodes
        print(step.memory_plan())   # arena size, buffers, lifetimes, naive size
        print(step.cache_info())    # its programs, one per binding of the batch length
        print(step.native_source)   # a small training step's whole step as C
"""
from __future__ import annotations

from typing import Optional

from ...debug_info import user_location
from ...errors import TransformerClosedError
from ..base import Computation
from ..lowering_transformer import LoweringTransformer
from ...core.program_cache import CACHE_SIZE, checked_cache_size
from .native_step import checked_native


class CpuComputation(Computation):
    """A computation whose generated source and memory plan can be inspected."""

    def _compiled(self):
        if self.transformer.closed:  # closing released what the last call made
            raise TransformerClosedError(
                "this computation's cpu transformer is closed; its source, fused function "
                "and memory plan went with it", user_location())
        return self.transformer._compile(self)[1]

    @property
    def source(self) -> str:
        """The generated Python of the last call (generated per binding of sizes)."""
        return self._compiled().source

    @property
    def fused_function(self):
        """The core Function of the last call after fusion (per binding of sizes): each
        group that runs as one kernel is a `Fused` node holding its sub-function."""
        return self._compiled().fused_function

    @property
    def fusion_report(self):
        """The fusion pass's `PassRecord` for the last call (fusion runs per binding of sizes,
        in a PassManager: verified, traced, its groups counted as rules fired)."""
        return self._compiled().fusion_report

    @property
    def native_source(self) -> Optional[str]:
        """The C of the last call's program where it runs as one native step (a small
        training step, or any small program with native=True), else None."""
        return self._compiled().native_source

    def memory_plan(self):
        """Arena size, per-buffer offsets and lifetimes, and the naive size, of the last call."""
        return self._compiled().memory_plan()

    @property
    def function(self):
        """The optimized core Function this computation runs."""
        return self.transformer.lowered(self).function


class CpuTransformer(LoweringTransformer):
    """The lowering transformer on the "cpu" backend, with computations that show their
    generated source and memory plan.

    Each computation builds a program per binding of the size variables its fed
    data binds (the lengths of axes without one), and keeps the `cache_size` most
    recently used (`computation.cache_info()` lists them).
    """

    def __init__(self, fuse: bool = True, engine: str = "auto", optimize: bool = True,
                 fuse_min_elements: Optional[int] = None,
                 cache_size: Optional[int] = CACHE_SIZE,
                 native: Optional[bool] = None):
        options: dict = {"fuse": fuse, "engine": engine,
                         "cache_size": checked_cache_size(cache_size),  # refused now, if bad
                         "native": checked_native(native)}
        if fuse_min_elements is not None:  # else the backend's measured default
            options["fuse_min_elements"] = fuse_min_elements
        super().__init__("cpu", optimize=optimize, **options)

    def _make_computation(self, results, parameters) -> Computation:
        return CpuComputation(self, results, parameters)
