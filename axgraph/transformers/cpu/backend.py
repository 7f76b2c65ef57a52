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
from ...errors import FeedError
from .codegen import Program


#: Fused kernels pay a fixed cost per call (a ctypes call, argument checks); below
#: about this many elements a group's separate NumPy calls are faster (measured on
#: the 64-32-10 MLP step: 73 us unfused, 205 us with every small group fused).
FUSE_MIN_ELEMENTS = 1 << 15


class CpuFunction:
    """A core Function compiled for the CPU: `fn(*arrays, out=None)` -> results."""

    def __init__(self, function: core.Function, fuse: bool = True, engine: str = "auto",
                 fuse_min_elements: int = FUSE_MIN_ELEMENTS):
        self.function = function
        self.fuse, self.engine = fuse, engine
        self.fuse_min_elements = fuse_min_elements
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
            groups = self._worth_fusing(bindings)
            program = Program(self.function, bindings, self._generators, groups,
                              self._compile_kernels(groups, bindings))
            self._programs[key] = program
        self.last_program = program
        return program

    def _worth_fusing(self, bindings: Dict[str, int]):
        """The groups big enough, at these sizes, for one kernel to beat separate calls."""
        from ...core import interpreter

        ctx = interpreter.Context(dict(bindings), self._generators)
        sized = []
        for group in self._groups:
            widest = max(int(np.prod(ctx.shape(n.shape), dtype=np.int64)) for n in group.nodes)
            if widest >= self.fuse_min_elements:
                sized.append(group)
        return sized

    def _compile_kernels(self, groups, bindings: Dict[str, int]) -> Dict:
        if not groups:
            return {}
        from ...core import interpreter
        from .fusion import compile_group

        ctx = interpreter.Context(dict(bindings), self._generators)
        kernels = {}
        for group in groups:
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
        if out is None:  # the common case, kept short
            return program.results_for_caller(program.run(*arrays, program.no_outs))
        count = len(self.function.results)
        targets = (out,) if isinstance(out, np.ndarray) else tuple(out)
        if len(targets) != count:
            raise FeedError(f"out= has {len(targets)} entries for {count} results")
        for k, (target, node) in enumerate(zip(targets, self.function.results)):
            expected = (program.shapes[node], node.element_type.dtype)
            if target is not None and (not isinstance(target, np.ndarray)
                                       or (target.shape, target.dtype) != expected
                                       or not target.flags.writeable):
                raise FeedError(f"out[{k}] must be a writeable {expected[1]} array of shape "
                                f"{expected[0]}, not {getattr(target, 'dtype', type(target))}"
                                f"{list(getattr(target, 'shape', ()))}")
        # Results the program computes are written straight into a usable caller array.
        direct = tuple(t if t is not None and t.flags.c_contiguous else None for t in targets)
        results = program.run(*arrays, direct)
        returned = list(program.results_for_caller(results))
        for k, target in enumerate(targets):
            if target is not None:
                if returned[k] is not target:
                    np.copyto(target, results[k])
                returned[k] = target
        return tuple(returned)

    #: `out` may hold None for results that should go to fresh arrays.
    accepts_partial_out = True

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
