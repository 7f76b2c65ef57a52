"""`core.compile(function, backend="cpu")`: generated code over a planned arena.

Argument checks and the binding of size variables are the interpreter's;
each distinct binding gets its own generated program (shapes, arena, fused
kernels), cached, so a batch size seen before costs nothing to set up.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from ... import core
from ...core.interpreter import InterpretedFunction
from .codegen import Program


class CpuFunction:
    """A core Function compiled for the CPU: `fn(*arrays, out=None)` -> results."""

    def __init__(self, function: core.Function, fuse: bool = True, engine: str = "auto"):
        self.function = function
        self.fuse, self.engine = fuse, engine
        self._checker = InterpretedFunction(function)
        self._generators = {node: np.random.default_rng(node.seed) for node in function.nodes
                            if isinstance(node, (core.RandomUniform, core.RandomNormal))}
        self._groups = self._find_groups() if fuse else []
        self._kernels: Dict[Tuple, Dict] = {}
        self._programs: Dict[Tuple, Program] = {}
        #: Argument signatures (dtype, shape) already checked, to their program.
        self._known: Dict[Tuple, Program] = {}
        self.last_program: Optional[Program] = None

    def _find_groups(self):
        from .fusion import find_fusion_groups

        return find_fusion_groups(self.function)

    def program(self, bindings: Dict[str, int]) -> Program:
        """The generated program for `bindings` (built on first use)."""
        key = tuple(sorted(bindings.items()))
        program = self._programs.get(key)
        if program is None:
            program = Program(self.function, bindings, self._generators, self._groups,
                              self._compile_kernels(bindings))
            self._programs[key] = program
        self.last_program = program
        return program

    def _compile_kernels(self, bindings: Dict[str, int]) -> Dict:
        if not self._groups:
            return {}
        from ...core import interpreter
        from .fusion import compile_group

        ctx = interpreter.Context(dict(bindings), self._generators)
        kernels = {}
        for group in self._groups:
            shapes = {node: ctx.shape(node.shape) for node in group.nodes + tuple(group.inputs)}
            kernels[group] = compile_group(group, shapes, engine=self.engine)
        return kernels

    def __call__(self, *arrays, out=None):
        try:  # the steady state: argument types and shapes seen before
            program = self._known[tuple((a.dtype, a.shape) for a in arrays)]
            self.last_program = program
        except (AttributeError, KeyError):
            arrays = self._checker._arguments(arrays)
            program = self.program(self._checker.bind(arrays))
            self._known[tuple((a.dtype, a.shape) for a in arrays)] = program
        results = program.run(*arrays)
        if out is None:
            return tuple(np.array(r, copy=True) for r in results)
        out = self._checker._outs(out, arrays, [np.shape(r) for r in results])
        for target, value in zip(out, results):
            np.copyto(target, value)
        return out

    @property
    def source(self) -> str:
        """The generated Python of the last program run."""
        if self.last_program is None:
            raise RuntimeError("nothing has run yet: the source is generated per call shape")
        return self.last_program.source

    def memory_plan(self):
        """The memory plan of the last program run."""
        if self.last_program is None:
            raise RuntimeError("nothing has run yet: memory is planned per call shape")
        return self.last_program.plan
