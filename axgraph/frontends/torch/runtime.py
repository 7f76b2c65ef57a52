"""A built graph compiled on a core backend, called with torch tensors.

Arguments reach the backend as NumPy views of the tensors' memory (no copy, whatever
their strides) and results come back as tensors over the arrays
the backend made (`torch.from_numpy`, again no copy). A small training step is
dispatch-bound (a few microseconds of arithmetic per graph), so the per-call path is
kept short: a tensor that needs no gradient is viewed without a `detach`, a result
traced with permuted strides is viewed permuted before it becomes a tensor (a NumPy
transpose costs less than a torch permute), and a program that runs as one C function
skips the BLAS thread guard it does not need.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

import numpy as np
import torch

from ... import core
from ...dims import Dim
from ...errors import AxgraphValueError
from ...passes import PassManager, default_passes
from ...transformers.cpu import blas_threads
from .builder import BuiltGraph
from .direct import MISS, direct_call

#: the names `options={"transformer": ...}` takes, and the core backend each means
TRANSFORMERS: Dict[str, str] = {"cpu": "cpu", "jax": "jax", "numpy": "interpreter",
                                "interpreter": "interpreter"}


def core_backend(transformer: str) -> str:
    """The core backend a transformer name stands for.

    Raises
    ------
    AxgraphValueError
        The name is not one of `TRANSFORMERS`.
    """
    try:
        return TRANSFORMERS[transformer]
    except (KeyError, TypeError):
        raise AxgraphValueError(f"transformer {transformer!r} is not one the torch bridge "
                                f"runs on; choose one of {sorted(TRANSFORMERS)}") from None


def _viewed(array: Any, shape: Optional[Tuple[int, ...]] = None,
            permutation: Optional[Tuple[int, ...]] = None) -> np.ndarray:
    """A result's array reshaped to `shape` and permuted, as torch traced it."""
    array = np.asarray(array)
    if shape is not None:
        array = array.reshape(shape)
    if permutation is not None:
        array = array.transpose(permutation)
    return array


def as_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor over an array's memory, strides and all.

    Parameters
    ----------
    array : np.ndarray
        A result's array; a read-only one is copied first, in the same memory order
        (torch's tensors are writeable, and code may read their strides).

    Returns
    -------
    torch.Tensor
        The tensor (no copy where the array is writeable).
    """
    return torch.from_numpy(array if array.flags.writeable else array.copy(order="K"))


def unreshaped_results(function: core.Function
                       ) -> Tuple[core.Function, Tuple[Optional[Tuple[int, ...]], ...]]:
    """`function` with each result that is a Reshape (of static shape) of a computed node
    replaced by that node, and per result the shape it is viewed as (None: its own).

    A backend hands back a result that is a view of a value it computed as a copy
    (the value's memory is reused within the run): a forward graph's saved activations
    are often such views (a layer norm's statistics, an activation seen as a matrix),
    and copying them cost a sixth of the benchmark's transformer forward. Computed
    values are handed back in arrays of their own, row-major, and reshaped here.
    A node stays where it is a result already, or the source of another one.
    """
    results = list(function.results)
    taken = set(results)
    shapes: List[Optional[Tuple[int, ...]]] = [None] * len(results)
    for k, node in enumerate(function.results):
        if not isinstance(node, core.Reshape) or function.results.count(node) > 1:
            continue
        (source,) = node.inputs
        shape = tuple(node.shape)
        if source in taken or source.movement or \
                isinstance(source, (core.Parameter, core.Constant)) or \
                not all(isinstance(d, int) for d in shape):
            continue
        taken.add(source)
        results[k], shapes[k] = source, shape
    if all(shape is None for shape in shapes):
        return function, tuple(shapes)
    return core.Function(results, function.parameters, name=function.name), tuple(shapes)


def _static(function: core.Function) -> bool:
    """Whether every parameter's shape is fixed (one program serves every call)."""
    return all(isinstance(d, int) for p in function.parameters for d in p.shape)


class CompiledGraph:
    """One FX graph (or partition) compiled by axgraph; call it as torch would.

    Parameters
    ----------
    built : BuiltGraph
        The graph as a core Function.
    transformer : str, optional
        "cpu" (default), "jax", or "numpy" (the reference interpreter).
    **options
        Passed to the core backend's compile (the cpu backend's ``cache_size``, ...).
    """

    def __init__(self, built: BuiltGraph, transformer: str = "cpu", **options: Any):
        self.built = built
        self.backend = core_backend(transformer)
        self.function: Optional[core.Function] = None
        self.executable: Any = None
        #: Per result position, the shape its array is viewed as (unreshaped_results).
        self.result_shapes: Tuple[Optional[Tuple[int, ...]], ...] = ()
        if built.function is not None:
            backend = core.get_backend(self.backend)
            manager = PassManager(default_passes() + list(backend.passes()), max_rounds=4)
            self.function, self.result_shapes = unreshaped_results(
                manager.run(built.function))
            self.executable = core.compile(self.function, backend=self.backend, **options)
        #: Per tensor input position, the view of the last tensor there that needed
        #: gradients: (tensor, its data pointer, the view). A parameter is the same tensor
        #: call after call, updated in place; `detach().numpy()` cost a microsecond per
        #: parameter per call. One entry per position: a new tensor replaces the last.
        self.held_views: List[Tuple[Any, int, Any]] = [(None, 0, None)] * len(
            built.tensor_inputs)
        #: Whether calls hold NumPy's BLAS to one thread (see _call); dropped once the
        #: graph's only program is known to run as one C function (no BLAS in it).
        self._blas_guard = self.backend == "cpu"
        #: Whether every parameter's shape is fixed (one program serves every call).
        self.static = self.function is not None and _static(self.function)
        self._raw: FrozenSet[int] = frozenset()
        #: Output positions that repeat an earlier one (the same result, seen the same
        #: way): one tensor for both, as PyTorch's graph has one value. An output the
        #: backward also reads is then saved as the very tensor the user holds, so that
        #: writing to it is caught by autograd's version check, as in eager.
        first: Dict[Tuple[int, Optional[Tuple[int, ...]]], int] = {}
        self.repeats: Dict[int, int] = {}
        for position, output in enumerate(built.outputs):
            if output.kind == "result":
                earlier = first.setdefault((output.index, output.permutation), position)
                if earlier != position:
                    self.repeats[position] = earlier
        #: The direct call (direct.py), written after the first native call; None
        #: before, or where the graph does not run natively.
        self.direct: Optional[Callable[..., Any]] = None
        self._direct_tried = False
        #: Calls the direct call ran (they found the program built: cache hits).
        self.direct_calls = [0]

    @property
    def raw(self) -> FrozenSet[int]:
        """Output positions handed back as NumPy arrays, not tensors: values that only
        another compiled graph reads (a forward's saved activations, set by the thin
        autograd runtime), which skip a tensor's making and its unwrapping there."""
        return self._raw

    @raw.setter
    def raw(self, positions: FrozenSet[int]) -> None:
        self._raw = frozenset(positions)
        self.direct, self._direct_tried = None, False  # written for the old outputs

    def __call__(self, *args: Any) -> Any:
        direct = self.direct
        if direct is not None:
            outputs = direct(args)
            if outputs is not MISS:
                return outputs
        return self._call(*args)

    def _call(self, *args: Any) -> Any:
        """The general call: any arguments the graph takes, converted or refused."""
        built = self.built
        results: Any = ()
        if self.executable is not None:
            arrays = [self.view(position, args[i])
                      for position, i in enumerate(built.tensor_inputs)]
            if self._blas_guard:
                # PyTorch's OpenMP threads spin between its ops, and our kernels share
                # them (one OpenMP runtime in the process); NumPy's OpenBLAS threads
                # spinning beside them would oversubscribe the cores (measured on 2 cores:
                # the 784-512-512-10 step 10x slower when eager steps ran in between)
                with blas_threads.single_threaded():
                    results = self.executable(*arrays)
                self._blas_guard = not (self.static
                                        and self.executable.last_program.native is not None)
            else:
                results = self.executable(*arrays)
        outputs: List[Any] = []
        bindings: Optional[Dict[str, int]] = None
        repeats = self.repeats
        for position, output in enumerate(built.outputs):
            if repeats and position in repeats:
                outputs.append(outputs[repeats[position]])
            elif output.kind == "result":
                array = _viewed(results[output.index], self.result_shapes[output.index],
                                output.permutation)
                outputs.append(array if position in self.raw else as_tensor(array))
            elif output.kind == "argument":
                value = args[output.index]
                if position in self.raw:  # a view of the input's memory (see raw_saved)
                    value = self.view(built.tensor_inputs.index(output.index), value)
                    if output.permutation is not None:
                        value = value.transpose(output.permutation)
                elif output.permutation is not None:
                    value = value.permute(output.permutation)
                outputs.append(value.clone() if output.copy else value)
            elif output.kind == "dim":
                if bindings is None:
                    bindings = self._bindings(args)
                dim = output.dim
                outputs.append(dim.evaluate(bindings) if isinstance(dim, Dim) else dim)
            else:
                outputs.append(output.value)
        if not self._direct_tried and self.executable is not None:
            self._direct_tried = True
            self.direct = direct_call(self, args)
        return outputs[0] if built.single else tuple(outputs)

    def view(self, position: int, value: Any) -> np.ndarray:
        """A view of a tensor input's memory, strides and all (the backends take any
        strides); a NumPy array (a raw result of another graph) as it is.

        A tensor that needs gradients is viewed once while it keeps its memory (the
        same data pointer: the view held here keeps the old memory alive, so a new
        one cannot reuse its address; the guards torch.compile keeps on parameters
        recompile the graph where their shape or strides change).

        Parameters
        ----------
        position : int
            The input's position among the graph's tensor inputs.
        value : torch.Tensor or np.ndarray
            The input.

        Returns
        -------
        np.ndarray
            The view.
        """
        if isinstance(value, np.ndarray):
            return value
        if not value.requires_grad:
            return value.numpy()
        held = self.held_views[position]
        if held[0] is value and held[1] == value.data_ptr():
            return held[2]
        array = value.detach().numpy()
        self.held_views[position] = (value, value.data_ptr(), array)
        return array

    def _bindings(self, args: Any) -> Dict[str, int]:
        """The size variables' values for these arguments (for outputs that are sizes)."""
        bindings = {name: int(args[position]) for position, name in self.built.size_inputs}
        function = self.built.function
        if function is not None:
            shapes = [tuple(args[i].shape) for i in self.built.tensor_inputs]
            bindings.update(function.bind(shapes))
        return bindings

    def cache_info(self) -> core.CacheInfo:
        """What the backend compiled per binding of the size variables (see core.CacheInfo).

        Returns
        -------
        core.CacheInfo
            The executable's report (all zeros when the graph needed no Function), with
            the direct calls counted as the hits they are.
        """
        if self.executable is None:
            return core.CacheInfo(0, 0, 0, 0, ())
        report: core.CacheInfo = self.executable.cache_info()
        return report._replace(hits=report.hits + self.direct_calls[0])


class AxgraphModule(torch.nn.Module):
    """A compiled partition in place of the submodule it replaces in a split graph."""

    def __init__(self, compiled: CompiledGraph):
        super().__init__()
        self.compiled = compiled

    def forward(self, *args: Any) -> Any:
        return self.compiled(*args)


__all__ = ["TRANSFORMERS", "core_backend", "as_tensor", "CompiledGraph", "AxgraphModule"]
