"""The "cpu" backend: generated code over a planned arena.

Arguments are checked and sizes bound as on every backend
(`core.bind_arguments`, i.e. `Function.bind`); each distinct binding of the
size variables gets its own program, built from the function specialised to
those sizes (`specialize`: the program a graph built with those lengths fixed
would get), with its shapes, arena and fused kernels. The programs are kept
in a least-recently-used cache of `cache_size` entries (`CACHE_SIZE` unless
given), so a batch size seen lately costs nothing to set up and a stream of
new sizes cannot hold an arena each forever; `cache_info()` shows it.
"""
from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Tuple

import numpy as np

from ... import core
from ...core.backend import Backend, CacheInfo, Capabilities, bind_arguments, checked_outs
from ...core.program_cache import CACHE_SIZE, ProgramCache
from ...debug_info import user_location
from ...errors import (AxgraphError, ExecutionError,
                       no_kernel_error)
from . import parallel
from ...passes import PassManager, ThresholdFromClamp
from .codegen import CODE, Program
from .fusion import compile_fused, fuse
from .kernel_c import KernelCompileError
from .memory_plan import plan_memory
from .native_step import NativeStep, checked_native, unsupported
from .schedule import schedule_function
from .specialize import specialize
from .sums_as_products import sums_as_products


#: Fused kernels pay a fixed cost per call (a ctypes call, argument checks); below
#: about this many elements a group's separate NumPy calls are faster (measured on
#: the 64-32-10 MLP step: 73 us unfused, 205 us with every small group fused).
FUSE_MIN_ELEMENTS = 1 << 15


#: What a program's line may raise that is worded as the interpreter words it.
RUN_ERRORS = (AxgraphError, ArithmeticError, ValueError, IndexError, TypeError)


def _running(program: Program, work: Callable[[], tuple]) -> tuple:
    """work(), which runs `program`, as every call runs it: threads for the step's
    kernels governed by the machine's load, IEEE results (log(0) = -inf, 1/0 = inf,
    ...) without NumPy's RuntimeWarnings, as the interpreter gives them, and an error a
    node's line raised worded as the op that raised it (`Program.attributed`)."""
    parallel.govern()
    try:
        with np.errstate(all="ignore"):
            return work()
    except RUN_ERRORS as error:
        attributed = program.attributed(error, error.__traceback__)
        if attributed is None:  # not raised by a node's line (a bad `out=`, say)
            raise
        raise attributed from (None if isinstance(error, AxgraphError) else error)
    finally:
        parallel.restore()


class CpuFunction:
    """A core Function compiled for the CPU: `fn(*arrays, out=None)` -> results."""

    def __init__(self, function: core.Function, fuse: bool = True, engine: str = "auto",
                 fuse_min_elements: int = FUSE_MIN_ELEMENTS,
                 cache_size: Optional[int] = CACHE_SIZE,
                 native: Optional[bool] = None):
        self.function = function
        for node in function.nodes:  # refused now, not at the first call
            if CODE.lookup(type(node)) is None:
                raise no_kernel_error(ExecutionError, f"the core op {node.op}", node.location,
                                      "cpu backend code for it",
                                      f"register its code with @axgraph.transformers.cpu."
                                      f"codegen.CODE.register({node.op})")
        self.fuse, self.engine = fuse, engine
        self.fuse_min_elements = fuse_min_elements
        #: Which programs run as one C function where they qualify (native_step.py):
        #: None those called with donations (steps updating stored values), True all,
        #: False none (nor with engine="numpy": no C).
        self.native = False if engine == "numpy" else checked_native(native)
        self._generators = {node: np.random.default_rng(node.seed) for node in function.nodes
                            if isinstance(node, (core.RandomUniform, core.RandomNormal))}
        #: The programs per binding, least recently used dropped first (with its arena).
        self._cache: ProgramCache[Program] = ProgramCache(self._build, cache_size, self._evicted)
        #: The most programs kept (None: no limit).
        self.cache_size = self._cache.maxsize
        #: Argument signatures (dtype, shape) already checked, to their binding and program:
        #: one per program kept (the shapes decide the binding), dropped with it.
        self._known: Dict[Tuple, Tuple[Tuple, Program]] = {}
        #: (program, offered arrays, outs) of the last donation checked (see _donated).
        self._donation_memo: Optional[tuple] = None

    @property
    def last_program(self) -> Optional[Program]:
        """The program of the last call (None before the first)."""
        return self._cache.last

    def program(self, bindings: Dict[str, int]) -> Program:
        """The generated program for `bindings` (built on first use, or again after its
        eviction), now the most recently used."""
        return self._cache.get(bindings)

    def _build(self, bindings: Dict[str, int]) -> Program:
        function, rebuilt = specialize(self.function, bindings)
        # after the layout passes, which would sink the activations' transposes through
        # the masks and part them from the products they are fused with
        function = PassManager([ThresholdFromClamp()]).run(function)
        generators = {rebuilt[node]: generator for node, generator in self._generators.items()}
        fusion_report: tuple = ()
        if self.fuse:  # at these sizes: small groups run faster unfused
            # (the NumPy engine would run a multi-pass row group op by op: none for it)
            function, fusion_report = fuse(function, self.fuse_min_elements, bindings,
                                           row_passes=False if self.engine == "numpy" else None)
            function = sums_as_products(function, bindings)  # the Sums left unfused
        kernels = {node: compile_fused(node, bindings, engine=self.engine)
                   for node in function.nodes if isinstance(node, core.Fused)}
        schedule = schedule_function(function, bindings)
        return Program(function, schedule, plan_memory(schedule), bindings, generators, kernels,
                       fusion_report)

    def _evicted(self, key: Tuple, program: Program) -> None:
        """Drop everything that refers to an evicted program, and its arena."""
        for signature in [s for s, (k, _) in self._known.items() if k == key]:
            del self._known[signature]
        if self._donation_memo is not None and self._donation_memo[0] is program:
            self._donation_memo = None
        program.release()

    def cache_info(self) -> CacheInfo:
        """The programs kept per binding of the size variables, and how calls fared.

        Returns
        -------
        CacheInfo
            Calls that found their binding's program built (hits), calls that built
            one (misses), `cache_size`, and the bindings kept, least recently used
            first.
        """
        return self._cache.info()

    def __call__(self, *arrays, out=None, donate: Optional[Mapping[int, int]] = None):
        """Run on `arrays`. `out`: arrays for the results (None entries: fresh ones).
        `donate`: {result position: argument position} where the caller no longer needs
        the argument's values, so the result may be written into that array in place
        (done where the program allows it and the array is a plain writeable one)."""
        try:  # the steady state: argument types and shapes seen before
            # (a list comprehension: half a generator's time over a backward's 24 arrays)
            key, program = self._known[tuple([(a.dtype, a.shape) for a in arrays])]
        except (AttributeError, KeyError):
            arrays, bindings = bind_arguments(self.function, arrays)
            program = self.program(bindings)
            self._known[tuple([(a.dtype, a.shape) for a in arrays])] = (
                ProgramCache.key(bindings), program)
        else:
            self._cache.hit(key, program)
        if not program.native_tried:  # decided before its first run, never after some calls
            program.native_tried = True
            if self.native or (self.native is None and donate):
                self._go_native(program)
        native = program.native
        if native is not None and out is None:  # one C call (IEEE in C: no errstate)
            if not all(a.flags.c_contiguous for a in arrays):
                # C takes dense arrays only; a native program's arrays are small, so copies
                # cost less than its Python program (views of another framework's tensors,
                # a transposed weight saved for a backward graph)
                arrays = tuple(np.ascontiguousarray(a) for a in arrays)
            results = native(arrays, self._donated(program, arrays, donate) if donate
                             else program.no_outs)
            if results is not None:  # else C declined: the Python program runs
                return results
        if out is None:  # the common case, kept short
            return self.run_found(program, arrays,
                                  self._donated(program, arrays, donate) if donate else None)

        def into_out() -> tuple:
            checked = checked_outs(program.function, out, arrays,
                                   [program.shapes[node] for node in program.function.results])
            if donate:
                checked = self._with_donations(program, arrays, checked, donate)
            return self._run_into(program, arrays, checked)
        return _running(program, into_out)

    @staticmethod
    def run_found(program: Program, arrays, outs: Optional[tuple] = None) -> tuple:
        """Run the Python `program` on `arrays` (of the dtypes and shapes it was built
        for: a call that has found its program), results in fresh arrays.

        Why a method of its own: a caller that has found the program once (the
        PyTorch bridge's direct call of a static graph) runs it again without the
        lookup; it runs exactly as a call does, threads governed, errors attributed.

        Parameters
        ----------
        program : Program
            One of this function's programs, not released.
        arrays : sequence of np.ndarray
            The arguments, any strides.
        outs : tuple, optional
            Per result, an array to write it into or None (default: none).

        Returns
        -------
        tuple
            The results, each an array of its own.
        """
        return _running(program, lambda: program.results_for_caller(
            program.run(*arrays, program.no_outs if outs is None else outs)))

    @staticmethod
    def _go_native(program: Program) -> None:
        """Build the program's C step where it qualifies; else say why in
        `program.native_declined` (it then stays Python)."""
        why = unsupported(program)
        if why is None:
            try:
                program.native = NativeStep(program)
            except KernelCompileError as error:
                why = f"the C step did not build: {error}"
        program.native_declined = why

    def _donated(self, program: Program, arrays, donate: Mapping[int, int]) -> tuple:
        """Per result, the donated argument it is written into, or None (a fresh array).

        A training step offers the same state arrays call after call (they are
        updated in place), so the checked answer is kept, with the arrays it was
        checked for, until the program or an offered array changes.
        """
        memo = self._donation_memo
        if memo is not None and memo[0] is program and all(arrays[j] is a for j, a in memo[1]):
            return memo[2]
        outs = list(program.no_outs)
        for k, j in donate.items():
            array = arrays[j]
            if (k, j) in program.donatable and array.base is None \
                    and array.flags.c_contiguous and array.flags.writeable \
                    and not any(other is array for i, other in enumerate(arrays) if i != j):
                outs[k] = array
        donated = tuple(outs)
        self._donation_memo = (program, tuple((j, arrays[j]) for j in donate.values()), donated)
        return donated

    def _with_donations(self, program: Program, arrays, out: tuple, donate: Mapping[int, int]):
        """The caller's (checked) `out`, with donated arguments where it leaves a result
        free."""
        donated = self._donated(program, arrays, donate)
        return [t if t is not None else d for t, d in zip(out, donated)]

    def _run_into(self, program: Program, arrays, targets) -> tuple:
        """A run writing results into the caller's (checked) `out` arrays where it can."""
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

    def _last(self, what: str):
        """The program of the last call; what it holds is made per binding of sizes."""
        if self.last_program is None:
            raise ExecutionError(f"nothing has run yet: the {what} is made per call shape, "
                                 f"at the first call", user_location())
        return self.last_program

    @property
    def source(self) -> str:
        """The generated Python of the last program run."""
        return self._last("generated source").source

    @property
    def fused_function(self) -> core.Function:
        """The core Function the last program ran: after the fusion pass (`Fused` nodes)."""
        return self._last("fused function").function

    @property
    def fusion_report(self) -> tuple:
        """The fusion pass's `PassRecord` for the last program (empty with fuse=False)."""
        return self._last("fusion report").fusion_report

    @property
    def native_source(self) -> Optional[str]:
        """The C of the last program run where it runs as one native step, else None."""
        native = self._last("native step").native
        return None if native is None else native.source

    def memory_plan(self):
        """The memory plan of the last program run."""
        return self._last("memory plan").plan


class CpuBackend(Backend):
    """Compiles core Functions to generated Python over a planned arena, with fused kernels."""

    capabilities = Capabilities(donation=True, caller_outputs=True)

    def compile(self, function: core.Function, fuse: bool = True, engine: str = "auto",
                fuse_min_elements: int = FUSE_MIN_ELEMENTS,
                cache_size: Optional[int] = CACHE_SIZE,
                native: Optional[bool] = None) -> CpuFunction:
        """`function` ready to call; a program is built per binding of its size variables.

        Parameters
        ----------
        function : core.Function
            The function to compile.
        fuse : bool, optional
            Whether groups of elementwise ops run as one fused kernel (default True).
        engine : str, optional
            The fused kernels' engine: "auto" (C where a compiler is found, else
            blocked NumPy), "c" or "numpy".
        fuse_min_elements : int, optional
            Groups smaller than this many elements run unfused (`FUSE_MIN_ELEMENTS`).
        cache_size : int or None, optional
            The most programs kept, one per binding of the size variables, the least
            recently used evicted first with its arena (default `CACHE_SIZE`, 8; None:
            no limit).
        native : bool or None, optional
            Which small programs run their whole step as one generated C function,
            one native call instead of a NumPy call per op: None (default) those
            called with `donate` (steps updating stored values in place, a training
            step), True every one, False none; decided before a program's first run.
            Programs with a node above `native_step.MAX_ELEMENTS` elements, a matrix
            product above `native_step.MAX_MACS` multiply-adds, or an op without C
            code stay Python.

        Returns
        -------
        CpuFunction
            The executable; `cache_info()` reports its programs.

        Raises
        ------
        ExecutionError
            A node's op has no cpu code.
        AxgraphTypeError, AxgraphValueError
            `cache_size` is not an int >= 1 or None; `native` is not a bool or
            None.
        """
        return CpuFunction(function, fuse=fuse, engine=engine,
                           fuse_min_elements=fuse_min_elements, cache_size=cache_size,
                           native=native)

    def passes(self) -> list:
        """Convolutions as shared im2col columns times BLAS, then the cleanup that lets a
        training step build each convolution input's columns once."""
        from ...passes import (AlgebraicSimplification, CommonSubexpressionElimination,
                               ConvolutionAsMatmul, DeadCodeElimination, LayoutSinking)

        return [ConvolutionAsMatmul(), CommonSubexpressionElimination(),
                AlgebraicSimplification(), LayoutSinking(), DeadCodeElimination()]
